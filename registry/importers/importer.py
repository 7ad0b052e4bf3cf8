"""Driving the sources: facts in, events out - each write checked against the registry, each id derived.

Events are decided (``registry.importers.plan``) and checked with the rules every way into the registry shares
(``registry.commands``: ``creation``, ``info_change``, ``check_meta``), and written by one function,
``append_sessions``, straight to the store with ``event_ids`` - not through ``SessionRegistry``, whose commands
mint fresh ids: only ids derived from the source make a retry, a second pass or a second host harmless. The
expected version is the session's exact current version, never ``ANY``: the events are a diff against the state
read just before (that is how a deletion made in the registry is seen and kept, and how a concurrent writer forces
a re-read instead of a blind overwrite).

An event id is ``uuid5(session id, source locator, facts digest, base version, index)``: the same source
state diffed against the same registry state yields the same events under the same ids, so an append that is
repeated is recognised by the store and writes nothing; any other combination gets new ids, and the expected
version orders it.

What a session said since the last pass (its new messages and usage, ``Said``) is added in the same append:
the turns the session does not hold yet (``registry.importers.turns``: compared with the messages it holds, so a
turn a proxy recorded live is not added again, and a re-import adds nothing), in events that keep their messages
beside the log (``content``) and their usage. A session whose files are gone is not deleted: it is marked
``META_SOURCE_GONE`` (``registry.agents``) and keeps its conversation; it comes back when its files do.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal, NamedTuple

import msgspec

from events.errors import ConcurrencyError, EventIdConflict
from events.model import SessionDeleted
from events.store import AppendRequest, EventStore
from registry.agents import current_id
from registry.backends import backend_for
from registry.errors import InvalidParams
from registry.fold import fold, restorable
from registry.importers.base import SAID_BUDGET, ScanContext, ScanResult, SessionFacts, Source, session_id
from registry.importers.plan import (
    META_AGENT_ARCHIVED,
    META_AGENT_SESSION_ID,
    META_GIT_BRANCH,
    META_PATH,
    Planned,
    gone,
    plan,
)
from registry.importers.said import Said
from registry.importers.state import ImportState, SourceRecord, load_state, locked, save_state
from registry.importers.summary import AgentSummary, SkipGroup, Summary
from registry.importers.turns import Group, Thread, added
from registry.model import META_AGENT_MESSAGES, SessionState
from registry.readmodel.guard import open_read_model
from registry.writing import retried

__all__ = [
    "META_AGENT_ARCHIVED",
    "META_AGENT_MESSAGES",
    "META_AGENT_SESSION_ID",
    "META_GIT_BRANCH",
    "META_PATH",
    "AgentSummary",
    "Importer",
    "SkipGroup",
    "Summary",
    "append_sessions",
]

log = logging.getLogger(__name__)

_EXAMPLES: Final = 5

Outcome = Literal["added", "changed", "removed", "unchanged", "deleted", "conflict", "refused"]
_BATCH: Final = 500  # sessions a pass writes in one transaction (one durable commit)
ProgressFactory = Callable[[str], Callable[[int, int], None]]


class _Prepared(NamedTuple):
    sid: str
    native_id: str
    gone: str | None
    plan: Callable[[SessionState | None], Planned]
    request: AppendRequest
    outcome: Outcome


def append_sessions(store: EventStore, requests: Sequence[AppendRequest]) -> None:
    """The importers' one write: sessions' new events, each at its exact version with ids derived from the source,
    in one transaction (``append_batch``: one durable commit for many sessions, atomic)."""
    store.append_batch(requests)


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
        keep_secrets: bool = False,
        said_budget: int = SAID_BUDGET,
    ) -> None:
        self.store = store
        self.sources = list(sources)
        environ = os.environ if environ is None else environ
        overrides = dict(roots or {})
        self.roots = {s.agent: overrides.get(s.agent) or s.default_root(environ) for s in self.sources}
        self._backend = backend_for(store)
        self.state_path = self._backend.import_state_path() if state_path == "default" else state_path
        self.line_cap = line_cap
        self.sqlite_timeout = sqlite_timeout
        self.progress = progress
        self.keep_secrets = keep_secrets
        self.said_budget = said_budget
        """Characters of conversation a round holds (``registry.importers.base.SAID_BUDGET``)."""
        """Keep secrets in the messages read (``registry.conversation.prepare``): masked by default."""
        self._threads: dict[str, Thread] = {}  # a session's thread after the write being prepared, by id
        # Without a state file (in-memory store) the state lives as long as the importer: --watch still works.
        self._memory: ImportState | None = None
        self._cwds: set[str] = set()

    def run(self) -> Summary:
        """One pass: scan each source, write what changed, mark what disappeared as gone, save the state."""
        summary = Summary()
        self._cwds = set()
        # Sources that recover folders from known directories (Gemini's hash-named ones) read after the others.
        order = sorted(range(len(self.sources)), key=lambda i: getattr(self.sources[i], "uses_known_cwds", False))
        done: dict[int, AgentSummary] = {}
        with locked(self.state_path):
            state = self._memory or load_state(self.state_path, self.store.identity.store_id)
            for index in order:
                source = self.sources[index]
                root = self.roots[source.agent]
                key = f"{source.agent}\x00{os.path.abspath(root)}"
                record = state.sources.setdefault(key, SourceRecord())
                before = msgspec.msgpack.encode(record)
                done[index] = self._run_source(source, root, record)
                if msgspec.msgpack.encode(record) != before:
                    save_state(self.state_path, state)
            if self.state_path is None:
                self._memory = state
        summary.agents.extend(done[i] for i in range(len(self.sources)))
        return summary

    def _known_cwds(self) -> set[str]:
        """The directories of this pass's sessions so far and of every session the store lists."""
        cwds = set(self._cwds)
        try:
            model = open_read_model(self._backend)
        except Exception:  # the store has no usable read model (read-only, another version): this pass's only
            log.warning("the store's directories could not be read", exc_info=True)
            return cwds
        try:
            cwds.update(model.cwd_counts())
        finally:
            model.close()
        return cwds

    def _run_source(self, source: Source, root: Path, record: SourceRecord) -> AgentSummary:
        started = time.perf_counter()
        agent = source.agent
        summary = AgentSummary(agent=agent, root=str(root))
        if not root.is_dir():
            summary.unavailable = f"not found: {root}"
            return summary
        ctx = ScanContext(
            agent=agent,
            line_cap=self.line_cap,
            sqlite_timeout=self.sqlite_timeout,
            want=frozenset(record.pending),
            progress=None if self.progress is None else self.progress(agent),
            known_cwds=self._known_cwds,
            conversations=frozenset(record.threads),
        )
        ctx.said_budget = self.said_budget
        pending: set[str] = set()
        seen: set[str] = set()
        while True:  # rounds: a source stops reading when the conversation it holds reaches its budget
            try:
                result = source.scan(root, record.data, ctx)
            except Exception as exc:  # a bug or an OS failure in one source must not stop the others
                log.exception("importing %s from %s failed", agent, root)
                summary.unavailable = f"could not be read: {exc}"
                return summary
            self._round(source, root, record, result, ctx, summary, pending, seen)
            record.data = result.state
            if not ctx.more:
                break
            ctx.another_round(want=frozenset(record.pending - seen), conversations=frozenset(record.threads))
        record.pending = pending
        record.threads = {k: v for k, v in record.threads.items() if k in record.imported or k in pending}
        # Sessions imported before that this pass did not have to touch (their files did not move) are
        # unchanged too: the summary counts every session of the agent, not only those read again.
        summary.unchanged += len(record.imported - seen)
        summary.seconds = round(time.perf_counter() - started, 3)
        return summary

    def _round(
        self,
        source: Source,
        root: Path,
        record: SourceRecord,
        result: ScanResult,
        ctx: ScanContext,
        summary: AgentSummary,
        pending: set[str],
        seen: set[str],
    ) -> None:
        """Write what one round of a source's scan found (the last round marks the sessions gone from it)."""
        agent = source.agent
        for skip in ctx.skips:
            summary.skip(skip.item, skip.reason, skip.times)
        summary.files_read += ctx.files_read
        summary.bytes_read += ctx.bytes_read
        batch: list[_Prepared] = []

        def count(outcome: Outcome, sid: str, native_id: str, gone: str | None) -> None:
            self._count(summary, outcome, sid, native_id, record, pending, gone)
            thread = self._threads.pop(sid, None)
            if thread is not None and outcome in ("added", "changed", "unchanged"):
                record.threads[native_id] = thread

        self._cwds.update(facts.cwd for facts in result.sessions)
        read: dict[str, SessionState | None] = {}  # each stream read once per session here

        def state_of(sid: str) -> SessionState | None:
            read[sid] = self._state(sid)
            return read[sid]

        for facts in result.sessions:
            seen.add(facts.native_id)
            read.clear()
            sid = current_id(agent, facts.native_id, state_of)  # past the records a proxy retired under its id
            said = result.said.get(facts.native_id)
            planned = self._planner(agent, sid, facts, said, record.threads.get(facts.native_id))
            prepared = self._prepare(sid, planned, read[sid])
            if isinstance(prepared, str):
                count(prepared, sid, facts.native_id, facts.gone)
                continue
            batch.append(_Prepared(sid, facts.native_id, facts.gone, planned, *prepared))
            if len(batch) >= _BATCH:
                self._flush(batch, count)
        self._flush(batch, count)
        if result.present is not None:
            missing = record.imported - result.present - seen
            if missing:
                # Confirm with a second look: a file moved between two folders (archiving) must not read as gone.
                again = source.present(root, result.state)
                missing = set() if again is None else missing - again
            for native_id in sorted(missing):
                sid = session_id(agent, native_id)
                outcome = self._write(sid, functools.partial(gone, sid), gone=True)
                if outcome in ("deleted", "unchanged"):  # deleted in the registry, or marked already
                    record.imported.discard(native_id)
                    continue
                self._count(summary, outcome, sid, native_id, record, pending, "source gone")

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
        elif outcome == "refused":
            summary.skip(sid, "its _meta would break the registry's limits (not written)")
            return
        else:
            summary.skip(sid, "conflicting writers: retried next pass")
            pending.add(native_id)
            return
        if outcome in ("added", "changed") or (outcome == "unchanged" and gone is None):
            record.imported.add(native_id)
        else:
            record.imported.discard(native_id)

    def _prepare(
        self, sid: str, plan: Callable[[SessionState | None], Planned], *known: SessionState | None, gone: bool = False
    ) -> Outcome | tuple[AppendRequest, Outcome]:
        """What ``plan`` makes of the session's current state (``known``, or read now): an outcome when nothing is
        to be written, else the append (at exactly that state's version) and the outcome it will have."""
        state = known[0] if known else self._state(sid)
        if state is not None and state.deleted and not restorable(state):
            return "deleted"
        try:
            planned = plan(state)
        except InvalidParams:
            return "refused"
        if not planned:
            return "unchanged"
        events = [event for event, _, _ in planned]
        content = [kept for _, _, kept in planned] if any(kept for _, _, kept in planned) else None
        request = AppendRequest(
            sid, events, 0 if state is None else state.version, [i for _, i, _ in planned], content=content
        )
        outcome: Outcome = (
            "added" if state is None else "removed" if gone or isinstance(events[-1], SessionDeleted) else "changed"
        )
        return request, outcome

    def _planner(
        self, agent: str, sid: str, facts: SessionFacts, said: Said | None, thread: Thread | None
    ) -> Callable[[SessionState | None], Planned]:
        """The plan of one session's write: its facts, and the turns of what it said that it does not hold yet
        (compared with the messages it holds when the plan is made - again after a conflict)."""

        def planned(state: SessionState | None) -> Planned:
            groups: list[Group] = []
            self._threads[sid] = thread or Thread()  # what was read of it, once written
            if said:
                stored = [] if state is None else [kept.message for kept in self.store.messages(sid)]
                turns = added(stored, thread, said, keep_secrets=self.keep_secrets)
                groups = turns.groups
                self._threads[sid] = turns.thread
            return plan(agent, sid, facts, groups, state)

        return planned

    def _flush(self, batch: list[_Prepared], count: Callable[[Outcome, str, str, str | None], None]) -> None:
        """Write the prepared sessions in one batch; if another writer got to one of them first (the batch is
        atomic: then nothing was written), each is written again on its own, re-read and re-planned."""
        if not batch:
            return
        try:
            append_sessions(self.store, [item.request for item in batch])
            outcomes = [item.outcome for item in batch]
        except (ConcurrencyError, EventIdConflict):
            outcomes = [self._write(item.sid, item.plan) for item in batch]
        for item, outcome in zip(batch, outcomes, strict=True):
            count(outcome, item.sid, item.native_id, item.gone)
        batch.clear()

    def _write(self, sid: str, plan: Callable[[SessionState | None], Planned], *, gone: bool = False) -> Outcome:
        """Append what ``plan`` makes of the session's current state, at exactly that state's version, on its own
        (retried when another writer got there first: read again and diff against what it wrote)."""

        def attempt() -> Outcome:
            prepared = self._prepare(sid, plan, gone=gone)
            if isinstance(prepared, str):
                return prepared
            request, outcome = prepared
            append_sessions(self.store, [request])
            return outcome

        try:
            return retried(attempt, (ConcurrencyError, EventIdConflict))
        except (ConcurrencyError, EventIdConflict):
            return "conflict"

    def _state(self, sid: str) -> SessionState | None:
        """The session as the registry folds it (deletions included), straight from its stream."""
        state: SessionState | None = None
        for recorded in self.store.read_stream(sid):
            state = fold(state, recorded) or state
        return state
