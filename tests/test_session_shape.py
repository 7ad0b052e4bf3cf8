"""The session's shape is written once, and what is derived from it follows it.

* ``SessionState``'s fields are pinned by a fingerprint to ``STATE_VERSION`` and through it to the read-model
  version (``READ_MODEL_VERSION``) and the snapshot format (``_FORMAT``): both store states encoded, so changing
  the fields without bumping both would let an older table or snapshot decode into the new shape (or fail at a
  user's). Changing the fields fails here until ``STATE_VERSION`` is bumped (which moves both) and the new
  fingerprint is added to ``PINNED``.
* ``_meta`` is built from one declaration (``SHOWN_IN_META``) and the diff compares by it: whatever state field
  changes the ``_meta`` a client sees, a ``session/update`` is sent. Each entry names the fields it reads (the
  diff compares those first) and whether its value changes exactly when they do: both are held to its value here.
* A change's diff is made once per view, whoever asks for it.
* The fold changes only what an event changes: every field an event does not touch is carried over.
"""

from __future__ import annotations

import hashlib
import itertools
import typing
from typing import Any

import msgspec
import pytest

import events
from events.model import Usage
from registry.diffs import Updated, diff, shown
from registry.fold import Change, fold
from registry.model import (
    SHOWN_IN_META,
    STATE_VERSION,
    MetaField,
    SessionState,
    meta_changed,
    session_info,
    visible_meta,
)
from registry.readmodel.tables import READ_MODEL_VERSION
from registry.snapshot import _FORMAT
from registry.usage import SessionUsage

PINNED: list[tuple[str, int, int, int]] = [
    # (fingerprint of SessionState's fields, STATE_VERSION, READ_MODEL_VERSION, snapshot _FORMAT), oldest first
    ("0f391cc253363472", 1, 3, 3),
    # archived, agent, parent; read model 5, 6: each row's state sealed, 7: a fork's parent in a column of its own,
    # 8: the seal keyed
    ("3603b47edd4e986e", 2, 8, 4),
    # position last (a stored state's last eight bytes, which the server writes); read model 10: the seal first,
    # 11: rm_meta counts the archived live sessions
    ("7551a0ee7d1b6cdb", 3, 11, 5),
    # usage (what the session's turns used, summed); read model 13: the daily usage totals (rm_usage) too
    ("570962ebf90bff8a", 4, 13, 6),
    # pinned (session/set_pinned; the list's pinned filter, a column and an index of its own)
    ("24dc1f2296bc4f7c", 5, 14, 7),
]


def _strip(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip(v) for k, v in schema.items() if k not in ("description", "title")}
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


def fingerprint(struct: type[msgspec.Struct]) -> str:
    """The names, order, types and defaults of a struct's fields (docstrings left out)."""
    names = [field.name for field in msgspec.structs.fields(struct)]
    schema = _strip(msgspec.json.schema(struct))
    return hashlib.sha256(msgspec.json.encode([names, schema], order="sorted")).hexdigest()[:16]


def test_the_state_fields_are_pinned_to_the_read_model_and_snapshot_versions() -> None:
    current = fingerprint(SessionState)
    known = {fp: versions for fp, *versions in PINNED}
    assert current in known, (
        f"SessionState's fields changed (fingerprint {current}): bump STATE_VERSION (registry/model.py), "
        "then pin the new fingerprint here with the versions it gives"
    )
    assert known[current] == [STATE_VERSION, READ_MODEL_VERSION, _FORMAT], "the pinned versions are not the current"
    assert PINNED[-1][0] == current, "the newest pin must be the current shape"
    for (_, *before), (_, *after) in itertools.pairwise(PINNED):
        assert all(a > b for a, b in zip(after, before, strict=True)), "a shape change without a bump of each version"


def test_the_position_is_the_last_field() -> None:
    # A stored state's last eight bytes are its position, outside the seal, so that the server can write them
    # (``registry.readmodel.keys.Seal``): a field added after it would be sealed as part of the position.
    assert msgspec.structs.fields(SessionState)[-1].name == "position"


BASE = SessionState(
    "s1",
    "/w",
    ("/x",),
    "title",
    events.TitleSource.AGENT,
    5_000_000,
    {"k": 1},
    3,
    1_000_000,
    4,
    archived=False,
    agent="codex",
    parent=events.ForkRef(session_id="s0", position=2),
    usage=SessionUsage(100, 20, turns=1, unpriced=(("gpt-5", 100, 20, 0, 0, 0),)),
    pinned=False,
    position=9,
)

OTHER_VALUES: dict[str, Any] = {
    "session_id": "s2",
    "cwd": "/v",
    "additional_directories": (),
    "title": "other",
    "title_source": events.TitleSource.USER,
    "updated_at": 9_000_000,
    "meta": {"k": 2},
    "messages": 4,
    "created_at": 2_000_000,
    "version": 5,
    "position": 10,
    "deleted": True,
    "archived": True,
    "agent": "gemini",
    "parent": None,
    "usage": SessionUsage(150, 30, turns=2, costs=(("USD", 5_000_000),), unpriced=(("gpt-5", 100, 20, 0, 0, 0),)),
    "pinned": True,
}


def test_every_field_has_a_changed_value_here() -> None:
    assert set(OTHER_VALUES) == {field.name for field in msgspec.structs.fields(SessionState)}


