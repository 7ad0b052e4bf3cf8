"""What a user's command leaves on a session, derived from the session commands' declarations
(``registry.session_commands.USERS_MARKS``), and the filters a list with a query applies
(``registry.said_and_spent.SEARCHED_FILTERS``): a new command or filter is never silently left out of either."""

from __future__ import annotations

import pytest

from events import MemoryStore, TitleSource
from registry import SessionRegistry, said_and_spent
from registry.errors import InvalidParams
from registry.filters import Filters
from registry.model import SessionState
from registry.said_and_spent import SEARCHED_FILTERS
from registry.session_commands import USERS_MARKS, marked_by_user


@pytest.fixture
def registry() -> SessionRegistry:
    return SessionRegistry(MemoryStore(), follow=False)


def test_the_marks_are_what_the_session_commands_change_but_the_title_and_the_deletion() -> None:
    """A tripwire: the proxy carries each mark by hand when it takes a session over under the agent's one name
    (``registry.proxy.names``). A new user's command that sets a field of its own must be carried there too."""
    assert sorted(USERS_MARKS) == ["archived"], "carry it in registry/proxy/names.py (_move), then name it here"


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
