"""One agent, one name: sessions an older proxy recorded under another name of the agent are taken over.

An agent has one registry name (``registry.proxy.identity``), but a store written before that name was settled may hold
its sessions under another one - an alias the registry did not know then (``fast-agent-acp``), or the other side of an
``--agent`` / ``agentInfo`` mismatch (``Identity.others``). At start each such live record ``O:<id>`` becomes the
record ``R:<id>`` under the agent's name: made from it when there is none (cwd, title and who set it, count, times,
``_meta``, its fork's parent, and each turn with its conversation and usage), else given the user's title; either way
given the marks the user's commands left on it (``SessionCommands.copy_marks``: the archive flag, and every mark a
new command declares); the old record is then retired as ``moved`` (``registry.agents.Retired``), so it is listed
once, under one name. A user's deletion under the old name holds under the new one without a copy: the
book looks there (``Book``).
"""

from __future__ import annotations

import logging
from typing import Final

from events.model import ForkRef, Message, SessionUpdated, TitleSource
from registry.agents import META_RETIRED, Retired, split_id, stored_id
from registry.errors import SessionExists
from registry.filters import list_filter
from registry.model import SessionState
from registry.service import SessionRegistry

__all__ = ["take_over"]

log = logging.getLogger("acp_registry.proxy")

_PAGE: Final = 500


def take_over(registry: SessionRegistry, agent: str, others: tuple[str, ...]) -> int:
    """Take over the live sessions held under ``others`` as sessions of ``agent``; how many were taken over."""
    moved = 0
    model = registry.read_model
    for other in others:
        if other == agent:
            continue
        as_of = model.catch_up()
        held: list[SessionState] = []
        for page in model.pages(as_of=as_of, where=list_filter(None, archived="include", agent=other), limit=_PAGE):
            held.extend(page.states)
        for state in sorted(held, key=lambda s: (s.created_at, s.session_id)):  # a fork's parent first
            parts = split_id(state.session_id)
            if parts is None or parts[0] != other:
                continue
            _move(registry, state, stored_id(agent, parts[2], parts[1]), agent, other)
            moved += 1
    if moved:
        log.info("%d sessions recorded under another name of the agent were taken over as %r's", moved, agent)
    return moved


def _move(registry: SessionRegistry, old: SessionState, new_id: str, agent: str, other: str) -> None:
    meta = {key: value for key, value in (old.meta or {}).items() if key != META_RETIRED} or None
    try:
        registry.create(
            old.cwd,
            session_id=new_id,
            additional_directories=old.additional_directories,
            title=old.title,
            title_source=old.title_source or TitleSource.AGENT,
            meta=meta,
            at=old.created_at,
            agent=agent,
            parent=_parent(registry, old, agent, other),
        )
        _carry(registry, old, new_id)
    except SessionExists:  # recorded under the agent's name already: what the user set on the old one is kept
        state = registry.state(new_id)
        if state is None or state.deleted:
            return
        if old.title_source is TitleSource.USER and old.title and state.title_source is not TitleSource.USER:
            registry.set_title(new_id, old.title)
    registry.copy_marks(new_id, old)
    registry.change_info(old.session_id, meta={**(old.meta or {}), META_RETIRED: Retired.MOVED.value})
    registry.delete(old.session_id, reason=f"taken over as {new_id}: {other!r} is a name of {agent!r}", erase=False)


def _carry(registry: SessionRegistry, old: SessionState, new_id: str) -> None:
    """The old record's activity, as the new one's own: each turn with its messages, its usage and its time (so the
    conversation stays readable and findable under the one name, and usage by day stays where it was), then what
    was counted without a turn of its own."""
    said: dict[int, list[Message]] = {}
    for kept in registry.store.messages(old.session_id):
        said.setdefault(kept.position, []).append(kept.message)
    counted, last = 0, old.created_at
    for record in registry.store.read_stream(old.session_id):
        event = record.event
        if isinstance(event, SessionUpdated) and (record.position in said or event.usage is not None):
            messages = said.get(record.position, [])
            registry.record_messages(new_id, messages, at=event.at, usage=event.usage, count=event.messages)
            counted, last = counted + event.messages, max(last, event.at)
    if old.messages > counted or (old.updated_at or 0) > last:
        registry.record_activity(new_id, messages=old.messages - counted, at=old.updated_at or old.created_at)


def _parent(registry: SessionRegistry, old: SessionState, agent: str, other: str) -> ForkRef | None:
    """The fork's parent under the agent's name when it was taken over too (else the old record, when it stands)."""
    if old.parent is None:
        return None
    parts = split_id(old.parent.session_id)
    candidates = [old.parent.session_id]
    if parts is not None and parts[0] == other:
        candidates.insert(0, stored_id(agent, parts[2], parts[1]))
    for candidate in candidates:
        state = registry.state(candidate)
        if state is not None and not state.deleted:
            return ForkRef(session_id=candidate, position=0)
    return None
