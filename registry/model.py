"""What the registry derives per session, and the ACP shapes it answers with: the session's shape lives here.

``SessionState`` is the projection's record of one session (immutable: every change makes a new one, so an
old state can be kept cheaply as the session's past). ``SHOWN_IN_META`` is the one declaration of which state
fields a client sees in ``_meta`` (``visible_meta`` builds the object from it, ``registry.diffs`` compares by it).
``SessionInfo`` and ``ListSessionsResult`` are the exact ACP wire shapes: absent optional fields are omitted,
never sent as null.

Adding a state field: add it here (with a default), make the fold (``registry.fold.fold``) set it, add a
``SHOWN_IN_META`` entry if clients see it, and bump ``STATE_VERSION`` (a test pins the fields to it; the read
model's version and the snapshot format follow it).

Unlike the package's other modules, this one's annotations are evaluated as it loads (no ``from __future__ import
annotations``): every command builds a decoder of ``SessionState`` (``registry.readmodel.keys``), and msgspec then
reads its fields' types as they are instead of compiling each one from its text. A name an annotation here uses
must be imported at run time, before the class.
"""

import datetime as _dt
import time
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from events.model import ForkRef, TitleSource
from registry.agents import IMPORTED
from registry.codegen import shown_in_meta
from registry.errors import InvalidParams
from registry.usage import SessionUsage, meta_value

__all__ = [
    "IMPORTED_AGENTS",
    "META_AGENT",
    "META_AGENT_MESSAGES",
    "META_ARCHIVED",
    "META_CONSISTENCY",
    "META_MESSAGES",
    "META_NAMESPACE",
    "META_PARENT",
    "META_QUERY",
    "META_SNIPPETS",
    "META_TITLE_SOURCE",
    "META_USAGE",
    "SHOWN_IN_META",
    "STATE_VERSION",
    "UNDATED_RANK",
    "ListSessionsResult",
    "MetaField",
    "SessionInfo",
    "SessionState",
    "agent_of",
    "format_time",
    "meta_changed",
    "parse_time",
    "rank",
    "session_info",
    "sort_key",
    "title_replaces",
    "visible_meta",
]

META_NAMESPACE: Final = "acp-session-registry"
META_TITLE_SOURCE: Final = f"{META_NAMESPACE}/titleSource"
META_MESSAGES: Final = f"{META_NAMESPACE}/messageCount"
META_CONSISTENCY: Final = f"{META_NAMESPACE}/consistency"
META_ARCHIVED: Final = f"{META_NAMESPACE}/archived"
"""``true`` in a session's ``_meta`` while it is archived (absent otherwise): ACP v1's ``session_info_update`` has
no field for it, so an archive or unarchive reaches a client as a ``_meta`` change."""
META_AGENT: Final = f"{META_NAMESPACE}/agent"
"""The agent a session belongs to (absent for the registry's own sessions)."""
META_QUERY: Final = f"{META_NAMESPACE}/query"
"""In a ``session/list`` request's ``_meta``: words to search every kept conversation for (the answer lists only the
sessions that match, best first; advertised in ``sessionCapabilities.list._meta``)."""
META_SNIPPETS: Final = f"{META_NAMESPACE}/snippets"
"""In a searched ``session/list`` answer, each session's ``_meta``: the passages that matched (``[{role, text}]``)."""
META_PARENT: Final = f"{META_NAMESPACE}/parent"
"""A fork's source: ``{"sessionId": ..., "position": P}`` (the log position the fork was taken at)."""
META_AGENT_MESSAGES: Final = f"{META_NAMESPACE}/agentMessageCount"
"""The agent's own message count as an import last read it from its files (``registry.importers``), which can
shrink (a rewind) while ``messageCount`` only grows; a live turn that saw it move was maybe counted by that import
(``SessionRegistry.record_turn``)."""
META_USAGE: Final = f"{META_NAMESPACE}/usage"
"""What the session used so far, where any turn reported it: tokens, costs by currency (estimates marked) and the
last model and context window (``registry.usage.meta_value``)."""

IMPORTED_AGENTS: Final = frozenset(IMPORTED)
"""The agent names of the importers (``registry.agents.IMPORTED``): a session whose creation records no agent but whose
id is ``<name>:<native id>`` with one of these names belongs to that agent (records written before ``agent``
existed). Any other id without a recorded agent has none."""

