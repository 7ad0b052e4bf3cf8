"""The read model on PostgreSQL is kept in the append's own transaction: the events and the rows they change commit
together; a read model found behind folds the gap in that transaction; a catch-up holding the read model's lock
makes appends leave their fold to it, never fold twice; the first page is fresh in one statement.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest

from events import ANY, ConcurrencyError, SessionCreated, SessionUpdated
from events.postgres import PostgresStore
from registry import SessionRegistry
from registry.backends import backend_for
from registry.readmodel.check import check_read_model
from registry.readmodel.guard import open_read_model
from registry.readmodel.keys import Seal
from tests.exchanges import parsed, round_trips
from tests.postgres_schema import Schema, tables_of


@pytest.fixture
def schema(postgres_schemas: Callable[[], str]) -> Schema:
    return Schema.of(postgres_schemas())


def test_an_append_commits_its_read_model_rows_in_the_same_transaction(schema: Schema) -> None:
    with PostgresStore.from_url(schema.url) as store:
        model = tables_of(store)
        # Straight to the store: nobody calls catch_up, yet the rows are there when the append returns.
        store.append("a", [SessionCreated(cwd="/w", at=1)])
        store.append("a", [SessionUpdated(at=5, messages=2)])
        assert schema.checkpoint_and_head() == (2, 2)
        assert model.position == 2
        state = model.get("a")
        assert state is not None and state.messages == 2
        model.close()
        # A read model opened elsewhere sees the same rows without folding anything.
        with PostgresStore.from_url(schema.url) as other:
            again = open_read_model(backend_for(other), catch_up=False)
            assert again.position == 2 and again.count() == 1
            found = again.get("a")
            assert found is not None and found.updated_at == 5
            again.close()


def test_a_read_model_behind_the_log_is_caught_up_by_the_next_append(schema: Schema) -> None:
    with PostgresStore.from_url(schema.url) as store, PostgresStore.from_url(schema.url) as bare:
        model = open_read_model(backend_for(store))
        for n in range(5):  # a store with no read model open: appends that do not fold
            bare.append(f"s{n}", [SessionCreated(cwd="/w", at=n + 1)])
        assert schema.checkpoint_and_head() == (0, 5)
        store.append("s0", [SessionUpdated(at=10)])
        assert schema.checkpoint_and_head() == (6, 6)
        assert model.count() == 5
        assert check_read_model(backend_for(store), model).mismatches == []
        model.close()


def test_a_catch_up_holding_the_lock_gets_the_fold_never_twice(schema: Schema) -> None:
    with PostgresStore.from_url(schema.url) as store:
        model = tables_of(store)
        store.append("a", [SessionCreated(cwd="/w", at=1)])
        with psycopg.connect(schema.conninfo) as holder:  # as a catch-up in another process would, mid-transaction
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (model._key,))
            store.append("b", [SessionCreated(cwd="/w", at=2)])
            store.append("a", [SessionUpdated(at=3, messages=1)])
            assert schema.checkpoint_and_head() == (1, 3)
            holder.rollback()
        assert model.catch_up() == 3
        assert model.count() == 2
        store.append("c", [SessionCreated(cwd="/w", at=4)])
        assert schema.checkpoint_and_head() == (4, 4)
        assert model.count() == 3
        assert check_read_model(backend_for(store), model).mismatches == []
        model.close()


def test_an_append_from_the_end_it_knows_writes_nothing_while_a_catch_up_holds_the_read_model(schema: Schema) -> None:
    # After a quiet stretch a lone writer sends its event and its fold in one statement computed from the log's end
    # it knows, the fold behind a guard (the read model's lock free of a catch-up, its checkpoint and floor what
    # this process left). When the guard fails, that statement writes nothing - the event neither - and the append
    # goes on the other ways: the event is stored once, and folded later (here by the next append).
    from events.testing import check_log  # noqa: PLC0415

    with PostgresStore(schema.conninfo, schema=schema.name, pool_size=1) as store:
        model = tables_of(store)
        store.append("a", [SessionCreated(cwd="/w", at=1)])
        for at in range(2, 12):
            store.append("a", [SessionUpdated(at=at)])
        sent = parsed(store, lambda: store.append("a", [SessionUpdated(at=12)]))
        assert len(sent) == 2 and b"WITH ok AS" in sent[1]  # the lock, then the event and its fold from the end known
        with psycopg.connect(schema.conninfo) as holder:  # as a catch-up in another process would, mid-transaction
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (model._key,))
            sent = parsed(store, lambda: store.append("a", [SessionUpdated(at=13, messages=3)]))
            assert schema.checkpoint_and_head() == (12, 13)
            holder.rollback()
        assert b"WITH ok AS" in sent[1] and len(sent) > 2  # tried from the end it knew first, then went on
        store.append("a", [SessionUpdated(at=14)])  # the read model behind: folds the gap in its transaction
        assert schema.checkpoint_and_head() == (14, 14)
        assert [r.position for r in check_log(store)] == list(range(1, 15))
        state = model.get("a")
        assert state is not None and state.messages == 3 and state.version == 14
        assert check_read_model(backend_for(store), model).mismatches == []
        model.close()


def test_the_first_page_is_fresh_across_processes(schema: Schema) -> None:
    with SessionRegistry.open(schema.url, follow=False) as one, SessionRegistry.open(schema.url, follow=False) as two:
        one.create("/w", session_id="x")
        assert [s.session_id for s in two.list().sessions] == ["x"]
        two.create("/w", session_id="y", at=10**18)
        two.record_activity("x", at=2 * 10**18)
        assert [s.session_id for s in one.list().sessions] == ["x", "y"]
        assert [s.session_id for s in one.list(cwd="/w").sessions] == ["x", "y"]
        # Bypassing both read models (an older library, say): the next first page catches up before answering.
        with PostgresStore.from_url(schema.url) as bare:
            bare.append("z", [SessionCreated(cwd="/w", at=3 * 10**18)])
        assert [s.session_id for s in one.list().sessions] == ["z", "x", "y"]


def test_two_writers_on_one_session_still_conflict_and_the_loser_writes_nothing(schema: Schema) -> None:
    from events import ConcurrencyError  # noqa: PLC0415

    with PostgresStore.from_url(schema.url) as one, PostgresStore.from_url(schema.url) as two:
        first, second = open_read_model(backend_for(one)), open_read_model(backend_for(two))
        one.append("s", [SessionCreated(cwd="/w", at=1)])
        one.append("s", [SessionUpdated(at=2, messages=1)], 1)
        with pytest.raises(ConcurrencyError):
            two.append("s", [SessionUpdated(at=3, messages=5)], 1)
        assert second.catch_up() == 2
        state = second.get("s")
        assert state is not None and state.messages == 1 and state.version == 2
        assert check_read_model(backend_for(two), second).mismatches == []
        first.close()
        second.close()


@pytest.mark.parametrize("batch", [1, 40])
def test_append_batch_and_group_commits_fold_in_their_transaction(schema: Schema, batch: int) -> None:
    from events import AppendRequest  # noqa: PLC0415

    with PostgresStore.from_url(schema.url) as store:
        model = open_read_model(backend_for(store))
        store.append_batch([AppendRequest(f"s{n}", [SessionCreated(cwd=f"/w{n % 3}", at=n + 1)]) for n in range(batch)])
        assert schema.checkpoint_and_head() == (batch, batch)
        assert model.count() == batch
        assert model.cwd_counts() == {f"/w{k}": len(range(k, batch, 3)) for k in range(min(batch, 3))}
        assert check_read_model(backend_for(store), model).mismatches == []
        model.close()


def test_a_command_decided_on_a_stale_state_is_decided_again(schema: Schema) -> None:
    from registry.errors import SessionDeletedError  # noqa: PLC0415

    with SessionRegistry.open(schema.url, follow=False) as one, SessionRegistry.open(schema.url, follow=False) as two:
        one.create("/w", session_id="s", title="A")
        one.create("/w", session_id="gone")
        assert two.get("s").title == "A" and two.get("gone").session_id == "gone"  # two has seen both
        one.record_activity("s", messages=2)
        two.record_activity("s", messages=3)  # two's state is a version behind: refused, read again, written
        one.change_info("s", title="B")
        two.change_info("s", title="A")  # "no change" on two's stale state; a fresh read says there is one
        one.delete("gone")
        with pytest.raises(SessionDeletedError):
            two.record_activity("gone", messages=1)
        one.sync()
        state = one.state("s")
        assert state is not None and state.messages == 5 and state.title == "A"
        assert check_read_model(one.backend, one.read_model).mismatches == []


def test_a_lone_event_folds_in_its_own_statement_and_falls_back_only_when_the_tables_or_its_session_moved(
    schema: Schema, caplog: pytest.LogCaptureFixture
) -> None:
    # The server places the event and its fold wherever the log ends (one exchange: ``round_trips`` 1); the fold
    # is from the session's state as this process last saw it, behind a guard. When the guard fails, the append
    # reads first (that exchange, then two) and folds from what it reads.
    from events.testing import check_log  # noqa: PLC0415

    with (
        PostgresStore(schema.conninfo, schema=schema.name, pool_size=1) as mine,
        PostgresStore.from_url(schema.url) as other,
        PostgresStore.from_url(schema.url) as bare,
    ):
        model, theirs = open_read_model(backend_for(mine)), open_read_model(backend_for(other))

        def append(session_id: str, event: SessionCreated | SessionUpdated, expected: int) -> tuple[list[int], int]:
            positions: list[list[int]] = []
            trips = round_trips(mine, lambda: positions.append(mine.append(session_id, [event], expected)))
            return positions[0], trips

        assert append("a", SessionCreated(cwd="/w", at=1), 0) == ([1], 1)  # a new session: no state needed
        assert append("a", SessionUpdated(at=2), 1) == ([2], 1)  # from the state its own append left
        assert other.append("b", [SessionCreated(cwd="/w", at=3)], 0) == [3]
        assert append("a", SessionUpdated(at=4), 2) == ([4], 1)  # the log moved, not a's row: no read
        assert other.append("a", [SessionUpdated(at=5, messages=7)], 3) == [5]  # a's row moves behind mine's back
        with pytest.raises(ConcurrencyError):
            mine.append("a", [SessionUpdated(at=6)], 3)  # a's version is 4 now: the read says so
        assert append("a", SessionUpdated(at=6), 4) == ([6], 3)  # mine's state of a was stale: the guard, a read
        assert append("a", SessionUpdated(at=7), 5) == ([7], 1)  # and it is known again
        bare.append("c", [SessionCreated(cwd="/w", at=8)])  # no read model on bare: the tables fall behind
        assert schema.checkpoint_and_head() == (7, 8)
        # The guard again; the read folds the gap too (its events and its sessions' rows: two more round trips).
        assert append("a", SessionUpdated(at=9), 6) == ([9], 5)
        assert schema.checkpoint_and_head() == (9, 9)
        theirs.rebuild()  # the same rows again, at the same checkpoint: mine's state of a is still the row
        assert append("a", SessionUpdated(at=10), 7) == ([10], 1)
        assert append("a", SessionUpdated(at=11), ANY) == ([11], 1)  # any version: the next of the state's
        assert append("b", SessionUpdated(at=12), ANY) == ([12], 2)  # a session mine has not seen: a read
        assert [r.position for r in check_log(mine)] == list(range(1, 13))
        for store, read_model in ((mine, model), (other, theirs)):
            read_model.catch_up()
            assert check_read_model(backend_for(store), read_model).mismatches == []
        state = model.get("a")
        assert state is not None and state.messages == 7 and state.version == 9 and state.position == 11
        # The blob the server finished (the position appended to what this process sealed) is the sealed state.
        with psycopg.connect(schema.conninfo, autocommit=True) as conn:
            row = conn.execute(f"SELECT state FROM {schema.name}.rm_sessions WHERE session_id = 'a'").fetchone()
        assert row is not None and row[0] == Seal(backend_for(mine).seal_key()).seal(state)
        model.close()
        theirs.close()
    # A collision is expected and handled: psycopg's "error ignored terminating <Pipeline>" is not logged for it.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []


def test_an_append_folds_while_the_previous_append_still_holds_its_share_of_the_lock(schema: Schema) -> None:
    # The moment between two appends: the first has committed but its backend has not yet let go of the read
    # model's lock when the next, woken by the append lock, tries it. Appends share it: the next one folds.
    with PostgresStore.from_url(schema.url) as store:
        model = tables_of(store)
        store.append("a", [SessionCreated(cwd="/w", at=1)])
        with psycopg.connect(schema.conninfo) as previous:
            previous.execute("SELECT pg_advisory_xact_lock_shared(%s)", (model._key,))
            store.append("b", [SessionCreated(cwd="/w", at=2)])
            assert schema.checkpoint_and_head() == (2, 2)
            previous.rollback()
        assert check_read_model(backend_for(store), model).mismatches == []
        model.close()


def test_a_short_catch_up_waits_for_the_append_lock_and_appends_fold_after_it(schema: Schema) -> None:
    with PostgresStore.from_url(schema.url) as store, PostgresStore.from_url(schema.url) as bare:
        model = tables_of(store)
        for n in range(3):  # no read model open on bare: the tables fall behind
            bare.append(f"s{n}", [SessionCreated(cwd="/w", at=n + 1)])
        with psycopg.connect(schema.conninfo) as appending:  # an append's transaction, as another process holds it
            appending.execute("SELECT pg_advisory_xact_lock(%s)", (store.append_lock_key,))
            catching_up = threading.Thread(target=model.catch_up)
            catching_up.start()
            catching_up.join(0.5)
            assert catching_up.is_alive()  # it waits for the append, rather than taking the tables beside it
            assert schema.checkpoint_and_head() == (0, 3)
            appending.rollback()
        catching_up.join(10)
        assert not catching_up.is_alive()
        assert schema.checkpoint_and_head() == (3, 3)
        store.append("s0", [SessionUpdated(at=9, messages=1)])
        assert schema.checkpoint_and_head() == (4, 4)
        assert check_read_model(backend_for(store), model).mismatches == []
        model.close()


def test_catching_up_to_a_position_stops_there(schema: Schema) -> None:
    with (
        PostgresStore.from_url(schema.url) as one,
        PostgresStore.from_url(schema.url) as two,
        PostgresStore.from_url(schema.url) as bare,
    ):
        mine, theirs = tables_of(one), tables_of(two)
        one.append("a", [SessionCreated(cwd="/w", at=1)])
        two.append("b", [SessionCreated(cwd="/w", at=2)])  # folded by two's own transaction
        bare.append("c", [SessionCreated(cwd="/w", at=3)])  # not folded
        assert mine.position == 1 and schema.checkpoint_and_head() == (2, 3)
        assert mine.catch_up(2) == 2  # the tables are there already: nothing to fold, no transaction
        assert schema.checkpoint_and_head() == (2, 3)
        assert mine.catch_up() == 3
        mine.close()
        theirs.close()


@pytest.mark.parametrize("commit", ["flush-barrier", "in-lock"])
def test_concurrent_writers_keep_positions_gapless_the_chain_valid_and_the_tables_folded(
    schema: Schema, commit: str
) -> None:
    from events.testing import check_log  # noqa: PLC0415
    from events.verify import verify_log  # noqa: PLC0415

    writers, turns = 4, 15
    gate = threading.Barrier(writers)
    failures: list[BaseException] = []
    with SessionRegistry.open(schema.url, follow=False) as first:
        first.create("/w", session_id="shared")  # a session every writer turns in too: conflicts, retried

    def write() -> None:
        # A store (pool, writer, read model) of its own per thread: to the server, another process.
        store = PostgresStore(schema.conninfo, schema=schema.name, commit=commit)  # type: ignore[arg-type]
        try:
            with SessionRegistry(store, follow=False, owns_store=True) as registry:
                gate.wait()
                own = registry.create("/w").session_id
                for _ in range(turns):
                    registry.record_activity(own, messages=1)
                    registry.record_activity("shared", messages=1)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures
    with SessionRegistry.open(schema.url, follow=False) as registry:
        store = registry.store
        assert [r.position for r in check_log(store)] == list(range(1, 1 + writers * (1 + 2 * turns) + 1))
        assert verify_log(store).healthy
        assert schema.checkpoint_and_head()[0] == store.head()
        assert check_read_model(backend_for(store), registry.read_model).mismatches == []
        messages = {state.session_id: state.messages for state in registry.read_model.states()}
        assert messages.pop("shared") == writers * turns
        assert sorted(messages.values()) == [turns] * writers


def test_a_long_catch_up_leaves_fresh_planner_statistics(schema: Schema, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without them a deep page's rm_past part was planned for the rows of the catch-up's first chunks (a
    parallel bitmap scan, 19 ms at 100k sessions against 0.06 ms after ANALYZE)."""
    with PostgresStore.from_url(schema.url) as store:
        for n in range(30):  # before any read model: a first open folds them in a long catch-up
            store.append(f"s{n}", [SessionCreated(cwd="/w", at=n)])
        monkeypatch.setattr("registry.readmodel.postgres.IN_TRANSACTION", 5)
        model = tables_of(store)
        assert model.position == 30
        model.close()
    with psycopg.connect(schema.conninfo, autocommit=True) as conn:
        analysed = conn.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s AND last_analyze IS NOT NULL", (schema.name,)
        ).fetchall()
    assert {"rm_sessions", "rm_past"} <= {name for (name,) in analysed}
