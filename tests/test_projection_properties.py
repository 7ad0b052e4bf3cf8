"""Property tests: the projection is a pure fold, and a walk of pages is the list as of its start.

Histories are random raw appends (not only what the registry's commands would write): duplicate creations,
writes after deletions, activity for unknown sessions, generated titles racing user ones, and many equal
timestamps, so ties on ``updatedAt`` are common.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

import events
from events import MemoryStore
from events.model import Usage
from registry import SessionRegistry, SessionState
from registry.filters import Archived, ListFilter
from registry.model import META_CONSISTENCY, ListSessionsResult
from registry.projection import Projection

SESSIONS = [*(f"s{n}" for n in range(5)), "codex:s5"]  # an importer's prefix: the agent is derived from it
AGENTS = ["codex", "claude-code"]
CWDS = ["/a", "/b", "/a/x"]
TIMES = st.integers(min_value=0, max_value=6).map(lambda n: n * 1_000_000_000)

USAGE = st.one_of(  # a turn's usage: tokens of a model (estimated), or a cost reported in one of two currencies
    st.builds(
        Usage, input_tokens=st.integers(0, 9), output_tokens=st.integers(0, 9), model=st.sampled_from(["gpt-5", "m"])
    ),
    st.builds(
        Usage,
        cached_read_tokens=st.integers(0, 9),
        cost_nanos=st.integers(0, 9),
        currency=st.sampled_from(["USD", "EUR"]),
    ),
)

events_strategy: st.SearchStrategy[events.Event] = st.one_of(
    st.builds(
        events.SessionCreated,
        cwd=st.sampled_from(CWDS),
        at=TIMES,
        title=st.none() | st.sampled_from(["first", "other"]),
        title_source=st.none() | st.sampled_from(events.TitleSource),
        meta=st.none() | st.just({"k": 1}),
        agent=st.none() | st.sampled_from(AGENTS),
        parent=st.none() | st.builds(events.ForkRef, session_id=st.sampled_from(SESSIONS), position=st.integers(1, 40)),
    ),
    st.builds(events.SessionArchived),
    st.builds(events.SessionUnarchived),
    st.builds(events.SessionPinned, pinned=st.booleans()),
    st.builds(events.SessionUpdated, at=TIMES, messages=st.integers(0, 3)),
    st.builds(events.SessionUpdated, at=TIMES, messages=st.integers(0, 3), usage=USAGE),
    st.builds(
        events.SessionInfoChanged,
        title=st.just(UNSET) | st.none() | st.sampled_from(["first", "renamed"]),
        title_source=st.just(UNSET) | st.sampled_from(events.TitleSource),
        updated_at=st.just(UNSET) | st.none() | TIMES,
        meta=st.just(UNSET) | st.none() | st.sampled_from([{"k": 2}, {"k": 1, "z": [1]}]),
    ),
    st.builds(events.SessionDeleted),
    # A user rename followed by a generated title: the rule most worth hammering on.
    st.builds(events.SessionInfoChanged, title=st.just("mine"), title_source=st.just(events.TitleSource.USER)),
    st.builds(events.SessionInfoChanged, title=st.just("generated"), title_source=st.sampled_from(events.TitleSource)),
)
operation = st.tuples(st.sampled_from(SESSIONS), st.lists(events_strategy, min_size=1, max_size=3))
history = st.lists(operation, max_size=60)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _write(store: MemoryStore, ops: list[tuple[str, list[events.Event]]]) -> None:
    for session_id, batch in ops:
        store.append(session_id, batch)


def _expected_order(states: list[SessionState]) -> list[str]:
    """The documented order, computed independently of the projection's keys."""
    dated = sorted((s for s in states if s.updated_at is not None), key=lambda s: (-(s.updated_at or 0), s.session_id))
    undated = sorted((s for s in states if s.updated_at is None), key=lambda s: s.session_id)
    return [s.session_id for s in dated + undated]


@FAST
@given(ops=history, split=st.floats(0, 1))
def test_live_replay_and_snapshot_plus_tail_agree(ops: list[tuple[str, list[events.Event]]], split: float) -> None:
    store = MemoryStore()
    live = Projection()
    for session_id, batch in ops:
        store.append(session_id, batch)
        for record in store.read(live.position):
            live.apply(record)
    log = store.read()

    replayed = Projection()
    assert replayed.load(log, head=store.head()) == len(log)

    cut = int(len(log) * split)
    first = Projection()
    first.load(log[:cut])
    from_snapshot = Projection()
    from_snapshot.restore(first.states().values(), first.position)
    from_snapshot.load(log[cut:])

    assert live == replayed == from_snapshot
    for projection in (live, replayed, from_snapshot):
        projection.check_indexes()
        live_states = [s for s in projection.states().values() if not s.deleted]
        assert [s.session_id for s in projection.sessions()] == _expected_order(live_states)


@FAST
@given(ops=history)
def test_fold_rules_hold_for_any_log(ops: list[tuple[str, list[events.Event]]]) -> None:
    store = MemoryStore()
    projection = Projection()
    deleted: set[str] = set()
    for session_id, batch in ops:
        store.append(session_id, batch)
        for record in store.read(projection.position):
            before = projection.get(record.session_id)
            projection.apply(record)
            after = projection.get(record.session_id)
            if record.session_id in deleted:
                assert after == before, "a deleted session changed"
            if after is not None and after.deleted:
                deleted.add(record.session_id)
            if before is not None and before.title_source is events.TitleSource.USER and before.title is not None:
                assert after is not None
                if after.title != before.title:
                    assert after.title is None or after.title_source is events.TitleSource.USER, "generated over user"


