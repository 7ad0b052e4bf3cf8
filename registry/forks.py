"""Forks: a session made from another as of a log position, recorded as a reference (``SessionCreated.parent``).

Time travel and fork are one idea here: a fork is "the source as of P", then its own history. Nothing of the
source is copied, so a fork costs one event whatever the source's size; its history is assembled when read
(``activity``): the source's turns up to P - the source's own source's before them, for a fork of a fork - then
the fork's own. Later turns on either side never leak into the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from events.content import KeptMessage
from events.model import ForkRef, RecordedEvent, SessionCreated, SessionUpdated
from registry.errors import InvalidParams, SessionDeletedError, SessionNotFound
from registry.model import SessionState
from registry.readmodel import PAST_WINDOW, ReadModel

if TYPE_CHECKING:
    from events.store import EventStore

__all__ = ["MAX_FORK_DEPTH", "activity", "fork_point", "forks_of", "messages"]

MAX_FORK_DEPTH: Final = 1000
"""Forks of forks followed by ``activity`` at most (a chain is also cut where its positions stop decreasing: a
hand-made log cannot make it loop)."""


def fork_point(store: EventStore, read_model: ReadModel, parent: ForkRef) -> tuple[SessionState, ForkRef]:
    """The source's state and the checked reference (position 0: as of the source's last event). An unknown or
    deleted source -> ``SessionNotFound``; a position past the head or before the source existed ->
    ``InvalidParams``. The read model is caught up first (the source may come from another process)."""
    if not isinstance(parent, ForkRef):
        raise InvalidParams(f"parent must be a ForkRef, not {type(parent).__name__}", field="parent")
    head = read_model.catch_up()
    source = read_model.get(parent.session_id)
    if source is None:
        raise SessionNotFound(parent.session_id)
    if source.deleted:
        raise SessionDeletedError(parent.session_id)
    position = parent.position
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise InvalidParams(
            f"the fork position must be a log position (an int >= 1), got {position!r}", field="position"
        )
    if position == 0:
        return source, ForkRef(session_id=parent.session_id, position=source.position)
    if position > head:
        raise InvalidParams(f"the fork position {position} is past the log's head ({head})", field="position")
    if position < source.position:
        then = read_model.state_at(parent.session_id, position)
        if then is PAST_WINDOW:  # older than the read model keeps: the source's first event says
            first = store.read_stream(parent.session_id)[:1]
            then = source if first and first[0].position <= position else None
        if then is None:
            raise InvalidParams(
                f"session {parent.session_id!r} did not exist yet at position {position}", field="position"
            )
    return source, parent


def _lineage(store: EventStore, session_id: str) -> list[tuple[str, int | None, list[RecordedEvent]]]:
    """A session and the sources it was forked from, newest first: each one's id, the position up to which it is
    part of the history (None: all of it) and its records."""
    found: list[tuple[str, int | None, list[RecordedEvent]]] = []
    until: int | None = None
    for _ in range(MAX_FORK_DEPTH):
        records = store.read_stream(session_id)
        found.append((session_id, until, records))
        first = records[0].event if records else None
        parent = first.parent if isinstance(first, SessionCreated) else None
        if parent is None or (until is not None and parent.position >= until):
            break
        session_id, until = parent.session_id, parent.position
    return found


def activity(store: EventStore, session_id: str) -> list[SessionUpdated]:
    """A session's activity events in order, a fork's starting with its source's up to the fork's position."""
    return [
        r.event
        for _, until, records in reversed(_lineage(store, session_id))
        for r in records
        if isinstance(r.event, SessionUpdated) and (until is None or r.position <= until)
    ]


def messages(store: EventStore, session_id: str) -> list[KeptMessage]:
    """A session's kept messages in order, a fork's starting with its source's up to the fork's position (as
    ``activity``: a fork refers to its source's conversation, nothing is copied)."""
    return [m for sid, until, _ in reversed(_lineage(store, session_id)) for m in store.messages(sid, until=until)]


def forks_of(read_model: ReadModel, session_id: str) -> list[SessionState]:
    """The sessions forked from ``session_id`` (deleted ones included), oldest fork point first: one indexed
    look-up of the read model's tables."""
    found = read_model.forks(session_id)
    return sorted(found, key=lambda s: (s.parent.position if s.parent else 0, s.session_id))
