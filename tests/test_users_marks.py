"""What a user's command leaves on a session, derived from the session commands' declarations
(``registry.session_commands.USERS_MARKS``) and set by its mark events (``events.UserMark``), and the filters a list
with a query applies (``registry.said_and_spent.SEARCHED_FILTERS``): a new command or filter is never silently left out
of either. Each test here goes over every mark there is: a new one is tested by them without a word added."""

from __future__ import annotations

import typing

import msgspec
import pytest

import events
from events import MemoryStore, TitleSource, UserMark
from events.model import EVENT_TYPES
from registry import SessionRegistry, said_and_spent
from registry.agents import stored_id
from registry.cli.views import describe_event
from registry.errors import InvalidParams
from registry.filters import Filters
from registry.fold import fold
from registry.model import SessionState
from registry.proxy.names import take_over
from registry.said_and_spent import SEARCHED_FILTERS
from registry.session_commands import USERS_MARKS, marked_by_user, users_marks

MARKS: typing.Final = [kind for kind in EVENT_TYPES if issubclass(kind, UserMark)]
_DEFAULTS: typing.Final = {field.name: field.default for field in msgspec.structs.fields(SessionState)}


@pytest.fixture
def registry() -> SessionRegistry:
    return SessionRegistry(MemoryStore(), follow=False)


def test_the_marks_the_commands_change_are_the_boolean_fields_the_mark_events_set() -> None:
    """What the fold, the import check, ``history``'s words and the take-over's carry do with a mark follows from
    its event (``UserMark.marks``): a command that changes a field of its own sets it by a mark event, on a
    boolean field of the state that is False until a user's command sets it."""
    hints = typing.get_type_hints(SessionState)
    set_by_events = {name for kind in MARKS for value in (True, False) for name in _made(kind, value).marks()}
    assert set_by_events == USERS_MARKS >= {"archived"}
    for name in USERS_MARKS:
        assert hints[name] is bool and _DEFAULTS[name] is False, name
    for kind in MARKS:
        assert all(hints[f.name] is bool for f in msgspec.structs.fields(kind)), kind  # what the decoder checks


@pytest.mark.parametrize("kind", MARKS, ids=lambda kind: kind.__name__)
@pytest.mark.parametrize("value", [True, False])
def test_a_mark_event_folds_into_the_fields_it_names_and_nothing_else(kind: type[UserMark], value: bool) -> None:
    registry = SessionRegistry(MemoryStore(), follow=False)
    sid = registry.create("/work").session_id
    before = _state(registry, sid)
    mark = _made(kind, value)
    record = events.LogEntry(before.position + 1, sid, before.version + 1, mark)  # type: ignore[arg-type]
    after = fold(before, record)
    assert after == msgspec.structs.replace(
        before, **mark.marks(), version=before.version + 1, position=before.position + 1
    )
    assert after is not None and users_marks(after) == [name for name, v in mark.marks().items() if v]


def test_a_mark_is_told_in_words_and_so_is_one_that_changed_nothing(registry: SessionRegistry) -> None:
    sid = registry.create("/work").session_id
    registry.unarchive(sid)  # nothing to write: the command is idempotent
    registry.archive(sid)
    registry.archive(sid)
    registry.unarchive(sid)
    words: list[str] = []
    state: SessionState | None = None
    for record in registry.store.read_stream(sid):
        before, state = state, fold(state, record)
        words.append(describe_event(record, before, state))
    assert words[1:] == ["archived", "unarchived"]
    archived = msgspec.structs.replace(_state(registry, sid), archived=True)
    record = next(r for r in registry.store.read_stream(sid) if isinstance(r.event, events.SessionArchived))
    assert describe_event(record, archived, archived) == "archived (it already was)"
    unarchived = msgspec.structs.replace(archived, archived=False)
    record = next(r for r in registry.store.read_stream(sid) if isinstance(r.event, events.SessionUnarchived))
    assert describe_event(record, unarchived, unarchived) == "unarchived (it was not archived)"