def _live_at(
    log: list[Any],
    position: int,
    cwd: str | None,
    archived: Archived = "exclude",
    agent: str | None = None,
    pinned: bool | None = None,
) -> list[str]:
    projection = Projection()
    projection.load(r for r in log if r.position <= position)
    where = ListFilter(cwd=cwd, archived=archived, agent=agent, pinned=pinned)
    return [s.session_id for s in projection.sessions() if where.matches(s)]


def _walk(
    registry: SessionRegistry,
    store: MemoryStore,
    during: list[list[tuple[str, list[events.Event]]]],
    *,
    cwd: str | None = None,
    archived: Archived = "exclude",
    agent: str | None = None,
    pinned: bool | None = None,
) -> Iterator[ListSessionsResult]:
    """The pages of one walk through the list; before each page after the first, the next writes of ``during``."""
    page = registry.list(cwd=cwd, archived=archived, agent=agent, pinned=pinned)
    writes = iter(during)
    while True:
        yield page
        if page.next_cursor is UNSET:
            return
        _write(store, next(writes, []))
        registry.sync()
        assert isinstance(page.next_cursor, str)
        page = registry.list(cwd=cwd, cursor=page.next_cursor, archived=archived, agent=agent, pinned=pinned)


@FAST
@given(
    before=history,
    during=st.lists(history.map(lambda ops: ops[:4]), max_size=12),
    page_size=st.integers(1, 4),
    cwd=st.none() | st.sampled_from(CWDS),
    archived=st.sampled_from(["exclude", "include", "only"]),
    agent=st.none() | st.sampled_from(AGENTS),
    pinned=st.none() | st.booleans(),
)
def test_a_walk_returns_the_list_as_of_its_start_once_each(
    before: list[tuple[str, list[events.Event]]],
    during: list[list[tuple[str, list[events.Event]]]],
    page_size: int,
    cwd: str | None,
    archived: Archived,
    agent: str | None,
    pinned: bool | None,
) -> None:
    store = MemoryStore()
    _write(store, before)
    registry = SessionRegistry(store, page_size=page_size, follow=False)
    start = registry.position
    seen: list[str] = []
    for page in _walk(registry, store, during, cwd=cwd, archived=archived, agent=agent, pinned=pinned):
        assert page.sessions or page.next_cursor is UNSET, "an empty page with a nextCursor"
        assert len(page.sessions) <= page_size
        assert page.meta is UNSET
        seen.extend(info.session_id for info in page.sessions)
    assert seen == _live_at(store.read(), start, cwd, archived, agent, pinned)
    registry.close()


@FAST
@given(
    before=history,
    during=st.lists(history.map(lambda ops: ops[:4]), max_size=12),
    page_size=st.integers(1, 3),
    window=st.integers(0, 4),
)
def test_past_the_window_a_walk_goes_on_without_repeating_a_session(
    before: list[tuple[str, list[events.Event]]],
    during: list[list[tuple[str, list[events.Event]]]],
    page_size: int,
    window: int,
) -> None:
    store = MemoryStore()
    _write(store, before)
    registry = SessionRegistry(store, page_size=page_size, window=window, follow=False)
    start = registry.position
    log_at_start = store.read()
    seen: list[str] = []
    for number, page in enumerate(_walk(registry, store, during)):
        seen.extend(info.session_id for info in page.sessions)
        if number > 0 and page.meta is not UNSET:
            assert page.meta[META_CONSISTENCY] == "current"
    assert len(seen) == len(set(seen)), "a session was shown twice"
    live_then = _live_at(log_at_start, start, None)
    assert set(seen) <= set(live_then), "a session that was not live when the walk began"
    changed_since = {r.session_id for r in store.read(start)}
    assert [s for s in live_then if s not in changed_since] == [s for s in seen if s not in changed_since]
    registry.close()


_FOREIGN_KIND = """
import msgspec, events
from registry.fold import fold
class Pinned(msgspec.Struct, frozen=True, tag="pinned"):
    pinned: bool = True
created = events.LogEntry(1, "s", 1, events.SessionCreated(cwd="/w", at=1))
state = fold(None, created)
try:
    after = fold(state, events.LogEntry(2, "s", 2, Pinned()))  # type: ignore[arg-type]
except AssertionError:
    print("refused")
else:
    print("deleted" if after is not None and after.deleted else "folded")
"""


@pytest.mark.parametrize("optimise", [[], ["-O"]])
def test_an_event_kind_the_fold_does_not_name_is_refused_never_read_as_another(optimise: list[str]) -> None:
    """A kind missing from the fold is a type error (``assert_never``: mypy names the fold); at run time it is
    refused, with ``python -O`` too, where an ``assert isinstance`` would have read it as a deletion."""
    ran = subprocess.run(
        [sys.executable, *optimise, "-c", _FOREIGN_KIND], capture_output=True, text=True, check=True, timeout=60
    )
    assert ran.stdout.strip() == "refused", ran.stdout + ran.stderr
