"""Driving the sources: snapshots in, events out - each write checked against the registry, each id derived.

Writes go straight to the store (``store.append`` with ``event_ids``), not through ``SessionRegistry``'s
commands: those mint fresh ids, and only ids derived from the source make a retry, a second pass or a second
host harmless. The expected version is the session's exact current version, never ``ANY``: the events are a
diff against the state read just before (that is how a deletion made in the registry is seen and kept, and how
a concurrent writer forces a re-read instead of a blind overwrite).

An event id is ``uuid5(session id, source locator, snapshot digest, base version, index)``: the same source
state diffed against the same registry state yields the same events under the same ids, so an append that is
repeated is recognised by the store and writes nothing; any other combination gets new ids, and the expected
version orders it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
import platformdirs

from events.errors import ConcurrencyError, EventIdConflict
from events.memory import MemoryStore
from events.model import Event, SessionCreated, SessionDeleted, SessionInfoChanged, SessionUpdated, TitleSource
from events.sqlite import SqliteStore
from events.store import EventStore
from registry.importers.base import ScanContext, SessionSnapshot, Source, stable_uuid
from registry.importers.state import ImportState, SourceRecord, load_state, locked, save_state
from registry.model import META_NAMESPACE, SessionState
from registry.projection import fold

__all__ = [
    "META_AGENT",
    "META_AGENT_MESSAGES",
    "META_AGENT_SESSION_ID",
    "META_ARCHIVED",
    "META_GIT_BRANCH",
    "META_PATH",
    "AgentSummary",
    "Importer",
    "SkipGroup",
    "Summary",
    "default_state_path",
    "session_id",
]

log = logging.getLogger(__name__)

META_AGENT: Final = f"{META_NAMESPACE}/agent"
META_AGENT_SESSION_ID: Final = f"{META_NAMESPACE}/agentSessionId"
META_PATH: Final = f"{META_NAMESPACE}/path"
META_GIT_BRANCH: Final = f"{META_NAMESPACE}/gitBranch"
META_AGENT_MESSAGES: Final = f"{META_NAMESPACE}/agentMessageCount"
"""The agent's own count, which can shrink (a rewind); the registry's ``messageCount`` only ever grows."""
META_ARCHIVED: Final = f"{META_NAMESPACE}/archived"
_OWN_KEYS: Final = frozenset(
    {META_AGENT, META_AGENT_SESSION_ID, META_PATH, META_GIT_BRANCH, META_AGENT_MESSAGES, META_ARCHIVED}
)
_RETRIES: Final = 10
_EXAMPLES: Final = 5

Outcome = Literal["added", "changed", "removed", "unchanged", "deleted", "conflict"]
ProgressFactory = Callable[[str], Callable[[int, int], None]]


def session_id(agent: str, native_id: str) -> str:
    """The registry id of an imported session: the agent's name, a colon, the agent's own id."""
    return f"{agent}:{native_id}"


class SkipGroup(msgspec.Struct, kw_only=True):
    reason: str
    count: int = 0
    examples: list[str] = msgspec.field(default_factory=list)


class AgentSummary(msgspec.Struct, kw_only=True):
    """What one pass did for one agent. ``unavailable`` says why the agent was not read at all."""

    agent: str
    root: str
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[SkipGroup] = msgspec.field(default_factory=list)
    files_read: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    unavailable: str | None = None

    def skip(self, item: str, reason: str, count: int = 1) -> None:
        for group in self.skipped:
            if group.reason == reason:
                break
        else:
            group = SkipGroup(reason=reason)
            self.skipped.append(group)
        group.count += count
        if len(group.examples) < _EXAMPLES:
            group.examples.append(item)

    @property
    def skipped_count(self) -> int:
        return sum(group.count for group in self.skipped)


class Summary(msgspec.Struct, kw_only=True):
    agents: list[AgentSummary] = msgspec.field(default_factory=list)

    @property
    def touched(self) -> int:
        """Sessions added, changed or removed."""
        return sum(a.added + a.changed + a.removed for a in self.agents)


def default_state_path(store: EventStore) -> Path | None:
    """Beside a SQLite store's file; none for an in-memory store; else per store in the user's state dir."""
    if isinstance(store, SqliteStore):
        return Path(store.path + ".import-state")
    if isinstance(store, MemoryStore):
        return None
    folder = Path(platformdirs.user_state_dir("acp-registry"))
    return folder / f"import-state-{store.identity.store_id}.msgpack"


class Importer:
    """Imports agents' histories into a store, incrementally. One ``run()`` is one pass over every source."""

    def __init__(
        self,
        store: EventStore,
        sources: Sequence[Source],
        *,
        roots: Mapping[str, Path] | None = None,
        state_path: Path | Literal["default"] | None = "default",
        environ: Mapping[str, str] | None = None,
        line_cap: int = 16 << 20,
        sqlite_timeout: float = 2.0,
        progress: ProgressFactory | None = None,
    ) -> None:
        self.store = store
        self.sources = list(sources)
        environ = os.environ if environ is None else environ
        overrides = dict(roots or {})
        self.roots = {s.agent: overrides.get(s.agent) or s.default_root(environ) for s in self.sources}
        self.state_path = default_state_path(store) if state_path == "default" else state_path
        self.line_cap = line_cap
        self.sqlite_timeout = sqlite_timeout
        self.progress = progress
        # Without a state file (in-memory store) the state lives as long as the importer: --watch still works.
        self._memory: ImportState | None = None

    def run(self) -> Summary:
        """One pass: scan each source, write what changed, tombstone what disappeared, save the state."""
        summary = Summary()
        with locked(self.state_path):
            state = self._memory or load_state(self.state_path, self.store.identity.store_id)
            for source in self.sources:
                root = self.roots[source.agent]
                key = f"{source.agent}\x00{os.path.abspath(root)}"
                record = state.sources.setdefault(key, SourceRecord())
                before = msgspec.msgpack.encode(record)
                summary.agents.append(self._run_source(source, root, record))
                if msgspec.msgpack.encode(record) != before:
                    save_state(self.state_path, state)
            if self.state_path is None:
                self._memory = state
        return summary

    def _run_source(self, source: Source, root: Path, record: SourceRecord) -> AgentSummary:
        started = time.perf_counter()
        agent = source.agent
        summary = AgentSummary(agent=agent, root=str(root))
        if not root.is_dir():
            summary.unavailable = f"not found: {root}"
            return summary
        ctx = ScanContext(
            line_cap=self.line_cap,
            sqlite_timeout=self.sqlite_timeout,
            want=frozenset(record.pending),
            progress=None if self.progress is None else self.progress(agent),
        )
        try:
            result = source.scan(root, record.data, ctx)
        except Exception as exc:  # a bug or an OS failure in one source must not stop the others
            log.exception("importing %s from %s failed", agent, root)
            summary.unavailable = f"could not be read: {exc}"
            return summary
        for skip in ctx.skips:
            summary.skip(skip.item, skip.reason, skip.times)
        pending: set[str] = set()
        seen: set[str] = set()
        for snapshot in result.snapshots:
            seen.add(snapshot.native_id)
            sid = session_id(agent, snapshot.native_id)
            outcome = self._write(sid, functools.partial(_plan, agent, sid, snapshot))
            self._count(summary, outcome, sid, snapshot.native_id, record, pending, snapshot.gone)
        if result.present is not None:
            missing = record.imported - result.present - seen
            if missing:
                # Confirm with a second look: a file moved between two folders (archiving) must not read as gone.
                again = source.present(root, result.state)
                missing = set() if again is None else missing - again
            for native_id in sorted(missing):
                sid = session_id(agent, native_id)
                outcome = self._write(sid, functools.partial(_tombstone, agent, sid))
                if outcome == "deleted":  # deleted in the registry before its source went: nothing to say
                    record.imported.discard(native_id)
                    continue
                self._count(summary, outcome, sid, native_id, record, pending, "source gone")
        record.data = result.state
        record.pending = pending
        summary.files_read = ctx.files_read
        summary.bytes_read = ctx.bytes_read
        summary.seconds = round(time.perf_counter() - started, 3)
        return summary

    @staticmethod
    def _count(
        summary: AgentSummary,
        outcome: Outcome,
        sid: str,
        native_id: str,
        record: SourceRecord,
        pending: set[str],
        gone: str | None,
    ) -> None:
        if outcome == "added":
            summary.added += 1
        elif outcome == "changed":
            summary.changed += 1
        elif outcome == "unchanged":
            summary.unchanged += 1
            if gone is not None:
                summary.skip(sid, gone)
        elif outcome == "removed":
            summary.removed += 1
        elif outcome == "deleted":
            summary.skip(sid, "deleted in the registry (stays deleted)")
        else:
            summary.skip(sid, "conflicting writers: retried next pass")
            pending.add(native_id)
            return
        if outcome in ("added", "changed") or (outcome == "unchanged" and gone is None):
            record.imported.add(native_id)
        else:
            record.imported.discard(native_id)

    def _write(self, sid: str, plan: Callable[[SessionState | None], list[tuple[Event, Any]]]) -> Outcome:
        """Append what ``plan`` makes of the session's current state, at exactly that state's version."""
        for _ in range(_RETRIES):
            state = self._state(sid)
            if state is not None and state.deleted:
                return "deleted"
            planned = plan(state)
            if not planned:
                return "unchanged"
            events = [event for event, _ in planned]
            try:
                self.store.append(sid, events, 0 if state is None else state.version, event_ids=[i for _, i in planned])
            except (ConcurrencyError, EventIdConflict):
                continue  # another writer got there first: read again and diff against what it wrote
            if state is None:
                return "added"
            return "removed" if isinstance(events[-1], SessionDeleted) else "changed"
        return "conflict"

    def _state(self, sid: str) -> SessionState | None:
        """The session as the registry folds it (deletions included), straight from its stream."""
        state: SessionState | None = None
        for recorded in self.store.read_stream(sid):
            state = fold(state, recorded) or state
        return state


