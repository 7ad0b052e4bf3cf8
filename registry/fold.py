"""The fold: what each event does to a session's state, and nothing else - pure (no clock, no I/O), so the same
events build the same state live, by replay, or from a snapshot plus the tail. Every read model, the change stream,
the importers and the write path fold with it (``fold``), and ``Change`` is what one applied event did.

It is a ``match`` over every event kind with ``assert_never``: a new event kind is a case here, named by mypy.
"""

from __future__ import annotations

import sys
from typing import Any, Final, assert_never

import msgspec
from msgspec import UNSET
from msgspec.structs import replace

import events
from registry.agents import META_RETIRED, Retired
from registry.model import SessionState, agent_of, title_replaces
from registry.usage import added

__all__ = ["Change", "Entry", "fold", "restorable"]

Entry = events.RecordedEvent | events.LogEntry
"""What a fold reads of a stored event: a whole record, or the lean read path's entry (same attributes)."""


class Change(msgspec.Struct, gc=False):
    """What one applied event did to a session: ``before`` is None for a creation.

    ``shown``, ``view`` and ``views`` are where ``registry.diffs.shown`` keeps the clients' views of it (a diff per
    view), made once however many listeners receive this very object.
    """

    position: int
    before: SessionState | None
    after: SessionState
    shown: Any = None
    view: int = -1
    views: dict[int, Any] | None = None


def fold(state: SessionState | None, record: Entry) -> SessionState | None:
    """The session after ``record``; None when the event changes nothing (it is then ignored).

    Each event changes only what it changes (``replace``): a new state field needs no edit here unless an event
    sets it. Rules the fold keeps whatever was appended: a session is created once, except that a creation restores
    a session a proxy retired as not kept by its agent (``restorable``); nothing else follows a deletion;
    a generated title (agent or prompt; a title without a source counts as generated) never replaces a title
    the user set. An event that changes nothing visible (archiving an archived session) still moves the
    session's version and position, which must follow its stream.
    """
    event = record.event
    if type(event) is _TURN and state is not None and not state.deleted:  # most events: the turn first
        return _turn(state, event, record)
    if isinstance(event, events.SessionCreated):
        if state is not None:
            return _restored(state, record) if state.deleted and restorable(state) else None
        return SessionState(
            record.session_id,
            sys.intern(event.cwd),  # a handful of cwds shared by many sessions: keep one string each
            event.additional_directories,
            event.title,
            (event.title_source or events.TitleSource.AGENT) if event.title is not None else None,
            event.at,
            event.meta,
            0,
            event.at,
            record.version,
            agent=agent_of(record.session_id, event.agent),
            parent=event.parent,
            position=record.position,
        )
    if state is None or state.deleted:
        return None
    match event:  # every other kind, named: mypy fails here on a kind added to ``events.Event`` without a case
        case events.SessionUpdated():
            return _turn(state, event, record)
        case events.SessionInfoChanged():
            title, title_source = state.title, state.title_source
            if event.title is None:
                title, title_source = None, None
            elif event.title is not UNSET:
                source = events.TitleSource.AGENT if event.title_source is UNSET else event.title_source
                if title_replaces(state.title_source, source):
                    title, title_source = event.title, source
            return replace(
                state,
                title=title,
                title_source=title_source,
                updated_at=state.updated_at if event.updated_at is UNSET else event.updated_at,
                meta=state.meta if event.meta is UNSET else event.meta,
                version=record.version,
                position=record.position,
            )
        case events.UserMark():  # archive, unarchive, and any mark to come: the fields it names
            return replace(state, **event.marks(), version=record.version, position=record.position)
        case events.SessionDeleted():
            return replace(state, deleted=True, version=record.version, position=record.position)
        case _:
            assert_never(event)  # raises, -O or not: an unknown kind is never read as another


def restorable(state: SessionState) -> bool:
    """Whether a deleted session was retired by a proxy because its agent had not kept it (``META_RETIRED`` is
    ``"unkept"`` in its ``_meta``): not a user's deletion, so the agent listing it again restores it."""
    return (state.meta or {}).get(META_RETIRED) == Retired.UNKEPT.value


def _restored(state: SessionState, record: Entry) -> SessionState:
    """A retired session restored by a ``SessionCreated`` on its stream: the same record - title, archive flag,
    count, parent - no longer deleted and without the retirement's mark (the event's own fields are not read)."""
    meta = {key: value for key, value in (state.meta or {}).items() if key != META_RETIRED} or None
    return replace(state, deleted=False, meta=meta, version=record.version, position=record.position)


_TURN: Final = events.SessionUpdated


def _turn(state: SessionState, event: events.SessionUpdated, record: Entry) -> SessionState:
    """What a turn changes: ``updatedAt``, the message count, and the session's usage totals when it reported what
    it used (``fold`` takes it first)."""
    if event.usage is not None:
        return replace(
            state,
            updated_at=event.at,
            messages=state.messages + event.messages,
            usage=added(state.usage, event.usage),
            version=record.version,
            position=record.position,
        )
    return replace(
        state,
        updated_at=event.at,
        messages=state.messages + event.messages,
        version=record.version,
        position=record.position,
    )