@pytest.mark.parametrize("name", sorted(USERS_MARKS))
def test_copy_marks_gives_a_session_every_mark_of_another(registry: SessionRegistry, name: str) -> None:
    old = registry.create("/work").session_id
    new = registry.create("/work").session_id
    marked = msgspec.structs.replace(_state(registry, old), **{name: True})
    assert users_marks(marked) == [name]
    registry.copy_marks(new, marked)
    assert users_marks(_state(registry, new)) == [name]
    version = _state(registry, new).version
    registry.copy_marks(new, marked)  # it has it already: nothing written
    registry.copy_marks(new, _state(registry, old))  # no marks: nothing written, none taken away
    assert _state(registry, new).version == version and users_marks(_state(registry, new)) == [name]


@pytest.mark.parametrize("name", sorted(USERS_MARKS))
def test_a_session_taken_over_under_the_agents_one_name_keeps_every_mark(registry: SessionRegistry, name: str) -> None:
    """``registry.proxy.names``: with no record under the one name yet, and with one made there already."""
    fresh = registry.create("/work", session_id=stored_id("fast-agent-acp", "a"), agent="fast-agent-acp").session_id
    held = registry.create("/work", session_id=stored_id("fast-agent-acp", "b"), agent="fast-agent-acp").session_id
    registry.create("/work", session_id=stored_id("fast-agent", "b"), agent="fast-agent")
    for sid in (fresh, held):
        registry.copy_marks(sid, msgspec.structs.replace(_state(registry, sid), **{name: True}))
    assert take_over(registry, "fast-agent", ("fast-agent-acp",)) == 2
    for native in ("a", "b"):
        assert users_marks(_state(registry, stored_id("fast-agent", native))) == [name]
        assert _state(registry, stored_id("fast-agent-acp", native)).deleted


def test_a_session_is_marked_by_its_users_title_and_archive_not_by_the_agent(registry: SessionRegistry) -> None:
    sid = registry.create("/work", title="the agent's", title_source=TitleSource.AGENT).session_id
    assert not marked_by_user(_state(registry, sid))
    registry.archive(sid)
    assert marked_by_user(_state(registry, sid))
    registry.unarchive(sid)
    assert not marked_by_user(_state(registry, sid))
    registry.set_title(sid, "mine")
    assert marked_by_user(_state(registry, sid))


def test_a_list_with_a_query_applies_or_refuses_every_filter(registry: SessionRegistry) -> None:
    """Each filter a list takes is applied by a list with a query, or refused by it with its name - never dropped."""
    assert set(Filters.__annotations__) >= SEARCHED_FILTERS
    registry.create("/work")
    assert registry.list(query="anything", archived="include", agent="codex").sessions == []
    for name in sorted(set(Filters.__annotations__) - SEARCHED_FILTERS):
        with pytest.raises(InvalidParams, match=name):
            registry.list(query="anything", **{name: True})  # type: ignore[arg-type]


def test_a_filter_the_search_does_not_apply_is_refused_by_name(
    registry: SessionRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every filter is searched today, so the loop above checks none: here the search stops applying ``agent``, as a
    new filter would start, and a list with a query names it in its refusal rather than list every agent's."""
    monkeypatch.setattr(said_and_spent, "SEARCHED_FILTERS", frozenset({"archived"}))
    registry.create("/work")
    with pytest.raises(InvalidParams, match="agent: a list with a query is filtered by cwd, archived only") as refused:
        registry.list(query="anything", agent="codex")
    assert refused.value.field == "agent"
    assert registry.list(query="anything", agent=None).sessions == []  # not given: nothing to refuse


def _state(registry: SessionRegistry, session_id: str) -> SessionState:
    state = registry.state(session_id)
    assert state is not None
    return state


def _made(kind: type[UserMark], value: bool) -> UserMark:
    """A mark event of ``kind`` with every field it has set to ``value`` (one without fields: as it is)."""
    return kind(**dict.fromkeys(kind.__struct_fields__, value))
