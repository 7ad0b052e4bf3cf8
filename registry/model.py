"""What the registry derives per session, and the ACP shapes it answers with.

``SessionState`` is the projection's record of one session (immutable: every change makes a new one, so an
old state can be kept cheaply as the session's past). ``SessionInfo`` and ``ListSessionsResult`` are the
exact ACP wire shapes: absent optional fields are omitted, never sent as null.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from events.model import TitleSource
from registry.errors import InvalidParams

__all__ = [
    "META_CONSISTENCY",
    "META_MESSAGES",
    "META_NAMESPACE",
    "META_TITLE_SOURCE",
    "UNDATED_RANK",
    "ListSessionsResult",
    "SessionInfo",
    "SessionState",
    "format_time",
    "parse_time",
    "rank",
    "session_info",
    "sort_key",
    "title_replaces",
]

META_NAMESPACE: Final = "acp-session-registry"
META_TITLE_SOURCE: Final = f"{META_NAMESPACE}/titleSource"
META_MESSAGES: Final = f"{META_NAMESPACE}/messageCount"
META_CONSISTENCY: Final = f"{META_NAMESPACE}/consistency"

UNDATED_RANK: Final = 1
"""The rank of a session without ``updatedAt``: after every dated one (whose ranks are <= 0)."""


class SessionState(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One session as the log has made it. ``position`` is the last event that touched it."""

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
    position: int
    deleted: bool = False


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
    """ACP ``SessionInfo``. Shared between answers (the registry caches them): treat as read-only."""

    session_id: str
    cwd: str
    additional_directories: list[str] | UnsetType = UNSET
    title: str | UnsetType = UNSET
    updated_at: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListSessionsResult(msgspec.Struct, omit_defaults=True, rename="camel"):
    """ACP ``session/list`` result."""

    sessions: list[SessionInfo]
    next_cursor: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


def visible_meta(state: SessionState) -> dict[str, Any]:
    """The ``_meta`` a client sees: the session's own object plus the registry's namespaced keys."""
    meta = dict(state.meta) if state.meta else {}
    if state.title is not None and state.title_source is not None:
        meta[META_TITLE_SOURCE] = state.title_source.value
    meta[META_MESSAGES] = state.messages
    return meta


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
        raise InvalidParams(f"{field} must be a timestamp, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidParams(f"{field} is not an RFC 3339 timestamp: {value!r}") from exc
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise InvalidParams(f"{field} needs a time zone (e.g. a trailing 'Z'): {value.isoformat()}")
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    raise InvalidParams(f"{field} must be an RFC 3339 string, a datetime or epoch ns, not {type(value).__name__}")
