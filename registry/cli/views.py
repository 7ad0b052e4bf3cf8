"""How sessions, events and changes look: rich tables for people, JSON shapes for programs.

``tail --json`` writes one JSON-RPC notification per line. An ``Updated`` item is exactly the ACP
``session/update`` message of ``registry.diffs.encode_session_update``. ACP has no notification for a session
that appears or disappears, so those are the extension notifications ``acp-registry serve`` sends for them
(``registry.acp.agent``), with the log position added so a reader can resume with ``tail --from``::

    {"jsonrpc":"2.0","method":"_registry/session_added",
     "params":{"sessionId":"...","position":12,"session":{...SessionInfo...}}}
    {"jsonrpc":"2.0","method":"_registry/session_removed","params":{"sessionId":"...","position":13}}
"""

from __future__ import annotations

from typing import Any, Final, assert_never

import msgspec
from msgspec import UNSET

import events
from registry.cli.terminal import printable
from registry.diffs import Added, ListChange, Removed, Updated, encode_session_update
from registry.model import SessionInfo, SessionState, format_time
from registry.usage import turn_usage_text

__all__ = [
    "METHOD_SESSION_ADDED",
    "METHOD_SESSION_REMOVED",
    "change_json",
    "change_text",
    "describe_event",
    "event_meta",
    "meta_lines",
]

METHOD_SESSION_ADDED: Final = "_registry/session_added"
METHOD_SESSION_REMOVED: Final = "_registry/session_removed"


class _SessionAdded(msgspec.Struct, rename="camel"):
    session_id: str
    position: int
    session: SessionInfo


class _SessionRemoved(msgspec.Struct, rename="camel"):
    session_id: str
    position: int


class _Notification(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: _SessionAdded | _SessionRemoved


_json = msgspec.json.Encoder()


def change_json(item: ListChange) -> bytes:
    """One ``tail --json`` line (see the module docstring)."""
    if isinstance(item, Updated):
        return encode_session_update(item.notification)
    if isinstance(item, Added):
        return _json.encode(
            _Notification(method=METHOD_SESSION_ADDED, params=_SessionAdded(item.session_id, item.position, item.info))
        )
    return _json.encode(
        _Notification(method=METHOD_SESSION_REMOVED, params=_SessionRemoved(item.session_id, item.position))
    )


def change_text(item: ListChange) -> str:
    """One ``tail`` line for people: position, what happened, to which session, and the changed fields."""
    if isinstance(item, Added):
        info = item.info
        title = "(untitled)" if info.title is UNSET else _quote(info.title)
        return printable(f"#{item.position:<6} added    {item.session_id}  {info.cwd}  {title}")
    if isinstance(item, Removed):
        return printable(f"#{item.position:<6} removed  {item.session_id}")
    update = item.notification.update
    fields = []
    if update.title is not UNSET:
        fields.append("title null (cleared)" if update.title is None else f"title {_quote(update.title)}")
    if update.updated_at is not UNSET:
        fields.append("updatedAt null (cleared)" if update.updated_at is None else f"updatedAt {update.updated_at}")
    if update.meta is not UNSET:
        fields.append("_meta null" if update.meta is None else f"_meta {_json.encode(update.meta).decode()}")
    return printable(f"#{item.position:<6} updated  {item.session_id}  {' · '.join(fields)}")


def _quote(text: str) -> str:
    return _json.encode(text).decode()


def event_meta(record: events.RecordedEvent) -> dict[str, Any] | None:
    """The ``_meta`` an event sets (None when it sets none, or clears it)."""
    meta: Any = getattr(record.event, "meta", None)
    return meta if isinstance(meta, dict) else None


def meta_lines(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """``_meta`` as (key, value) pairs for people: each value as compact JSON, keys in their order."""
    return [(printable(key), printable(_json.encode(value).decode())) for key, value in meta.items()]


def describe_event(
    record: events.RecordedEvent, before: SessionState | None, after: SessionState | None, *, with_meta: bool = True
) -> str:
    """What one event did to its session, in words (``after`` is None when the fold ignored it). Without
    ``with_meta`` the ``_meta`` it sets is left out (a table shows it as key/value lines: ``meta_lines``)."""
    event = record.event
    if after is None:
        if isinstance(event, events.SessionCreated) and before is not None:
            return "ignored: the session exists already"
        return "ignored: " + ("the session was deleted" if before is not None else "the session was never created")
    parts: list[str] = []
    match event:  # every kind, named (mypy fails on a kind added to ``events.Event`` without words here)
        case events.SessionCreated() if before is not None:
            parts.append("restored: its agent has it after all (the same record)")
        case events.SessionCreated():
            parts.append(f"created in {event.cwd}")
            if event.additional_directories:
                parts.append("with " + ", ".join(event.additional_directories))
            if event.title is not None:
                parts.append(f"title {_quote(event.title)} ({(event.title_source or events.TitleSource.AGENT).value})")
            parts.append(f"updatedAt {format_time(event.at)}")
            if event.meta is not None and with_meta:
                parts.append(f"_meta {_json.encode(event.meta).decode()}")
            if after.agent is not None:
                parts.append(f"agent {after.agent}" + ("" if event.agent is not None else " (from its id)"))
            if event.parent is not None:
                parts.append(f"forked from {event.parent.session_id} as of position {event.parent.position}")
        case events.UserMark():
            parts.extend(_marked(event, before))
        case events.SessionUpdated():
            parts.append(f"activity: updatedAt {format_time(event.at)}")
            if event.messages:
                parts.append(f"+{event.messages} message{'s' if event.messages != 1 else ''}")
            if event.payload is not None:
                parts.append("with a payload")
            if event.usage is not None:
                parts.append(f"used {turn_usage_text(event.usage)}")
        case events.SessionInfoChanged():
            parts.extend(_info_changes(event, before, with_meta=with_meta))
        case events.SessionDeleted():
            parts.append("deleted" if event.reason is None else f"deleted ({event.reason})")
        case _:
            assert_never(event)
    return ", ".join(parts)


def _marked(event: events.UserMark, before: SessionState | None) -> list[str]:
    """A mark's words, one per field it sets: ``archived``, ``unarchived``; and when it changed nothing, why."""
    words = []
    for name, value in event.marks().items():
        word = name if value else f"un{name}"
        was = before is not None and getattr(before, name) is True  # before it was made: not marked
        if was is not value:
            words.append(word)
        else:
            words.append(f"{word} (it already was)" if value else f"{word} (it was not {name})")
    return words


def _info_changes(event: events.SessionInfoChanged, before: SessionState | None, *, with_meta: bool) -> list[str]:
    parts = []
    if event.title is None:
        parts.append("title cleared")
    elif event.title is not UNSET:
        source = events.TitleSource.AGENT if event.title_source is UNSET else event.title_source
        dropped = (
            before is not None
            and before.title_source is events.TitleSource.USER
            and source is not events.TitleSource.USER
        )
        parts.append(
            f"title {_quote(event.title)} ({source.value})" + (" dropped: the user's title stays" if dropped else "")
        )
    if event.updated_at is None:
        parts.append("updatedAt cleared")
    elif event.updated_at is not UNSET:
        parts.append(f"updatedAt {format_time(event.updated_at)}")
    meta: Any = event.meta
    if meta is None:
        parts.append("_meta cleared")
    elif meta is not UNSET:
        parts.append(f"_meta {_json.encode(meta).decode()}" if with_meta else "_meta set")
    return parts or ["nothing"]
