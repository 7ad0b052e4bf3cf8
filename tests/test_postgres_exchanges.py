"""What the read model on PostgreSQL sends to the server: a command and its fold in one round trip whoever
appended last, a later page in one checkout, and what an append does when its fold cannot be written; a walk's
later pages as of its start whoever writes meanwhile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import psycopg
import pytest

from events import SessionUpdated
from events.postgres import PostgresStore
from registry import ListSessionsResult, SessionRegistry
from registry.backends import backend_for
from registry.readmodel.check import check_read_model
from tests.exchanges import parsed, round_trips
from tests.postgres_schema import Schema, tables_of


@pytest.fixture
def schema(postgres_schemas: Callable[[], str]) -> Schema:
    return Schema.of(postgres_schemas())


def test_a_lone_append_and_its_fold_go_in_one_round_trip(schema: Schema) -> None:
    # BEGIN, the lock, the events with their stream's row, the read model's guard and rows, COMMIT: one pipeline, one
    # sync (psycopg's own transaction block synced on entering and on leaving: four).
    with (
        PostgresStore(schema.conninfo, schema=schema.name, pool_size=1) as store,
        SessionRegistry(store, follow=False) as registry,
    ):
        session_id = registry.create("/w").session_id
        assert round_trips(store, lambda: registry.record_activity(session_id, messages=1)) == 1
        assert round_trips(store, lambda: registry.create("/w")) == 1
        # Several events: the server does not chain their links, the writer does, from the log's end it knows (the
        # lone appends before told it, nobody else appending) - and from the end it reads when it knows none.
        assert round_trips(store, lambda: store.append(session_id, [SessionUpdated(at=9)] * 3)) == 1
        assert round_trips(store, lambda: store.append(session_id, [SessionUpdated(at=9)] * 3)) == 1
    with (
        PostgresStore(schema.conninfo, schema=schema.name, pool_size=1) as store,
        SessionRegistry(store, follow=False) as registry,
    ):
        assert round_trips(store, lambda: store.append(session_id, [SessionUpdated(at=9)] * 3)) == 2
        assert round_trips(store, lambda: store.append(session_id, [SessionUpdated(at=9)] * 3)) == 2
        assert round_trips(store, lambda: store.append(session_id, [SessionUpdated(at=9)] * 3)) == 1
        assert round_trips(store, lambda: registry.record_activity(session_id, messages=1)) == 1
        assert check_read_model(backend_for(store), tables_of(store)).mismatches == []


def test_a_lone_writer_after_a_quiet_stretch_goes_from_the_end_it_knows_and_a_collision_loses_nothing(
    schema: Schema,
) -> None:
    # Nobody else appending: after a stretch of appends that each found the log's end where the one before left
    # it, a command goes in the short statement computed from that end (the event, its stream's row, the read
    # model's guard and rows) instead of the one in which the server finds the end - each after the lock: two.
    # Another writer then moves the log: the next command collides on the end it knew, and lands where the server
    # finds the end; the writer is back on that statement until the log is quiet again.
    with (
        PostgresStore(schema.conninfo, schema=schema.name, pool_size=1) as store,
        SessionRegistry(store, follow=False) as mine,
        SessionRegistry(PostgresStore.from_url(schema.url), follow=False, owns_store=True) as theirs,
    ):
        own = mine.create("/w").session_id
        assert _finds_the_end(store, lambda: mine.record_activity(own, messages=1))
        for _ in range(10):
            mine.record_activity(own, messages=1)
        assert not _finds_the_end(store, lambda: mine.record_activity(own, messages=1))
        other = theirs.create("/w").session_id
        theirs.record_activity(other, messages=1)
        mine.record_activity(own, messages=1)  # collides, then goes where the server finds the end
        assert _finds_the_end(store, lambda: mine.record_activity(own, messages=1))
        for registry, session, messages in ((mine, own, 14), (theirs, own, 14), (mine, other, 1)):
            state = registry.state(session)
            assert state is not None and state.messages == messages
        assert check_read_model(backend_for(store), tables_of(store)).mismatches == []


def test_a_command_among_other_writers_is_one_round_trip(schema: Schema) -> None:
    # Other processes append between this one's appends (writers contend): each append and its fold are still one
    # statement in one exchange - the server places them at the log's end, with no read first.
    with (
        PostgresStore(schema.conninfo, schema=schema.name, pool_size=1) as store,
        SessionRegistry(store, follow=False) as mine,
        SessionRegistry(PostgresStore.from_url(schema.url), follow=False, owns_store=True) as theirs,
    ):
        own, other = mine.create("/w").session_id, theirs.create("/w").session_id
        for turn in range(3):
            theirs.record_activity(other, messages=1)
            assert round_trips(store, lambda: mine.record_activity(own, messages=1)) == 1
            theirs.create("/w")
            assert round_trips(store, lambda: mine.create("/w")) == 1
            title = f"t{turn}"
            theirs.change_info(other, title=title)
            assert round_trips(store, functools.partial(mine.change_info, own, title=title)) == 1
        assert check_read_model(backend_for(store), tables_of(store)).mismatches == []
        assert mine.get(own).title == "t2" and theirs.get(own).title == "t2"


def test_a_later_page_is_one_checkout_and_one_round_trip_once_writers_are_at_work(schema: Schema) -> None:
    # The page as of the walk's start and the check that nothing changed since go together; when another process
    # has written, the page through rm_past follows on the same connection - and once that is seen, both go in
    # one exchange.
    with (
        PostgresStore(schema.conninfo, schema=schema.name, pool_size=1) as store,
        SessionRegistry(store, follow=False, page_size=2) as mine,
        SessionRegistry(PostgresStore.from_url(schema.url), follow=False, owns_store=True) as theirs,
    ):
        for n in range(6):
            theirs.create("/w", session_id=f"s{n}", at=n)
        walk = mine.list()
        assert round_trips(store, lambda: mine.list(cursor=_next(walk))) == 1  # nothing changed: one statement
        for turn, expected in enumerate((2, 1, 1)):
            walk = mine.list()
            second = mine.list(cursor=_next(walk))
            theirs.record_activity(second.sessions[0].session_id, at=10**15 + turn)  # the list changes under the walk
            again = functools.partial(mine.list, cursor=_next(walk))
            assert round_trips(store, again) == expected
            assert again() == second  # as of the walk's start


@pytest.mark.parametrize("damage", ["rm_past dropped", "guard function dropped"])
def test_an_append_commits_without_its_fold_when_the_hook_cannot_write(
    schema: Schema, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    with PostgresStore.from_url(schema.url) as store, SessionRegistry(store, follow=False) as registry:
        session_id = registry.create("/w").session_id
        # Several events a time: the third such append goes from the end it knows (the guard function).
        for at in (1, 2):
            store.append(session_id, [SessionUpdated(at=at)] * 2)
        with psycopg.connect(schema.conninfo, autocommit=True) as conn:
            conn.execute(
                f"DROP TABLE {schema.name}.rm_past"
                if "rm_past" in damage
                else f"DROP FUNCTION {schema.name}.rm_guard_1"
            )
        # The append that would write there commits all the same (the log decides), without its fold, which the
        # read model catches up (or rebuilds) before it answers.
        if "rm_past" in damage:
            info = registry.record_activity(session_id, messages=2, at=2 * 10**18)
        else:
            store.append(session_id, [SessionUpdated(at=10**18), SessionUpdated(at=2 * 10**18, messages=2)])
            info = registry.get(session_id)
        assert "commit hook failed" in caplog.text
        assert isinstance(info.updated_at, str) and info.updated_at.startswith("2033")
        assert schema.checkpoint_and_head()[1] == (6 if "rm_past" in damage else 7)
        assert [s.updated_at for s in registry.list().sessions] == [info.updated_at]
    with PostgresStore.from_url(schema.url) as store:  # the next writer to open defines it again
        model = tables_of(store)
        with psycopg.connect(schema.conninfo, autocommit=True) as conn:
            row = conn.execute(f"SELECT to_regprocedure('{schema.name}.rm_guard_1(bigint,bigint,bigint)')").fetchone()
            assert row is not None and row[0] is not None
        assert check_read_model(backend_for(store), model).mismatches == []
        model.close()


def _finds_the_end(store: PostgresStore, action: Callable[[], object]) -> bool:
    """Whether the lone append ``action`` makes goes in the statement in which the server finds the log's end (else
    from the end this process knows); either way two statements, the lock and that one."""
    sent = parsed(store, action)
    assert len(sent) == 2 and b"pg_advisory_xact_lock" in sent[0]
    return b"ORDER BY position DESC" in sent[1]


def _next(page: ListSessionsResult) -> str:
    assert isinstance(page.next_cursor, str)
    return page.next_cursor


def test_a_walk_reads_later_pages_as_of_its_start_whoever_writes_meanwhile(schema: Schema) -> None:
    # A later page reads the current rows alone while the checkpoint is still the walk's position, and through the
    # past rows once anything moved it - here another process, which this one cannot know of but by reading.
    with PostgresStore.from_url(schema.url) as store, SessionRegistry(store, follow=False, page_size=2) as mine:
        for n in range(6):
            mine.create("/w", session_id=f"s{n}")
            mine.record_activity(f"s{n}", at=(n + 1) * 10**12)
        first = mine.list()
        assert [s.session_id for s in first.sessions] == ["s5", "s4"]
        second = mine.list(cursor=_next(first))  # nothing changed since the walk began
        assert [s.session_id for s in second.sessions] == ["s3", "s2"]
        with PostgresStore.from_url(schema.url) as theirs, SessionRegistry(theirs, follow=False) as other:
            other.record_activity("s1", at=10**15)  # s1 moves to the top, for anyone reading from now on
        third = mine.list(cursor=_next(second))
        assert [(s.session_id, s.updated_at) for s in third.sessions] == [
            ("s1", "1970-01-01T00:33:20.000Z"),
            ("s0", "1970-01-01T00:16:40.000Z"),
        ]
        assert not isinstance(third.next_cursor, str)  # the last page
        assert [s.session_id for s in mine.list().sessions] == ["s1", "s5"]  # a new walk sees it
        # This process's own write, with a walk under way: the same.
        walk = mine.list()
        mine.record_activity("s0", at=10**16)
        rest = mine.list(cursor=_next(walk))
        assert [s.session_id for s in rest.sessions] == ["s4", "s3"]


def test_a_writer_that_may_not_define_the_guard_function_appends_with_the_guard_as_a_block(schema: Schema) -> None:
    # A role that may write the tables but not create in the schema: the guard goes as an anonymous block (the
    # same checks, parsed at every call), and a lone append is still one round trip.
    from psycopg import sql  # noqa: PLC0415

    with PostgresStore.from_url(schema.url) as store, SessionRegistry(store, follow=False) as registry:
        registry.create("/w", session_id="a")
    role = f"w_{schema.name[-12:]}"
    with psycopg.connect(schema.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP FUNCTION {}.rm_guard_1").format(sql.Identifier(schema.name)))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema.name), sql.Identifier(role))
        )
        admin.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
                sql.Identifier(schema.name), sql.Identifier(role)
            )
        )
    try:
        writer_info = (
            schema.conninfo.replace("postgres@", f"{role}@")
            if "postgres@" in schema.conninfo
            else f"{schema.conninfo} user={role}"
        )
        with (
            PostgresStore(writer_info, schema=schema.name, pool_size=1) as store,
            SessionRegistry(store, follow=False) as registry,
        ):
            model = tables_of(store)
            assert not model._guard_function
            model.close()  # its commit hook off: the registry's read model alone folds the appends below
            registry.record_activity("a", messages=1)  # reads the log's end first (twice: see the test above)
            registry.record_activity("a", messages=1)
            assert round_trips(store, lambda: registry.record_activity("a", messages=2)) == 1
            assert [s.session_id for s in registry.list().sessions] == ["a"]
            model = tables_of(store)
            assert check_read_model(backend_for(store), model).mismatches == []
            model.close()
    finally:
        with psycopg.connect(schema.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
