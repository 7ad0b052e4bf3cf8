"""The importer interface: what a source of agent history is, and the common facts it reports per session.

Every agent is read the same way. A *parser* (one module per agent) knows one agent's format and turns its
records into a ``Draft``: the session's facts as the agent wrote them - cwd, times, title candidates in the
agent's own order, its message count, branch, archive and delete marks - or the reason it is not a session to
list. ``settle`` (here, shared) checks a draft with the registry's own rules (``registry.commands``,
``registry.limits``) and makes it ``SessionFacts``; what fails a check is skipped with its reason, never
written. Walking folders, offsets and fingerprints (``files.py``, ``databases.py``), diffing against the
registry and appending (``importer.py``) are shared too, so adding an agent is one module of format knowledge.

A ``Source.scan`` reports the facts of every session that may have changed - the session as the agent's files
describe it *now*, never a delta - with what each said since the last pass (``Said``: its new messages and
usage, a delta read from where the last pass stopped), plus the set of native ids present (the importer marks the
ones that disappeared as gone from the agent). Sources never touch the log.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final, NamedTuple, Protocol

import msgspec

from events.model import TitleSource
from registry.agents import stored_id
from registry.commands import (
    PROMPT_TITLE_LENGTH,
    check_directories,
    check_messages,
    check_session_id,
    check_time,
    check_title,
    one_line,
    prompt_title,
)
from registry.errors import InvalidParams, accepts
from registry.importers.said import Call, Said
from registry.limits import MAX_DIRECTORIES, MAX_TIME_NS, MIN_TIME_NS
from registry.paths import normalise_cwd

__all__ = [
    "PROMPT_TITLE_LENGTH",
    "Activity",
    "Conversation",
    "CountedConversation",
    "Draft",
    "ScanContext",
    "ScanResult",
    "SessionFacts",
    "Skip",
    "Source",
    "TranscriptRecord",
    "agent_time",
    "clean_title",
    "env_path",
    "epoch_ns",
    "first_text",
    "home",
    "is_uuid",
    "prompt_title",
    "session_id",
    "settle",
    "stable_uuid",
]

clean_title = one_line
"""A title candidate on one line (``registry.commands.one_line``)."""

_MAX_AGENT_NS: Final = 7_258_118_400 * 1_000_000_000  # 2200-01-01: later stamps in agents' files are garbage
SAID_BUDGET: Final = 32 << 20
"""Characters of conversation a round of an import holds in memory: a first import of a large history is read and
written in rounds of about this much (a file, a database's session, is never split)."""


def session_id(agent: str, native_id: str) -> str:
    """The registry id of an imported session: ``registry.agents.stored_id`` (the agent's name, a colon, its own id)."""
    return stored_id(agent, native_id)


class SessionFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One session as the agent's files describe it now, checked. Times are epoch ns from the records.

    ``locator`` says where in the source this state was read up to (``file@offset``, ``db:<digest>``); event
    ids are derived from it. ``gone`` is set when the agent itself marks the session deleted (a reason).
    """

    native_id: str
    cwd: str
    created_at: int
    last_activity: int
    path: str
    locator: str
    title: str | None = None
    title_source: TitleSource | None = None
    messages: int = 0
    git_branch: str | None = None
    archived: bool = False
    additional_directories: tuple[str, ...] = ()
    gone: str | None = None


class TranscriptRecord(msgspec.Struct, rename="camel"):
    """The fields of a JSONL transcript's record that Claude Code writes and Qwen Code writes as it does (each adds
    its own): its kind, its own and its session's ids, its time and cwd, whether a subagent wrote it, the git
    branch, and its ``message``, decoded only where it is read. Any JSON value decodes: the fold judges it."""

    type: Any = None
    uuid: Any = None
    timestamp: Any = None
    cwd: Any = None
    session_id: Any = None
    is_sidechain: Any = None
    git_branch: Any = None
    message: msgspec.Raw = msgspec.Raw()


class Activity(msgspec.Struct, kw_only=True):
    """What every agent's fold keeps alike, written once: the first cwd, the first and the latest time, and the
    message ids seen lately (an agent that writes one message as several records, or twice, counts it once).

    A parser's fold subclasses it and calls these as its records say; which records count is format knowledge.
    """

    cwd: str | None = None
    created: int | None = None
    last: int | None = None
    recent: list[str] = msgspec.field(default_factory=list)

    def saw_cwd(self, value: object) -> None:
        """The first non-empty cwd wins (later records of a session repeat it, or are another's history)."""
        if self.cwd is None and isinstance(value, str) and value:
            self.cwd = value

    def saw_time(self, at: int | None, *, starts: bool = True, active: bool = True) -> None:
        """A record's time: the first one is the creation (``starts``), the latest the activity (``active``)."""
        if at is None:
            return
        if starts and self.created is None:
            self.created = at
        if active and (self.last is None or at > self.last):
            self.last = at

    def saw_span(self, at: int | None) -> None:
        """A time in records that are not in time order: the earliest is the creation, the latest the activity."""
        if at is not None:
            self.created = at if self.created is None else min(self.created, at)
            self.last = at if self.last is None else max(self.last, at)

    def first_sight(self, message_id: object, window: int) -> bool:
        """False when ``message_id`` (a str) is among the last ``window`` seen: the same message again."""
        if not isinstance(message_id, str):
            return True
        if message_id in self.recent:
            return False
        self.recent.append(message_id)
        del self.recent[:-window]
        return True


class Conversation(Activity, kw_only=True):
    """The fold of an agent whose records hold a conversation: ``Activity``, and the tool calls said without their
    results yet (a call and its result are said as one tool message: ``registry.importers.said``)."""

    calls: dict[str, Call] = msgspec.field(default_factory=dict)
    """Tool calls whose results are awaited, by call id (``hold_call``, ``say_result``, ``say_unanswered``)."""


class CountedConversation(Conversation, kw_only=True):
    """A conversation whose message count is the user's prompts and the agent's replies, each counted as the agent
    shows them (which records are a prompt or a reply is format knowledge)."""

    prompts: int = 0
    replies: int = 0

    @property
    def messages(self) -> int:
        """The session's message count."""
        return self.prompts + self.replies


class Draft(NamedTuple):
    """What a parser read about one session, unchecked: ``settle`` holds it to the registry's rules.

    ``titles`` are the agent's title candidates in its own order of priority, each with its source; the first one
    left after cleaning wins. A candidate from a prompt (``PROMPT``) is cut as every prompt title is
    (``registry.commands.prompt_title``), the agent's own titles (``USER``, ``AGENT``) at the title limit.
    ``skip`` is the parser's reason not to list the session at all (a subagent, an empty or metadata-only session).
    """

    cwd: object = None
    created: int | None = None
    last: int | None = None
    titles: Sequence[tuple[object, TitleSource]] = ()
    messages: int = 0
    git_branch: str | None = None
    archived: bool = False
    directories: Sequence[object] = ()
    gone: str | None = None
    skip: str | None = None


class Skip(NamedTuple):
    """Something not imported (or imported without some of its lines), and why."""

    item: str
    reason: str
    times: int = 1


def settle(
    agent: str, native_id: str, draft: Draft, *, path: str, locator: str
) -> tuple[SessionFacts | None, str | None]:
    """The checked facts of a draft, or why it cannot be listed (the same rules every way into the registry
    keeps: ``registry.commands``). Never raises for what an agent wrote."""
    if draft.skip is not None:
        return None, draft.skip
    try:
        check_session_id(session_id(agent, native_id), "session id")
    except InvalidParams as exc:
        return None, str(exc)
    try:
        cwd = normalise_cwd(draft.cwd, field="cwd")
    except InvalidParams:
        return None, f"cwd missing or not an absolute path: {_short(draft.cwd)}"
    created = _checked_time(draft.created)
    if created is None:
        return None, "no timestamps"
    last = _checked_time(draft.last)
    title, source = None, None
    for text, candidate in draft.titles:
        cleaned = prompt_title(text) if candidate is TitleSource.PROMPT else one_line(text)
        if cleaned is None:
            continue
        try:
            title, source = check_title(cleaned), candidate
        except InvalidParams:
            continue  # e.g. a lone surrogate from a broken file: the next candidate
        break
    directories: tuple[str, ...] = ()
    if draft.directories:
        absolute = [d for d in draft.directories if accepts(normalise_cwd, d)][:MAX_DIRECTORIES]
        try:
            directories = tuple(d for d in dict.fromkeys(check_directories(absolute)) if d != cwd)
        except InvalidParams:
            directories = ()
    facts = SessionFacts(
        native_id=native_id,
        cwd=cwd,
        created_at=created,
        last_activity=max(last or created, created),
        path=path,
        locator=locator,
        title=title,
        title_source=source,
        messages=check_messages(min(max(draft.messages, 0), (1 << 31) - 1)),
        git_branch=draft.git_branch or None,
        archived=draft.archived,
        additional_directories=directories,
        gone=draft.gone,
    )
    return facts, None


def _checked_time(value: int | None) -> int | None:
    if value is None:
        return None
    try:
        return check_time(value, "time")
    except InvalidParams:
        return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


class ScanContext:
    """What a scan may use and report: limits, the ids it must report again, skips, progress, read counters."""

    def __init__(
        self,
        *,
        agent: str = "",
        line_cap: int = 16 << 20,
        sqlite_timeout: float = 2.0,
        want: frozenset[str] = frozenset(),
        progress: Callable[[int, int], None] | None = None,
        known_cwds: Callable[[], Iterable[str]] | None = None,
        conversations: frozenset[str] | None = None,
    ) -> None:
        self.agent = agent
        self.line_cap = line_cap
        self.sqlite_timeout = sqlite_timeout
        self.want = want
        """Native ids the importer could not write last time: report them again even if unchanged."""
        self.conversations = conversations
        """Native ids whose conversation the importer holds as far as the state was read (None: every one). A
        session reported without being one of them (it was skipped until now) says its whole conversation."""
        self.skips: list[Skip] = []
        self.files_read = 0
        self.bytes_read = 0
        self._progress = progress
        self._total = 0
        self._done = 0
        self._known_cwds = known_cwds
        self._cwds: frozenset[str] | None = None
        self.said_budget = SAID_BUDGET
        """Characters of conversation one round may hold; a source that reaches it stops reading (``more``)."""
        self.more = False
        """Set by a source that stopped reading at ``said_budget``: another round reads the rest."""
        self.announced = False
        """The files to read were counted for the progress bar in an earlier round."""

    def another_round(self, *, want: frozenset[str], conversations: frozenset[str]) -> None:
        """Ready for the next round of the same pass: what the last one reported (skips, counters) is cleared,
        the progress bar goes on."""
        self.want, self.conversations = want, conversations
        self.skips = []
        self.files_read = self.bytes_read = 0
        self.more = False
        self.announced = True

    def known_cwds(self) -> frozenset[str]:
        """Working directories the registry knows of: the store's sessions and this pass's other agents' (asked
        only when a source needs them - a folder named by a hash of its project root - and then once)."""
        if self._cwds is None:
            self._cwds = frozenset(self._known_cwds()) if self._known_cwds is not None else frozenset()
        return self._cwds

    def skip(self, item: str, reason: str, count: int = 1) -> None:
        self.skips.append(Skip(item, reason, count))

    def settle(self, native_id: str, draft: Draft, *, path: str, locator: str) -> SessionFacts | None:
        """``settle`` for this scan's agent; a session that cannot be listed becomes a skip."""
        facts, reason = settle(self.agent, native_id, draft, path=path, locator=locator)
        if reason is not None:
            self.skip(path, reason)
        return facts

    def reading(self, total: int) -> None:
        """About to read ``total`` files (or databases): drives the progress bar of a large first import."""
        if self.announced:
            return
        self._total += total
        if self._progress is not None:
            self._progress(self._done, self._total)

    def advance(self, done: int = 1) -> None:
        self._done += done
        if self._progress is not None:
            self._progress(self._done, self._total)


class ScanResult(NamedTuple):
    state: bytes
    """The source's new state, opaque to the importer; handed back to the next ``scan``."""
    sessions: list[SessionFacts]
    """Sessions that changed (and those in ``ScanContext.want``), each once."""
    present: frozenset[str] | None
    """Every native id the source has now, readable or not; None when discovery was incomplete (no deletes)."""
    said: Mapping[str, Said] = {}
    """What the sessions of ``sessions`` said since the last pass (their messages and usage), by native id."""


class Source(Protocol):
    """One agent's history on disk."""

    agent: ClassVar[str]
    """The agent's name: ``--agent`` value, ``_meta`` value and session id prefix (``claude-code:<id>``)."""

    def default_root(self, environ: Mapping[str, str]) -> Path:
        """Where the agent keeps its data: its environment override, else its default location."""
        ...

    def scan(self, root: Path, state: bytes | None, ctx: ScanContext) -> ScanResult:
        """Read what changed since ``state``. Never raises for bad input: skips go to ``ctx.skip``."""
        ...

    def present(self, root: Path, state: bytes) -> frozenset[str] | None:
        """A fresh, cheap look at which native ids exist (confirms a disappearance before a session is marked gone)."""
        ...


# -- helpers the parsers share ------------------------------------------------------------------------


def env_path(environ: Mapping[str, str], name: str) -> Path | None:
    """An absolute path from an environment variable, ``~`` expanded; None when unset or empty."""
    value = environ.get(name, "").strip()
    return Path(os.path.expanduser(value)) if value else None


def home(environ: Mapping[str, str]) -> Path:
    value = environ.get("HOME", "").strip()
    return Path(value) if value else Path.home()


def agent_time(value: object) -> int | None:
    """Epoch ns from a time as agents write them - ISO 8601 / RFC 3339 (no zone: UTC) or epoch seconds -
    or None when it is not one. Lenient on purpose (``registry.model.parse_time`` is the strict one for
    commands): a stamp before 1970 or after 2200 is garbage in another program's file and counts as missing.
    """
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            parsed = _dt.datetime.fromisoformat(text)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=_dt.UTC)
        try:
            delta = parsed - _EPOCH
        except OverflowError:
            return None
        ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
        return ns if MIN_TIME_NS <= ns <= _MAX_AGENT_NS else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_ns(value)
    return None


