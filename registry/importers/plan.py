"""What an import writes for one session: the events that bring the registry's record to what the agent's files
say (``plan``) - with the turns it adds, their messages and usage (``registry.importers.turns``) - or that mark it
gone when its files are gone (``gone``), decided from the record's state alone, so that the importer
(``registry.importers.importer``) can plan a batch, and plan again after a conflict.

Two kinds of record: the importer's own (made by an import: ``META_PATH`` in its ``_meta``), which follows the
files; and a record made live by a proxy, which is the registry's - an import only fills what it lacks
(``_fill``): a title, the count, and the turns the proxy did not see. A session a proxy retired as not kept is
restored first, the same record. A session whose files the agent removed is kept, readable and findable, and
marked ``sourceGone`` (``gone``): the agent cannot open it any more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from events.model import (
    Event,
    Message,
    SessionArchived,
    SessionCreated,
    SessionDeleted,
    SessionInfoChanged,
    TitleSource,
)
from registry.agents import META_RETIRED, META_SOURCE_GONE, source_gone
from registry.commands import archive_change, check_meta, creation, info_change
from registry.importers.base import SessionFacts, stable_uuid
from registry.importers.turns import Group, activity, digest
from registry.model import META_AGENT, META_AGENT_MESSAGES, META_ARCHIVED, META_NAMESPACE, SessionState

__all__ = [
    "META_AGENT_ARCHIVED",
    "META_AGENT_SESSION_ID",
    "META_GIT_BRANCH",
    "META_PATH",
    "Planned",
    "gone",
    "plan",
]

META_AGENT_SESSION_ID: Final = f"{META_NAMESPACE}/agentSessionId"
META_PATH: Final = f"{META_NAMESPACE}/path"
META_GIT_BRANCH: Final = f"{META_NAMESPACE}/gitBranch"
META_AGENT_ARCHIVED: Final = f"{META_NAMESPACE}/agentArchived"
"""``true`` while the agent itself marks the session archived, as last imported: the registry's archive follows the
agent's changes of that mark, and keeps an archive or unarchive made in the registry until the mark changes."""
# META_AGENT and META_ARCHIVED (``registry.model``) are shown from the state; older importers wrote them into the
# session's own ``_meta`` too, so they are among the keys an import owns there.
_OWN_KEYS: Final = frozenset(
    {
        META_AGENT,
        META_AGENT_SESSION_ID,
        META_PATH,
        META_GIT_BRANCH,
        META_AGENT_MESSAGES,
        META_ARCHIVED,
        META_AGENT_ARCHIVED,
        META_SOURCE_GONE,
    }
)
Planned = list[tuple[Event, Any, list[Message] | None]]
"""Events, each with its id and the messages it keeps (None: none)."""


def _digest(facts: SessionFacts, groups: list[Group]) -> str:
    return hashlib.sha256(msgspec.msgpack.encode(facts) + digest(groups)).hexdigest()[:32]


def plan(agent: str, sid: str, facts: SessionFacts, groups: list[Group], state: SessionState | None) -> Planned:
    """The events that bring the registry's state of a session to what the source says (empty: nothing to do),
    with the turns it adds (``groups``: their messages and usage, ``registry.importers.turns.activity``).

    A record the importer made follows the source: times only move forward and the message count only grows (a
    rewind is visible in ``_meta``); a generated title never replaces a user's one (``info_change``); a session
    the agent marks deleted is tombstoned, or never created. A record made live (by a proxy: it has no
    ``META_PATH``) is the registry's: the import fills only what it lacks (``_fill``). A session a proxy retired
    as not kept is restored first - the same record. ``InvalidParams`` when the result would break a limit
    (``_meta`` too large with others' keys).
    """
    events: list[tuple[Event, list[Message] | None]] = []
    base = "0" if state is None else str(state.version)
    if state is not None and state.deleted:  # retired as not kept (``_prepare`` leaves out every other deletion)
        if facts.gone is not None:
            return []
        events.append((SessionCreated(cwd=state.cwd, at=state.created_at), None))
        state = msgspec.structs.replace(state, deleted=False, meta=_unmarked(state.meta), version=state.version + 1)
    last = max(facts.last_activity, facts.created_at)
    if state is None:
        if facts.gone is not None:
            return []
        meta = check_meta(_meta(agent, facts, None))
        created = creation(
            facts.cwd,
            at=facts.created_at,
            additional_directories=facts.additional_directories,
            title=facts.title,
            title_source=facts.title_source,
            meta=meta,
            agent=agent,
        )
        events.append((created, None))
        events.extend(activity(groups, grown=facts.messages, last=last, floor=facts.created_at))
        if facts.archived:
            events.append((SessionArchived(), None))
    elif META_PATH not in (state.meta or {}):
        events.extend(_fill(facts, groups, state, last))
    elif facts.gone is not None:
        events.append((SessionDeleted(reason=facts.gone), None))
    else:
        # The agent's count, not added to the registry's: a turn a proxy recorded live and that the files now hold
        # too counts once (SessionRegistry.record_turn is the other half of that rule).
        grown = max(0, facts.messages - state.messages)
        events.extend(activity(groups, grown=grown, last=last, floor=state.updated_at))
        change = info_change(
            state,
            title=msgspec.UNSET if facts.title is None else facts.title,
            title_source=facts.title_source or TitleSource.AGENT,
            meta=check_meta(_meta(agent, facts, state.meta)),
        )
        if change is not None:
            events.append((change, None))
        meta_before = state.meta or {}
        marked = meta_before.get(META_AGENT_ARCHIVED) is True or meta_before.get(META_ARCHIVED) is True  # or older
        if facts.archived != marked:  # the agent archived or unarchived it since the last import
            archiving = archive_change(state, facts.archived)
            if archiving is not None:
                events.append((archiving, None))
    key = _digest(facts, groups)
    return [(event, stable_uuid(sid, facts.locator, key, base, str(i)), kept) for i, (event, kept) in enumerate(events)]