def _digest(snapshot: SessionSnapshot) -> str:
    return hashlib.sha256(msgspec.msgpack.encode(snapshot)).hexdigest()[:32]


def _plan(agent: str, sid: str, snap: SessionSnapshot, state: SessionState | None) -> list[tuple[Event, Any]]:
    """The events that bring the registry's state of a session to what the source says (empty: nothing to do).

    Times only move forward and the message count only grows (a rewind is visible in ``_meta``); a generated
    title never replaces a user's one; a session the agent marks gone is tombstoned, or never created.
    """
    events: list[Event] = []
    meta = _meta(agent, snap, None if state is None else state.meta)
    last = max(snap.last_activity, snap.created_at)
    if state is None:
        if snap.gone is not None:
            return []
        events.append(
            SessionCreated(
                cwd=snap.cwd,
                at=snap.created_at,
                additional_directories=snap.additional_directories,
                title=snap.title,
                title_source=snap.title_source if snap.title is not None else None,
                meta=meta,
            )
        )
        if last > snap.created_at or snap.messages:
            events.append(SessionUpdated(at=last, messages=snap.messages))
    elif snap.gone is not None:
        events.append(SessionDeleted(reason=snap.gone))
    else:
        grown = max(0, snap.messages - state.messages)
        newer = state.updated_at is None or last > state.updated_at
        if grown or newer:
            at = last if newer or state.updated_at is None else state.updated_at
            events.append(SessionUpdated(at=at, messages=grown))
        change: dict[str, Any] = {}
        if (
            snap.title is not None
            and (snap.title, snap.title_source) != (state.title, state.title_source)
            and (state.title_source is not TitleSource.USER or snap.title_source is TitleSource.USER)
        ):
            change["title"] = snap.title
            change["title_source"] = snap.title_source or TitleSource.AGENT
        if meta != state.meta:
            change["meta"] = meta
        if change:
            events.append(SessionInfoChanged(**change))
    base = "0" if state is None else str(state.version)
    digest = _digest(snap)
    return [(event, stable_uuid(sid, snap.locator, digest, base, str(i))) for i, event in enumerate(events)]


def _tombstone(agent: str, sid: str, state: SessionState | None) -> list[tuple[Event, Any]]:
    if state is None:
        return []
    path = (state.meta or {}).get(META_PATH, "")
    reason = f"source gone: {path} no longer exists ({agent} or its user removed it)"
    return [(SessionDeleted(reason=reason), stable_uuid(sid, "gone", str(state.version)))]


def _meta(agent: str, snap: SessionSnapshot, current: Mapping[str, Any] | None) -> dict[str, Any]:
    """The session's ``_meta``: whatever others put there, plus the importer's keys (which it owns)."""
    meta = {k: v for k, v in (current or {}).items() if k not in _OWN_KEYS}
    meta[META_AGENT] = agent
    meta[META_AGENT_SESSION_ID] = snap.native_id
    meta[META_PATH] = snap.path
    meta[META_AGENT_MESSAGES] = snap.messages
    if snap.git_branch:
        meta[META_GIT_BRANCH] = snap.git_branch
    if snap.archived:
        meta[META_ARCHIVED] = True
    return meta