def epoch_ns(value: float, *, unit_ns: int = 1_000_000_000) -> int | None:
    """Epoch ns from a number of seconds (``unit_ns=1_000_000`` for milliseconds); None when out of range.

    Integers are scaled exactly (a float would turn ``...010001`` ms into ``...010000.999`` and lose the ms).
    """
    try:
        ns = value * unit_ns if isinstance(value, int) else round(value * unit_ns)
    except (OverflowError, ValueError):
        return None
    return ns if MIN_TIME_NS <= ns <= min(_MAX_AGENT_NS, MAX_TIME_NS) else None


_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def is_uuid(text: str) -> bool:
    return _UUID.match(text) is not None


def first_text(content: object) -> str:
    """The text of a message's content as agents write it: a string as it is, or the text pieces of a list of
    content parts (``{"type": "text", "text": ...}`` or plain strings) joined; anything else has none."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = (p.get("text") if isinstance(p, dict) else p for p in content)
    return " ".join(t for t in texts if isinstance(t, str))


def stable_uuid(*parts: str) -> uuid.UUID:
    """A deterministic id from text parts (uuid5 in the importers' namespace)."""
    return uuid.uuid5(IMPORT_NAMESPACE, "\x1f".join(parts))


IMPORT_NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/acp-session-registry/importers")
