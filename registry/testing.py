"""The contract every read-side backend keeps, as an importable pytest suite (beside ``events.testing``).

A backend's test module subclasses ``ReadModelContract`` and says how to make a store's URL::

    class TestSqliteReadModel(ReadModelContract):
        @pytest.fixture
        def store_url(self, tmp_path): return f"sqlite:///{tmp_path}/log.db"

The suite holds the backend's read model (``registry.backends.backend_for(store)``) to the reference fold of the
log (``Projection``): every session, the live count, the list order page by page, the list as of an earlier
position, a rebuild; and its answers about the log (events up to a position, where derived files live).
``tables`` is True for a backend that keeps read-model tables: the schema the tables were made with is then
checked against the one declared in ``registry.readmodel.tables``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from events.factory import open_store
from events.model import SessionCreated, SessionDeleted, SessionInfoChanged, SessionUpdated, Usage
from events.store import NO_STREAM, EventStore
from events.testing import fake_clock
from registry.backend import Backend
from registry.backends import backend_for
from registry.evidence import log_shorter
from registry.filters import ListFilter
from registry.projection import Projection
from registry.readmodel import ReadModel
from registry.readmodel.guard import open_read_model
from registry.readmodel.schema import sqlite_ddl
from registry.readmodel.usage_tables import GROUPS, UsageQuery, UsageRow, day_rows, grouped, usage_rows
from registry.usage import DAY_NS, UsageKey, fold_usage

__all__ = ["ReadModelContract", "reference_fold", "reference_usage", "walk"]

_SESSIONS_DDL = next(ddl for ddl in sqlite_ddl() if ddl.startswith("CREATE TABLE rm_sessions "))


def reference_fold(store: EventStore, until: int | None = None) -> Projection:
    """The fold of the log from position 0, trusting nothing derived."""
    projection = Projection(window=0)
    for entry in store.scan(0, until=store.head() if until is None else until):
        projection.apply(entry)
    return projection


def reference_usage(store: EventStore) -> list[UsageRow]:
    """The daily usage totals of the whole log, folded from position 0 by the reference fold (a turn counts where
    the fold applied it)."""
    projection = Projection(window=0)
    totals: dict[UsageKey, list[int]] = {}
    for entry in store.scan(0, until=store.head()):
        change = projection.apply(entry)
        event = entry.event
        if change is not None and isinstance(event, SessionUpdated) and event.usage is not None:
            fold_usage(totals, event.at, change.after.agent, change.after.cwd, event.usage)
    return usage_rows(totals)


def _totals(rows: list[UsageRow]) -> dict[UsageKey, list[int]]:
    return {(day, agent, cwd, model, currency): list(sums) for cwd, model, currency, agent, day, *sums in rows}


_USAGE_QUERIES = [
    *(UsageQuery(by) for by in GROUPS),
    UsageQuery("day", since=20_001, until=20_001),
    UsageQuery("model", agent="codex"),
    UsageQuery("agent", cwd="/work/1", since=20_001),
    UsageQuery("day", cwd="/work/0", agent="codex"),
    UsageQuery("cwd", until=20_001),
]


def _turn(n: int, day: int, **usage: object) -> SessionUpdated:
    return SessionUpdated(at=day * DAY_NS + 3_600_000_000_000 + n, messages=2, usage=Usage(**usage))  # type: ignore[arg-type]


def _usage_turns(store: EventStore, prefix: str) -> None:
    """Turns with usage over three days, two agents, two cwds, models, reported costs in two currencies and none;
    lone appends and batches (one turn, and turns of two days at once); usage after a deletion and before a
    creation (ignored by the fold)."""
    for n, agent in enumerate(("codex", "claude-code", None)):
        store.append(f"{prefix}{n}", [SessionCreated(cwd=f"/work/{n % 2}", at=20_000 * DAY_NS, agent=agent)], NO_STREAM)
    store.append(f"{prefix}0", [_turn(1, 20_000, input_tokens=100, output_tokens=10, model="gpt-5")], 1)
    store.append(f"{prefix}0", [_turn(2, 20_001, input_tokens=7, cost_nanos=5, currency="USD", model="gpt-5")], 2)
    store.append(
        f"{prefix}1",
        [
            _turn(3, 20_001, input_tokens=1, cached_read_tokens=900, model="claude-sonnet-4-5"),
            _turn(4, 20_002, output_tokens=3, thought_tokens=2, cost_nanos=40, currency="EUR"),
        ],
        1,
    )
    store.append(f"{prefix}1", [_turn(5, 20_002, cached_write_tokens=11, context_used=5, context_size=9)], 3)
    store.append(f"{prefix}2", [_turn(6, 20_001, input_tokens=2, output_tokens=2, model="gpt-5")], 1)
    store.append(f"{prefix}2", [SessionDeleted(), _turn(7, 20_002, input_tokens=1_000)], 2)
    store.append(f"{prefix}orphan", [_turn(8, 20_001, input_tokens=5)], NO_STREAM)


def walk(model: ReadModel, as_of: int, cwd: str | None = None, limit: int = 3) -> list[str]:
    """Every session id of the list as of ``as_of``, read page by page as ``session/list`` reads it."""
    return [
        state.session_id
        for page in model.pages(as_of=as_of, where=ListFilter(cwd=cwd), limit=limit)
        for state in page.states
    ]


def _fill(store: EventStore, sessions: int = 12) -> None:
    """A small history: sessions in two cwds, activity, title changes, deletions."""
    for n in range(sessions):
        store.append(f"s{n:02d}", [SessionCreated(cwd=f"/work/{n % 2}", at=1_000 + n)], NO_STREAM)
    for n in range(0, sessions, 3):
        store.append(f"s{n:02d}", [SessionUpdated(at=5_000 + n, messages=2)], len(store.read_stream(f"s{n:02d}")))
    for n in range(1, sessions, 4):
        version = len(store.read_stream(f"s{n:02d}"))
        store.append(f"s{n:02d}", [SessionInfoChanged(title=f"t{n}", updated_at=6_000 + n)], version)
    for n in range(2, sessions, 5):
        version = len(store.read_stream(f"s{n:02d}"))
        store.append(f"s{n:02d}", [SessionDeleted()], version)


class ReadModelContract:
    """What every read-side backend promises. Subclass and provide the ``store_url`` fixture."""

    tables: bool = False
    """Whether the backend keeps read-model tables (whose schema is then checked)."""
    dialect: str = ""
    """The SQL of the tables (``sqlite``, ``postgresql``): picks a damage written for one dialect."""

    @pytest.fixture
    def store_url(self) -> str:
        raise NotImplementedError("a backend's test class provides the store_url fixture")

    @pytest.fixture
    def store(self, store_url: str) -> Iterator[EventStore]:
        store = open_store(store_url, clock=fake_clock())
        yield store
        store.close()

    @pytest.fixture
    def backend(self, store: EventStore) -> Backend:
        return backend_for(store)

    def open_model(self, store: EventStore, window: int = 1_000) -> ReadModel:
        return open_read_model(backend_for(store), window=window)

    def tamper(self, store: EventStore, statement: str) -> None:
        """Run SQL statements (``;``-separated) on the store's tables from outside the store (a hand edit, a
        damaged disk)."""
        pytest.skip(f"{type(store).__name__} keeps no tables to damage")

    # -- the read model -----------------------------------------------------------------------------

    def test_an_empty_log_has_an_empty_read_model(self, store: EventStore, backend: Backend) -> None:
        with self.open_model(store) as model:
            assert model.position == 0 and model.count() == 0 and list(model.states()) == []
            assert walk(model, 0) == []
            assert model.kind == ("tables" if self.tables else "memory")

    def test_every_answer_equals_the_fold_of_the_log(self, store: EventStore) -> None:
        _fill(store)
        with self.open_model(store) as model:
            reference = reference_fold(store)
            assert model.catch_up() == store.head() == model.position
            assert {s.session_id: s for s in model.states()} == reference.states()
            assert model.count() == len(reference)
            assert model.cwd_counts() == reference.cwd_counts()
            assert walk(model, model.position) == [s.session_id for s in reference.sessions()]
            for cwd in ("/work/0", "/work/1", "/nowhere"):
                assert walk(model, model.position, cwd) == [s.session_id for s in reference.sessions() if s.cwd == cwd]
            for session_id, state in reference.states().items():
                assert model.get(session_id) == state
            assert model.get("nobody") is None

    def test_the_list_as_of_an_earlier_position_is_exact_within_the_window(self, store: EventStore) -> None:
        _fill(store, 8)
        with self.open_model(store) as model:  # built first, then changed: the versions replaced since are kept
            built = store.head()
            _fill_more(store)
            model.catch_up()
            assert model.window_floor() <= built
            for position in range(built, store.head() + 1):
                then = reference_fold(store, position)
                assert walk(model, position) == [s.session_id for s in then.sessions()], position
                for session_id, state in then.states().items():
                    assert model.state_at(session_id, position) == state, (session_id, position)

    def test_a_rebuild_gives_the_same_answers(self, store: EventStore) -> None:
        _fill(store)
        with self.open_model(store) as model:
            before = {s.session_id: s for s in model.states()}
            assert model.rebuild() == store.head()
            assert {s.session_id: s for s in model.states()} == before
            assert walk(model, model.position) == [s.session_id for s in reference_fold(store).sessions()]

    def test_a_second_read_model_sees_the_first_ones_writes(self, store_url: str, store: EventStore) -> None:
        _fill(store, 4)
        first = self.open_model(store)
        other = open_store(store_url, clock=fake_clock())
        second = self.open_model(other)
        try:
            store.append("late", [SessionCreated(cwd="/work/0", at=99_000)], NO_STREAM)
            assert second.catch_up() == store.head()
            assert second.get("late") is not None
            assert {s.session_id for s in second.states()} == {s.session_id for s in first.states()} | {"late"}
        finally:
            second.close()
            other.close()
            first.close()

    def test_usage_totals_equal_the_fold_of_the_log(self, store_url: str, store: EventStore) -> None:
        _usage_turns(store, "early")  # before the read model: folded by its build
        with self.open_model(store) as model:
            _usage_turns(store, "live")  # with it open: folded in the appends' own transactions
            other = open_store(store_url, clock=fake_clock())
            try:
                _usage_turns(other, "other")  # by a store without it: folded by a catch-up
            finally:
                other.close()
            model.catch_up()
            rows = reference_usage(store)
            # Six turns a prefix count (the one after a deletion and the one before a creation do not), in six rows
            # (memory:// is one log per open: the other store's turns are not in this one)
            prefixes = 3 if store.read_stream("other0") else 2
            assert (len(rows), sum(sums[0] for sums in _totals(rows).values())) == (6, 6 * prefixes)  # turns
            assert {currency for _cwd, _model, currency, *_ in rows} == {"", "USD", "EUR"}
            for query in _USAGE_QUERIES:
                assert model.usage(query) == grouped(rows, query), query
            if model.tables is not None:
                assert sorted(model.tables.stored("rm_usage")) == sorted(rows)
                assert sorted(model.tables.stored("rm_usage_days")) == day_rows(_totals(rows))
            model.rebuild()
            for query in _USAGE_QUERIES:
                assert model.usage(query) == grouped(rows, query), query

    def test_fresh_tables_have_the_declared_schema(self, store: EventStore) -> None:
        with self.open_model(store) as model:
            assert (model.tables is not None) is self.tables
            assert model.tables is None or model.tables.schema_problems() == []

    @pytest.mark.parametrize(
        ("damage", "found"),
        [
            ("DROP INDEX rm_sessions_cwd", "index rm_sessions_cwd is missing"),
            ("DROP INDEX rm_sessions_order", "index rm_sessions_order is missing"),
            ("DROP TABLE rm_past", "table rm_past is missing"),
            ("DROP TABLE rm_usage", "table rm_usage is missing"),
            ("DELETE FROM rm_meta WHERE key = 'checkpoint'", "rm_meta has no checkpoint row"),
            ("ALTER TABLE rm_sessions ADD COLUMN extra INTEGER", "column rm_sessions.extra is not one this version"),
            ("ALTER TABLE rm_past RENAME TO rm_past_old", "table rm_past is missing"),
            ("UPDATE rm_meta SET value = 2 WHERE key = 'version'", "version 2"),
            (  # the names are all there: the definitions differ
                "DROP INDEX rm_sessions_order;"
                " CREATE INDEX rm_sessions_order ON rm_sessions (archived, rank, session_id, valid_from)",
                "index rm_sessions_order is defined as",
            ),
            (
                "ALTER TABLE rm_past RENAME TO rm_past_kept; CREATE VIEW rm_past AS SELECT * FROM rm_past_kept",
                "rm_past is a view, not a table",
            ),
            (
                {  # the table as declared (whatever its columns), but its key in another collation
                    "sqlite": "ALTER TABLE rm_sessions RENAME TO rm_kept; "
                    + _SESSIONS_DDL.replace("session_id TEXT NOT NULL", "session_id TEXT COLLATE NOCASE NOT NULL")
                    + "; INSERT INTO rm_sessions SELECT * FROM rm_kept; DROP TABLE rm_kept",
                    "postgresql": 'ALTER TABLE rm_sessions ALTER COLUMN session_id TYPE text COLLATE "default"',
                },
                "table rm_sessions is defined as",
            ),
            (
                {
                    "sqlite": "CREATE TRIGGER rm_no_writes BEFORE UPDATE ON rm_meta"
                    " BEGIN SELECT RAISE(ABORT, 'no'); END",
                    "postgresql": "CREATE OR REPLACE FUNCTION rm_no() RETURNS trigger LANGUAGE plpgsql AS"
                    " 'BEGIN RAISE EXCEPTION ''no''; END';"
                    " CREATE TRIGGER rm_no_writes BEFORE UPDATE ON rm_meta FOR EACH ROW EXECUTE FUNCTION rm_no()",
                },
                "trigger rm_no_writes on rm_meta is not one this version makes",
            ),
        ],
    )
    def test_a_damaged_schema_is_found_and_rebuilt_at_open(
        self, store: EventStore, damage: str | dict[str, str], found: str
    ) -> None:
        if isinstance(damage, dict):
            if self.dialect not in damage:
                pytest.skip(f"no such damage written for {self.dialect or 'a store without tables'}")
            damage = damage[self.dialect]
        _fill(store, 6)
        self.open_model(store).close()
        self.tamper(store, damage)
        with self.open_model(store) as model:
            assert model.tables is not None and model.tables.schema_problems() == []
            reference = reference_fold(store)
            assert {s.session_id: s for s in model.states()} == reference.states()
            assert walk(model, model.position, "/work/1") == [
                s.session_id for s in reference.sessions() if s.cwd == "/work/1"
            ]
        self.tamper(store, damage)
        unchecked = backend_for(store).tables(window=1_000, catch_up=False)
        assert unchecked is not None
        try:
            assert unchecked.tables is not None
            problems = unchecked.tables.schema_problems()
            assert any(found in p for p in problems), problems
        finally:
            unchecked.close()

    # -- what the backend knows about the log ----------------------------------------------------------

    def test_events_up_to_counts_the_log(self, store: EventStore, backend: Backend) -> None:
        _fill(store, 5)
        positions = [entry.position for entry in store.scan(0, until=store.head())]
        for at in (0, positions[0], positions[len(positions) // 2], store.head()):
            assert backend.events_up_to(at) == sum(1 for p in positions if p <= at)

    def test_integrity_events_are_kept_once_until_acknowledged(self, store: EventStore, backend: Backend) -> None:
        assert backend.integrity_events() == []
        event = log_shorter("read model", 9, 4, "00ff")
        backend.record_integrity(event)
        backend.record_integrity(log_shorter("read model", 9, 4, "00ff"))  # the same finding again: kept once
        backend.record_integrity(log_shorter("kept snapshot", 12, 4))
        # Tables keep it in the store (another backend object sees it); a store without tables, in its backend
        found = (backend_for(store) if self.tables else backend).integrity_events()
        assert [(e.seen_by, e.position, e.head, e.chain, e.acknowledged) for e in found] == [
            ("read model", 9, 4, "00ff", False),
            ("kept snapshot", 12, 4, "", False),
        ]
        assert backend.acknowledge() == 2 and backend.acknowledge() == 0
        assert all(e.acknowledged for e in backend.integrity_events())

    def test_derived_files_have_one_place(self, store: EventStore, backend: Backend) -> None:
        for where in (backend.snapshot_dir(), backend.import_state_path()):
            assert where is None or (isinstance(where, Path) and where.is_absolute())
        size = backend.log_bytes()
        assert size is None or size > 0
        assert backend.store is store
        assert backend_for(store).name == backend.name
        assert backend.name in ("sqlite", "postgresql", "memory", "other")


def _fill_more(store: EventStore) -> None:
    for n in (0, 4, 6):
        version = len(store.read_stream(f"s{n:02d}"))
        store.append(f"s{n:02d}", [SessionUpdated(at=90_000 + n, messages=1)], version)
    store.append("new", [SessionCreated(cwd="/work/1", at=91_000)], NO_STREAM)