STATE_VERSION: Final = 4
"""Bumped whenever ``SessionState``'s fields change (``tests/test_session_shape.py`` pins them to it). The read
model's version and the snapshot format add it to their own revision, so both move with it: states stored in an
older shape are rebuilt from the log, never decoded into the new one."""

UNDATED_RANK: Final = 1
"""The rank of a session without ``updatedAt``: after every dated one (whose ranks are <= 0)."""


class SessionState(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One session as the log has made it. ``position`` is the last event that touched it.

    The fold changes a state with ``msgspec.structs.replace`` (only what an event changes); the read models
    store it encoded (array-like, new fields with defaults before ``position``, which stays last: a stored state's
    last eight bytes are its position, which the server writes when it alone knows it - ``readmodel.keys.Seal``).
    Its fields are pinned to ``STATE_VERSION`` (which the read-model and snapshot format versions follow) by
    ``tests/test_session_shape.py``.
    """

    session_id: str
    cwd: str
    additional_directories: tuple[str, ...]
    title: str | None
    title_source: TitleSource | None
    updated_at: int | None
    meta: dict[str, Any] | None
    messages: int
    created_at: int
    version: int
    deleted: bool = False
    archived: bool = False
    agent: str | None = None
    parent: ForkRef | None = None
    usage: SessionUsage | None = None
    """What the session's turns used, summed (None: no turn reported usage)."""
    position: int = 0
    """The last event that touched it (0: a state not in the log yet)."""


def agent_of(session_id: str, recorded: str | None) -> str | None:
    """The agent a session belongs to: the one its creation recorded, else an importer's name prefixing its id."""
    if recorded is not None:
        return recorded
    prefix, colon, _ = session_id.partition(":")
    return prefix if colon and prefix in IMPORTED_AGENTS else None


class MetaField(msgspec.Struct, frozen=True):
    """A state field a client sees in ``_meta``: its key; the state fields its value is read from (while any of them
    is None or False nothing is shown); and ``shown``, the value for a state: None, the first field read as it is; a
    string, that attribute of the first field read; or a function of the state. A value of None or False is not
    shown. ``follows``: the value changes exactly when a field it reads does (the diff then compares those fields,
    not the values)."""

    key: str
    reads: tuple[str, ...]
    shown: Callable[[SessionState], Any] | str | None = None
    follows: bool = True

    def value(self, state: SessionState) -> Any:
        """What ``_meta`` shows under ``key`` for ``state`` (None: nothing)."""
        for name in self.reads:
            read = getattr(state, name)
            if read is None or read is False:
                return None
        first = getattr(state, self.reads[0])
        shown = self.shown
        value = first if shown is None else getattr(first, shown) if isinstance(shown, str) else shown(state)
        return None if value is False else value


def _shown_parent(state: SessionState) -> dict[str, Any] | None:
    parent = state.parent
    return None if parent is None else {"sessionId": parent.session_id, "position": parent.position}


def _shown_usage(state: SessionState) -> dict[str, Any] | None:
    usage = state.usage
    return None if usage is None else meta_value(usage)


SHOWN_IN_META: Final[tuple[MetaField, ...]] = (
    # The title's source is shown only beside a title: another title under the same source shows the same.
    # ``_value_``: the member's value as stored (``.value`` is a slower descriptor).
    MetaField(META_TITLE_SOURCE, ("title_source", "title"), "_value_", follows=False),
    MetaField(META_MESSAGES, ("messages",)),
    MetaField(META_ARCHIVED, ("archived",)),  # true, or absent
    MetaField(META_AGENT, ("agent",)),
    MetaField(META_PARENT, ("parent",), _shown_parent),
    MetaField(META_USAGE, ("usage",), _shown_usage),
)
"""The one declaration of which state fields ``_meta`` shows, added over the session's own object: ``visible_meta``
builds the object from it and ``meta_changed`` (what ``registry.diffs`` sends a ``_meta`` update on) compares by
it. ``tests/test_session_shape.py`` holds each entry's ``reads`` and ``follows`` to its value."""


visible_meta, meta_changed = shown_in_meta(SHOWN_IN_META, SessionState.__struct_fields__)  # written out: codegen.py
visible_meta.__doc__ = """The ``_meta`` a client sees: the session's own object plus the registry's namespaced keys."""
meta_changed.__doc__ = """Whether the ``_meta`` a client sees differs between two states of a session."""


def title_replaces(current: TitleSource | None, new: TitleSource) -> bool:
    """Whether a title from ``new`` replaces one from ``current``: a generated title (``AGENT``, ``PROMPT``) never
    replaces one the user set. The one home of that rule: the fold enforces it, commands use it to write nothing."""
    return not (current is TitleSource.USER and new is not TitleSource.USER)


def rank(updated_at: int | None) -> int:
    """The first half of the sort key: ``updatedAt`` descending *at the precision the wire shows* (milliseconds),
    so that a client re-sorting a page by ``(updatedAt desc, sessionId asc)`` gets the very same order."""
    return UNDATED_RANK if updated_at is None else -(updated_at // 1_000_000)


def sort_key(state: SessionState) -> tuple[int, str]:
    """The list order: updatedAt descending (to the millisecond), sessions without one last, then sessionId
    ascending (by code point, which is also UTF-8 byte order)."""
    updated = state.updated_at
    return (UNDATED_RANK if updated is None else -(updated // 1_000_000), state.session_id)


class SessionInfo(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel", gc=False):
    """ACP ``SessionInfo``. Shared between answers (the registry caches them): treat as read-only.

    ``archived`` (unstable ACP) is sent only as ``true``: absent means not archived. ``agent`` is read from
    ``_meta`` (ACP has no field for it).
    """

    session_id: str
    cwd: str
    additional_directories: list[str] | UnsetType = UNSET
    title: str | UnsetType = UNSET
    updated_at: str | UnsetType = UNSET
    archived: bool | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")

    @property
    def agent(self) -> str | None:
        """The agent the session belongs to (None: the registry's own)."""
        meta = self.meta
        found = None if meta is UNSET else meta.get(META_AGENT)
        return found if isinstance(found, str) else None


class ListSessionsResult(msgspec.Struct, omit_defaults=True, rename="camel"):
    """ACP ``session/list`` result."""

    sessions: list[SessionInfo]
    next_cursor: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


def session_info(state: SessionState, *, additional_directories: bool = True) -> SessionInfo:
    """The ACP view of a session. ``additionalDirectories`` only when advertised, and omitted when empty."""
    return SessionInfo(
        session_id=state.session_id,
        cwd=state.cwd,
        additional_directories=list(state.additional_directories)
        if additional_directories and state.additional_directories
        else UNSET,
        title=UNSET if state.title is None else state.title,
        updated_at=UNSET if state.updated_at is None else format_time(state.updated_at),
        archived=True if state.archived else UNSET,
        meta=visible_meta(state),
    )


_seconds_cache: dict[int, str] = {}


def format_time(ns: int) -> str:
    """RFC 3339 UTC with milliseconds: ``2026-12-02T10:00:00.123Z``.

    The date-and-time part of recent seconds is cached: list pages and bursts of activity reuse it.
    """
    seconds, rest = divmod(ns, 1_000_000_000)
    prefix = _seconds_cache.get(seconds)
    if prefix is None:
        t = time.gmtime(seconds)
        prefix = f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}."
        if len(_seconds_cache) >= 4096:
            _seconds_cache.clear()
        _seconds_cache[seconds] = prefix
    return f"{prefix}{rest // 1_000_000:03d}Z"


def parse_time(value: object, *, field: str = "updatedAt") -> int:
    """Epoch ns from an int (ns), an aware ``datetime`` or an RFC 3339 string with a zone."""
    if isinstance(value, bool):
        raise InvalidParams(f"{field} must be a timestamp, not a boolean", field=field)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidParams(f"{field} is not an RFC 3339 timestamp: {value!r}", field=field) from exc
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise InvalidParams(f"{field} needs a time zone (e.g. a trailing 'Z'): {value.isoformat()}", field=field)
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    raise InvalidParams(
        f"{field} must be an RFC 3339 string, a datetime or epoch ns, not {type(value).__name__}", field=field
    )
