"""The session surface of the facade: set_title, archive/unarchive, fork, agent and the list filters, as a
caller observes them (``SessionRegistry`` on a real SQLite file and a real PostgreSQL schema, and in memory)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from msgspec import UNSET
from reactivex.testing import TestScheduler

from events import ForkRef, MemoryStore, SessionArchived, SessionCreated, SessionUnarchived, SessionUpdated, TitleSource
from registry import InvalidCursor, InvalidParams, SessionNotFound, SessionRegistry
from registry.diffs import Added, ListChange, Removed, Updated
from registry.filters import Filters
from registry.importers import AGENTS
from registry.model import IMPORTED_AGENTS, META_AGENT, META_ARCHIVED, META_PARENT

T0 = 1_700_000_000_000_000_000


@pytest.fixture(params=["memory", "tables"])
def registry(request: pytest.FixtureRequest, store_urls: Callable[[], str]) -> Iterator[SessionRegistry]:
    """Each table backend, and the in-memory fold on the same store."""
    with SessionRegistry.open(store_urls(), page_size=2, read_model=request.param, follow=False) as made:
        yield made


def _ids(registry: SessionRegistry, cwd: str | None = None, **filters: object) -> list[str]:
    seen: list[str] = []
    page = registry.list(cwd, **filters)  # type: ignore[arg-type]
    while True:
        seen += [info.session_id for info in page.sessions]
        if page.next_cursor is UNSET:
            return seen
        assert isinstance(page.next_cursor, str)
        page = registry.list(cwd, page.next_cursor, **filters)  # type: ignore[arg-type]


def _five(registry: SessionRegistry) -> None:
    for n in range(5):
        registry.create(f"/w/{n % 2}", session_id=f"s{n}", at=T0 + n * 1_000_000, agent="codex" if n < 2 else None)


def test_archive_hides_from_the_default_list_before_pagination(registry: SessionRegistry) -> None:
    _five(registry)
    registry.archive("s3")
    registry.archive("s1")
    registry.archive("s1")  # idempotent: nothing more is written
    assert registry.store.read_stream("s1")[-1].version == 2
    assert _ids(registry) == ["s4", "s2", "s0"]
    assert _ids(registry, archived="exclude") == _ids(registry, archived=None) == ["s4", "s2", "s0"]
    assert _ids(registry, archived="only") == ["s3", "s1"]
    assert _ids(registry, archived="include") == ["s4", "s3", "s2", "s1", "s0"]
    assert _ids(registry, "/w/1", archived="only") == ["s3", "s1"]
    assert _ids(registry, "/w/0", archived="only") == []
    assert (registry.read_model.archived_count(), registry.read_model.archived_count("/w/0")) == (2, 0)
    assert registry.get("s1").archived is True and registry.get("s0").archived is UNSET
    assert registry.get("s1").meta[META_ARCHIVED] is True  # type: ignore[index]
    registry.unarchive("s1")
    registry.unarchive("s1")
    assert _ids(registry) == ["s4", "s2", "s1", "s0"]
    assert META_ARCHIVED not in registry.get("s1").meta  # type: ignore[operator]
    assert registry.read_model.archived_count() == 1  # the tables count it as they fold (rm_meta)
    registry.delete("s3")  # archived, then deleted: no longer counted
    assert registry.read_model.archived_count() == registry.read_model.archived_count("/w/1") == 0


def test_agent_filter_and_cursor_binding(registry: SessionRegistry) -> None:
    _five(registry)
    registry.archive("s0")
    assert _ids(registry, agent="codex") == ["s1"]
    assert _ids(registry, agent="codex", archived="include") == ["s1", "s0"]
    assert _ids(registry, "/w/0", agent="codex", archived="include") == ["s0"]
    assert _ids(registry, agent="nobody") == []
    assert registry.get("s1").agent == "codex" and registry.get("s2").agent is None
    assert registry.get("s1").meta[META_AGENT] == "codex"  # type: ignore[index]
    cursor = registry.list(archived="include").next_cursor
    assert isinstance(cursor, str)
    cases: list[tuple[Filters, str]] = [
        ({}, "archived"),
        ({"archived": "only"}, "archived"),
        ({"archived": "include", "agent": "codex"}, "agent"),
    ]
    for wrong, reason in cases:
        with pytest.raises(InvalidCursor) as caught:
            registry.list(None, cursor, **wrong)
        assert caught.value.reason == reason
    default = registry.list().next_cursor
    assert isinstance(default, str)
    assert registry.list(None, default, archived=None).sessions == registry.list(None, default).sessions
    with pytest.raises(InvalidParams, match="archived"):
        registry.list(archived="all")
    with pytest.raises(InvalidParams, match="agent"):
        registry.list(agent="")


def test_set_title_stores_a_user_title_that_generated_ones_never_replace(registry: SessionRegistry) -> None:
    _five(registry)
    assert registry.set_title("s1", "  Fix the flaky test  ") == "Fix the flaky test"
    registry.change_info("s1", title="generated", title_source=TitleSource.AGENT)
    assert registry.get("s1").title == "Fix the flaky test"
    for blank in ("", "   ", "\n"):
        with pytest.raises(InvalidParams, match="title"):
            registry.set_title("s1", blank)
    with pytest.raises(SessionNotFound):
        registry.set_title("missing", "x")
    registry.delete("s2")
    for deleted in (
        lambda: registry.set_title("s2", "x"),
        lambda: registry.archive("s2"),
        lambda: registry.unarchive("s2"),
    ):
        with pytest.raises(SessionNotFound):
            deleted()
    with pytest.raises(SessionNotFound):
        registry.archive("missing")


def test_a_fork_is_its_source_as_of_the_fork_point_then_its_own(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="src", at=T0, title="Source", agent="codex")
    for n in range(3):
        registry.record_activity("src", messages=1, payload={"turn": n}, at=T0 + n + 1)
    fork = registry.fork("src", "/w/f", session_id="f1")
    assert (fork.title, fork.agent) == ("Source", "codex")
    registry.record_activity("src", messages=1, payload={"turn": "after"}, at=T0 + 10)
    registry.record_activity("f1", messages=1, payload={"turn": "own"}, at=T0 + 11)
    assert [e.payload for e in registry.activity("f1")] == [{"turn": 0}, {"turn": 1}, {"turn": 2}, {"turn": "own"}]
    assert [e.payload for e in registry.activity("src")][-1] == {"turn": "after"}
    state = registry.state("f1")
    assert state is not None and state.parent is not None and state.parent.session_id == "src"
    assert registry.get("f1").meta[META_PARENT] == {"sessionId": "src", "position": state.parent.position}  # type: ignore[index]
    # A fork of the fork, at an earlier position: the chain is followed, each part cut at its own point.
    first_turn = registry.store.read_stream("src")[1].position
    older = registry.fork("src", "/w", session_id="f2", at_position=first_turn)
    assert [e.payload for e in registry.activity(older.session_id)] == [{"turn": 0}]
    registry.fork("f1", "/w", session_id="f3")
    assert [e.payload for e in registry.activity("f3")] == [{"turn": 0}, {"turn": 1}, {"turn": 2}, {"turn": "own"}]
    assert [s.session_id for s in registry.forks("src")] == ["f2", "f1"]
    # Bad sources and positions create nothing.
    head = registry.store.head()
    with pytest.raises(SessionNotFound):
        registry.fork("missing", "/w")
    with pytest.raises(InvalidParams):
        registry.fork("src", "/w", at_position=head + 5)
    registry.create("/w", session_id="late")
    with pytest.raises(InvalidParams):
        registry.fork("late", "/w", at_position=first_turn)
    registry.delete("f3")
    with pytest.raises(SessionNotFound):
        registry.fork("f3", "/w")
    with pytest.raises(SessionNotFound):
        registry.create("/w", parent=ForkRef(session_id="missing", position=1))
    assert registry.store.head() == head + 2  # "late" and the deletion of f3


def test_a_fork_of_a_long_session_records_a_reference() -> None:
    with SessionRegistry(MemoryStore(), follow=False) as registry:
        registry.create("/w", session_id="big")
        registry.store.append("big", [SessionUpdated(at=T0 + n, messages=1) for n in range(10_000)], 1)
        registry.sync()
        started = time.perf_counter()
        registry.fork("big", "/w", session_id="copy")
        took = time.perf_counter() - started
        assert len(registry.store.read_stream("copy")) == 1  # one event: the reference, not a copy
        assert len(registry.activity("copy")) == 10_000
        assert took < 5  # generous: the figure is measured in benchmarks/, not asserted here


def _collect(registry: SessionRegistry, scheduler: TestScheduler, **options: object) -> list[ListChange]:
    items: list[ListChange] = []
    registry.list_changes(scheduler=scheduler, **options).subscribe(items.append)  # type: ignore[arg-type]
    scheduler.advance_by(1)
    return items


def test_the_list_stream_treats_archive_as_removal_and_updates_carry_it_in_meta() -> None:
    with SessionRegistry(MemoryStore(), follow=False) as registry:
        registry.create("/w", session_id="a")
        scheduler = TestScheduler()
        default = _collect(registry, scheduler)
        everything = _collect(registry, scheduler, include_archived=True)
        updates: list[object] = []
        registry.changes(scheduler=scheduler).subscribe(updates.append)
        scheduler.advance_by(1)
        registry.archive("a")
        registry.set_title("a", "while archived")
        registry.unarchive("a")
        scheduler.advance_by(1)
        assert [type(item) for item in default] == [Removed, Added]
        assert [type(item) for item in everything] == [Updated, Updated, Updated]
        first = everything[0]
        assert isinstance(first, Updated) and first.notification.update.meta[META_ARCHIVED] is True  # type: ignore[index]
        last = everything[2]
        assert isinstance(last, Updated) and META_ARCHIVED not in last.notification.update.meta  # type: ignore[operator]
        assert len(updates) == 3


def test_the_derived_agent_names_are_the_importers() -> None:
    assert set(AGENTS) == IMPORTED_AGENTS  # model.py cannot import the importers (they import it): kept equal here


def test_old_records_without_an_agent_take_an_importers_prefix() -> None:
    store = MemoryStore()
    store.append("claude-code:abc", [SessionCreated(cwd="/w", at=T0)])
    store.append("mine:abc", [SessionCreated(cwd="/w", at=T0)])
    store.append("x", [SessionCreated(cwd="/w", at=T0), SessionArchived(), SessionUnarchived(), SessionArchived()])
    with SessionRegistry(store, follow=False) as registry:
        assert registry.get("claude-code:abc").agent == "claude-code"
        assert registry.get("mine:abc").agent is None
        assert registry.get("x").archived is True
        assert _ids(registry, agent="claude-code") == ["claude-code:abc"]