@pytest.mark.parametrize("name", sorted(OTHER_VALUES))
def test_whatever_changes_the_shown_meta_sends_an_update(name: str) -> None:
    changed = msgspec.structs.replace(BASE, **{name: OTHER_VALUES[name]})
    if name in ("session_id", "deleted"):
        return  # another session, or a removal: not an update of this one
    item = diff(11, BASE, changed, include_archived=True)
    seen_before, seen_after = session_info(BASE), session_info(changed)
    if visible_meta(BASE) != visible_meta(changed):
        assert isinstance(item, Updated), name
        assert item.notification.update.meta == visible_meta(changed), name
    elif seen_before == seen_after:
        assert item is None, name


@pytest.mark.parametrize("field", SHOWN_IN_META, ids=lambda field: field.key.rpartition("/")[2])
def test_each_shown_field_reads_what_it_declares(field: MetaField) -> None:
    for name, value in _OTHER_AND_CLEARED:
        changed = msgspec.structs.replace(BASE, **{name: value})
        if name not in field.reads:  # what it reads is all it reads: the diff may skip it when those are equal
            assert field.value(changed) == field.value(BASE), name
        elif field.follows:  # and when it says so, a change of those is a change of the value
            assert field.value(changed) != field.value(BASE), name
    if not field.follows:  # one that does not follow has a change of what it reads that shows the same
        assert any(
            field.value(msgspec.structs.replace(BASE, **{name: OTHER_VALUES[name]})) == field.value(BASE)
            for name in field.reads
        )


def _optional(name: str) -> bool:
    (field,) = (field for field in msgspec.structs.fields(SessionState) if field.name == name)
    return type(None) in typing.get_args(field.type)


_OTHER_AND_CLEARED = [
    *OTHER_VALUES.items(),
    *((name, None) for name, value in OTHER_VALUES.items() if value is not None and _optional(name)),
]


def test_the_written_out_meta_is_the_declarations() -> None:
    bare = SessionState("s1", "/w", (), None, None, None, None, 0, 1, 1, position=1)
    states = [start for start in (BASE, bare)]
    states += [
        msgspec.structs.replace(start, **{name: value}) for start in (BASE, bare) for name, value in _OTHER_AND_CLEARED
    ]
    for state in states:
        shown = {field.key: value for field in SHOWN_IN_META if (value := field.value(state)) is not None}
        expected = dict(state.meta or {}) | shown
        assert list(visible_meta(state).items()) == list(expected.items())  # in the declaration's order
    for before in states:
        for after in states:
            assert meta_changed(before, after) == (visible_meta(before) != visible_meta(after)), (before, after)


def test_a_change_is_diffed_once_per_view() -> None:
    archived = msgspec.structs.replace(BASE, archived=True, messages=5, position=12)
    change = Change(12, BASE, archived)
    views = [(directories, archives) for directories in (True, False) for archives in (False, True)]
    made = [shown(change, additional_directories=d, include_archived=a) for d, a in views]
    for (directories, archives), item in zip(views, made, strict=True):
        assert item == diff(12, BASE, archived, additional_directories=directories, include_archived=archives)
        assert shown(change, additional_directories=directories, include_archived=archives) is item
    assert made[0] is not None and made[1] is not None and made[0] != made[1]  # removed vs updated


EVENTS = [
    events.SessionUpdated(at=7_000_000, messages=2),
    events.SessionUpdated(at=7_000_000, messages=2, usage=Usage(input_tokens=9, output_tokens=1, model="o3")),
    events.SessionInfoChanged(title="t2", title_source=events.TitleSource.USER),
    events.SessionInfoChanged(meta={"z": 1}),
    events.SessionArchived(),
    events.SessionUnarchived(),
    events.SessionPinned(),
    events.SessionPinned(pinned=False),
    events.SessionDeleted(),
]
TOUCHES = [
    {"updated_at", "messages"},
    {"updated_at", "messages", "usage"},
    {"title", "title_source"},
    {"meta"},
    {"archived"},
    {"archived"},
    {"pinned"},
    {"pinned"},
    {"deleted"},
]


@pytest.mark.parametrize(("event", "touched"), list(zip(EVENTS, TOUCHES, strict=True)))
def test_an_event_changes_only_what_it_changes(event: Any, touched: set[str]) -> None:
    start = msgspec.structs.replace(
        BASE,
        archived=isinstance(event, events.SessionUnarchived),
        pinned=isinstance(event, events.SessionPinned) and not event.pinned,
    )
    after = fold(start, events.LogEntry(20, "s1", 5, event))
    assert after is not None
    for field in msgspec.structs.fields(SessionState):
        name = field.name
        if name in ("version", "position"):
            assert (after.version, after.position) == (5, 20)
        elif name not in touched:
            assert getattr(after, name) == getattr(start, name), name
        else:
            assert getattr(after, name) != getattr(start, name), name


def test_a_creation_records_agent_and_parent_and_derives_an_importers_agent() -> None:
    parent = events.ForkRef(session_id="p", position=1)
    made = fold(None, events.LogEntry(1, "x", 1, events.SessionCreated(cwd="/w", at=1, agent="a", parent=parent)))
    assert made is not None and (made.agent, made.parent) == ("a", parent)
    old = fold(None, events.LogEntry(1, "claude-code:u", 1, events.SessionCreated(cwd="/w", at=1)))
    assert old is not None and old.agent == "claude-code"
    for plain in ("u", "not-an-agent:u", ":u"):
        state = fold(None, events.LogEntry(1, plain, 1, events.SessionCreated(cwd="/w", at=1)))
        assert state is not None and state.agent is None