def _fill(
    facts: SessionFacts, groups: list[Group], state: SessionState, last: int
) -> list[tuple[Event, list[Message] | None]]:
    """What an import adds to a record made live: the turns the proxy did not see (``groups``: those the session
    does not hold, with their messages and usage); a title when it has none; and the count when it has none - a
    first turn the proxy did not record - with the agent's own count (``META_AGENT_MESSAGES``, which tells a live
    turn that an import counted the files), from then on kept up with the files as the importer's own records
    are. Nothing else: its ``_meta``, title, count, times, cwd and archive flag are the registry's, and a file
    that goes away does not delete it."""
    events: list[tuple[Event, list[Message] | None]] = []
    counted = META_AGENT_MESSAGES in (state.meta or {})
    grown = 0
    filling = (counted or state.messages == 0) and facts.messages > 0 and facts.gone is None
    if filling:
        grown = max(0, facts.messages - state.messages)
    if groups or grown:
        floor = state.updated_at or 0
        # The turns only the files hold move the record's time only when they are turns it did not count (grown):
        # the messages of turns the proxy counted, read now from the files, keep the time it recorded.
        events.extend(activity(groups, grown=grown, last=max(last, floor) if grown else floor, floor=floor))
    if filling and (state.meta or {}).get(META_AGENT_MESSAGES) != facts.messages:
        meta = check_meta({**(state.meta or {}), META_AGENT_MESSAGES: facts.messages})
        events.append((SessionInfoChanged(meta=meta), None))
    if state.title is None and facts.title is not None and facts.gone is None:
        events.append(
            (SessionInfoChanged(title=facts.title, title_source=facts.title_source or TitleSource.AGENT), None)
        )
    return events


def _unmarked(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    return {key: value for key, value in (meta or {}).items() if key != META_RETIRED} or None


def gone(sid: str, state: SessionState | None) -> Planned:
    """A session of the importer's whose files are gone from the agent: kept - its conversation stays readable and
    findable - and marked ``META_SOURCE_GONE`` (the agent cannot open it); a record made live is not the import's
    to mark, and older stores' tombstones for this stay as they are."""
    if state is None or source_gone(state) or META_PATH not in (state.meta or {}):
        return []
    meta = check_meta({**(state.meta or {}), META_SOURCE_GONE: True})
    return [(SessionInfoChanged(meta=meta), stable_uuid(sid, "gone", str(state.version)), None)]


def _meta(agent: str, facts: SessionFacts, current: Mapping[str, Any] | None) -> dict[str, Any]:
    """The session's ``_meta``: whatever others put there, plus the importer's keys (which it owns)."""
    meta = {k: v for k, v in (current or {}).items() if k not in _OWN_KEYS}
    meta[META_AGENT] = agent
    meta[META_AGENT_SESSION_ID] = facts.native_id
    meta[META_PATH] = facts.path
    meta[META_AGENT_MESSAGES] = facts.messages
    if facts.git_branch:
        meta[META_GIT_BRANCH] = facts.git_branch
    if facts.archived:
        meta[META_AGENT_ARCHIVED] = True
    return meta
