"""What a session's activity writes: the messages a turn or a part of its past keeps, checked and prepared, and the
one ``SessionUpdated`` that records them - counted once, however the turn reached the registry.

A turn can reach the registry twice: live, through a proxy (``SessionRegistry.record_turn``), and from the agent's
own files, through an import (``registry.importers``) that ran while the turn was under way. ``turn_update`` decides
from the session's state when the turn began and as it is now: the count grows by the turn's messages unless such an
import moved the agent's own count (``META_AGENT_MESSAGES``), and then only to what the turn began with plus its
messages; only the messages the session does not hold are kept (``registry.conversation.unseen``), and the turn's
usage only with the user's message it belongs to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from events.content import content_ref
from events.model import Message, Role, SessionUpdated, Usage
from registry.commands import check_time
from registry.conversation import prepare, unseen
from registry.errors import InvalidParams
from registry.model import META_AGENT_MESSAGES, SessionState

__all__ = ["checked_messages", "kept_messages", "messages_update", "turn_update"]


def checked_messages(messages: object, at: int) -> list[Message]:
    """``messages`` checked as a sequence of ``events.Message`` (``InvalidParams`` naming what is wrong), those
    without a time given ``at`` (when the activity that keeps them happened)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidParams(f"messages must be a sequence of Message, not {type(messages).__name__}")
    out = []
    for n, message in enumerate(messages):
        if not isinstance(message, Message):
            raise InvalidParams(f"messages[{n}] is a {type(message).__name__}, not a Message")
        if not isinstance(message.role, Role) or not isinstance(message.text, str):
            raise InvalidParams(f"messages[{n}] needs a Role and a str text")
        if message.at is not None:
            check_time(message.at, f"messages[{n}].at")
        out.append(message if message.at is not None else msgspec.structs.replace(message, at=at))
    return out


def kept_messages(messages: object, at: int, *, keep_secrets: bool) -> list[Message]:
    """What is kept of ``messages`` (``checked_messages``, then ``registry.conversation.prepare``)."""
    return prepare(checked_messages(messages, at), keep_secrets=keep_secrets)


def messages_update(
    state: SessionState, kept: Sequence[Message], *, at: int, added: int, usage: Usage | None
) -> SessionUpdated:
    """The activity that keeps ``kept``: ``updatedAt`` to ``at`` (never back), ``added`` to the count."""
    ref = content_ref(kept) if kept else None
    return SessionUpdated(at=max(at, state.updated_at or 0), messages=added, content=ref, usage=usage)


def turn_update(
    state: SessionState,
    *,
    began: SessionState | None,
    messages: int,
    kept: Sequence[Message],
    usage: Usage | None,
    at: int,
    held: Callable[[], list[Message]],
) -> tuple[SessionUpdated, Sequence[Message]]:
    """The activity a turn seen live writes on ``state`` (see the module's docstring), and the messages it keeps.
    ``began``: the session's state when the turn began; ``held``: the messages the session holds (read only when an
    import ran during the turn)."""
    imported = began is not None and _imported_count(state) != _imported_count(began)
    added = messages
    if began is not None and imported:
        added = max(0, began.messages + messages - state.messages)
    turn, spent = kept, usage
    if kept and imported:
        # An import of the agent's files ran while the turn was under way and may have read this very turn: only
        # what the session does not hold is kept - the turn is one turn - and its usage goes with it: none when the
        # import added the turn; the turn's when the import caught only its prompt.
        turn = unseen(held(), kept, answers=True)
        if not turn and any(m.role is Role.USER for m in kept):
            spent = None
    return messages_update(state, turn, at=at, added=added, usage=spent), turn


def _imported_count(state: SessionState) -> object:
    return (state.meta or {}).get(META_AGENT_MESSAGES)
