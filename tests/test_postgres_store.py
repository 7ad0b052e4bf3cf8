"""The PostgreSQL store keeps the store contract and refuses schemas that are not its own (lost acknowledgements,
killed connections and writers, a server restart: ``tests/test_postgres_failures.py``).

The server is ACP_REGISTRY_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/test); each test gets a
schema of its own and drops it. Without a server the tests skip and say how to start one; with CI=true they fail.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql

from events import (
    NO_STREAM,
    ConcurrencyError,
    EventStore,
    SessionCreated,
    SessionUpdated,
    StoreError,
    StoreFormatError,
    open_store,
)
from events.chain import GENESIS, links, sql_link
from events.postgres import SCHEMA_VERSION, PostgresStore
from events.testing import StoreContract, check_log, fake_clock
from events.verify import verify_log
from tests.conftest import POSTGRES as SERVER
from tests.exchanges import round_trips
from tests.waiting import wait_until


@pytest.fixture(scope="session")
def server(postgres_server: str) -> str:
    """The server (conftest's ``postgres_server``: a skip saying how to start one when it is not there)."""
    return postgres_server


@pytest.fixture
def schema(server: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex}"
    yield name
    _admin(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _url(schema: str, **options: str) -> str:
    query = urllib.parse.urlencode({"schema": schema, **options})
    return f"{SERVER}{'&' if '?' in SERVER else '?'}{query}"


def _admin(statement: sql.Composed | LiteralString, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    wait_until(condition, timeout, what)


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store_url(self, schema: str) -> str | None:
        return _url(schema)

    def tamper(self, store: EventStore, statement: str, params: tuple[object, ...] = ()) -> None:
        assert isinstance(store, PostgresStore)
        with psycopg.connect(SERVER, autocommit=True, options=f"-c search_path={store.schema}") as conn:
            conn.execute(statement.replace("?", "%s").encode(), params)


# -- opening: identity, creation, refusals --------------------------------------------------------------


def test_a_store_survives_reopening_with_its_identity(schema: str) -> None:
    with open_store(_url(schema)) as store:
        store.append("s", [SessionCreated(cwd="/a", at=1)], NO_STREAM)
        identity = store.identity
    with open_store(_url(schema)) as store:
        assert store.identity == identity
        assert [r.event for r in store.read()] == [SessionCreated(cwd="/a", at=1)]
    other = f"{schema}_b"
    try:
        with open_store(_url(other)) as store:
            assert store.identity.store_id != identity.store_id
            assert store.identity.secret != identity.secret
            assert store.head() == 0
    finally:
        _admin(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(other)))


def test_stores_opened_at_once_create_one_schema(schema: str) -> None:
    """Eight openers race to create the same schema; the creation lock makes them agree on one store."""
    gate = threading.Barrier(8)
    identities: list[object] = []

    def open_and_append(n: int) -> None:
        gate.wait()
        with open_store(_url(schema)) as store:
            store.append(f"s{n}", [SessionUpdated(at=n)])
            identities.append(store.identity)

    threads = [threading.Thread(target=open_and_append, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(identities) == 8 and len(set(map(repr, identities))) == 1
    with open_store(_url(schema)) as store:
        assert len(check_log(store)) == 8
    assert _admin("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)) == [(1,)]


def _snapshot(schema: str) -> list[tuple[Any, ...]]:
    """Every relation of the schema and every row of its tables."""
    relations = _admin(
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s ORDER BY 1",
        (schema,),
    )
    rows = [
        (name, *row)
        for name, kind in relations
        if kind == "r"
        for row in _admin(
            sql.SQL("SELECT * FROM {}.{} ORDER BY 1").format(sql.Identifier(schema), sql.Identifier(name))
        )
    ]
    return relations + rows


def test_a_foreign_schema_is_refused_and_left_untouched(schema: str) -> None:
    name = sql.Identifier(schema)
    _admin(sql.SQL("CREATE SCHEMA {}").format(name))
    _admin(sql.SQL("CREATE TABLE {}.users (name text)").format(name))
    _admin(sql.SQL("INSERT INTO {}.users VALUES ('ada')").format(name))
    before = _snapshot(schema)
    with pytest.raises(StoreFormatError, match=rf"schema=.*{schema}.*not an acp-session-registry store.*users"):
        open_store(_url(schema))
    assert _snapshot(schema) == before


def test_a_foreign_registry_meta_is_refused_and_left_untouched(schema: str) -> None:
    name = sql.Identifier(schema)
    _admin(sql.SQL("CREATE SCHEMA {}").format(name))
    _admin(sql.SQL("CREATE TABLE {}.registry_meta (id int, note text)").format(name))
    before = _snapshot(schema)
    with pytest.raises(StoreFormatError, match="not an acp-session-registry store"):
        open_store(_url(schema))
    assert _snapshot(schema) == before


def test_a_newer_schema_is_refused_and_left_untouched(schema: str) -> None:
    with open_store(_url(schema)) as store:
        store.append("s", [SessionUpdated(at=1)])
    _admin(
        sql.SQL("UPDATE {}.registry_meta SET value = %s WHERE key = 'schema_version'").format(sql.Identifier(schema)),
        (str(SCHEMA_VERSION + 1).encode(),),
    )
    before = _snapshot(schema)
    with pytest.raises(StoreFormatError, match=rf"newer schema \(version {SCHEMA_VERSION + 1}\).*untouched"):
        open_store(_url(schema))
    assert _snapshot(schema) == before


def test_an_empty_schema_becomes_a_store(schema: str) -> None:
    """A schema a DBA created (and granted) ahead of time is used as it is."""
    _admin(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    with open_store(_url(schema)) as store:
        assert store.append("s", [SessionUpdated(at=1)], NO_STREAM) == [1]


# -- URLs (the bad ones every store URL is held to: ``tests/test_sqlite_store.py``) --------------------------


def test_messages_never_show_the_password() -> None:
    with pytest.raises(ValueError, match="unknown option 'oops'") as caught:
        open_store("postgresql://me:hunter2@db.example/app?password=hunter3&oops=1")
    assert "hunter2" not in str(caught.value) and "hunter3" not in str(caught.value)
    with pytest.raises(StoreError, match=r"postgresql://me@127\.0\.0\.1:1/app\?schema=acp_registry") as failed:
        open_store("postgres://me:hunter2@127.0.0.1:1/app?connect_timeout=2")
    assert "hunter2" not in str(failed.value)


def test_libpq_parameters_pass_through(schema: str) -> None:
    app = f"acp_test_{uuid.uuid4().hex[:12]}"
    with open_store(_url(schema, sslmode="disable", application_name=app).replace("postgresql:", "postgres:")) as store:
        assert isinstance(store, PostgresStore) and store.schema == schema
        store.append("s", [SessionUpdated(at=1)])
        assert _admin("SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = %s", (app,)) == [(True,)]
        assert "application_name" not in repr(store)


def test_importing_events_does_not_import_psycopg() -> None:
    probe = (
        "import sys, events, events.urls, events.factory;"
        " assert not [m for m in sys.modules if m.startswith('psycopg')]"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_without_psycopg_a_postgres_url_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an environment without the extra looks like
    monkeypatch.delitem(sys.modules, "events.postgres")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'acp-session-registry\[postgres-binary\]'"):
        open_store("postgresql://db.example/app")


def test_an_opener_that_only_reads_creates_nothing(schema: str) -> None:
    with pytest.raises(StoreError, match=rf"no store in schema '{schema}' \(opened only to read"):
        open_store(_url(schema), create=False)
    assert _admin("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)) == [(0,)]
    _admin(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    with pytest.raises(StoreError, match="no store in schema"):
        PostgresStore(SERVER, schema=schema, create=False)
    assert _snapshot(schema) == []
    with open_store(_url(schema)) as store:
        store.append("s", [SessionUpdated(at=1)])
    with open_store(_url(schema), create=False) as store:
        assert store.head() == 1 and not store.read_only


def test_a_user_who_may_only_read_gets_a_read_only_store(schema: str) -> None:
    with open_store(_url(schema)) as store:
        store.append("s", [SessionCreated(cwd="/a", at=1)])
    role = f"r_{uuid.uuid4().hex[:12]}"
    name = sql.Identifier(schema)
    _admin(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        _admin(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(name, sql.Identifier(role)))
        _admin(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(name, sql.Identifier(role)))
        reader_url = _url(schema).replace("postgres@", f"{role}@")
        with open_store(reader_url, create=False) as store:
            assert store.read_only and store.head() == 1 and check_log(store)
            with pytest.raises(StoreError, match="open read-only; nothing was appended"):
                store.append("s", [SessionUpdated(at=2)])
    finally:
        _admin(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        _admin(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_tables_of_others_in_the_schema_are_tolerated(schema: str) -> None:
    with open_store(_url(schema)) as store:
        store.append("s", [SessionUpdated(at=1)])
    _admin(sql.SQL("CREATE TABLE {}.rm_sessions (session_id text PRIMARY KEY)").format(sql.Identifier(schema)))
    with open_store(_url(schema), create=False) as store:
        assert store.head() == 1 and check_log(store)


def _made_by_version_2(schema: str, appends: int) -> list[bytes]:
    """A store as version 2 of the schema wrote it (every link BLAKE2b, no ``sql_link_from``; a store made with
    that version's code was checked to upgrade the same way), and its chain."""
    with PostgresStore(SERVER, schema=schema, clock=fake_clock()) as store:
        for n in range(appends):
            store.append(f"s{n % 4}", [SessionUpdated(at=n)] * (1 + n % 3 // 2))
        rows = [
            (r.position, r.session_id, r.version, r.event_id, r.recorded_at, r.data) for r in store.stored_records()
        ]
    name = sql.Identifier(schema)
    chain = links(GENESIS, rows)
    for (position, *_), value in zip(rows, chain, strict=True):
        _admin(sql.SQL("UPDATE {}.events SET chain = %s WHERE position = %s").format(name), (value, position))
    _admin(sql.SQL("UPDATE {}.registry_meta SET value = '2' WHERE key = 'schema_version'").format(name))
    _admin(sql.SQL("DELETE FROM {}.registry_meta WHERE key = 'sql_link_from'").format(name))
    _admin(sql.SQL("DROP TRIGGER events_writer_fence ON {}.events").format(name))
    _admin(sql.SQL("DROP TABLE {}.messages").format(name))
    _admin(sql.SQL("ALTER TABLE {}.events DROP COLUMN writer").format(name))
    return [GENESIS, *chain]


def _meta(schema: str, key: str) -> bytes:
    query = sql.SQL("SELECT value FROM {}.registry_meta WHERE key = %s").format(sql.Identifier(schema))
    return bytes(_admin(query, (key,))[0][0])


def test_a_version_2_store_is_upgraded_on_its_first_writable_open_and_keeps_its_links(schema: str) -> None:
    # Its links stay (what was bound to them - a snapshot, the read model's checkpoint - still matches); the
    # records after them are linked by the function the server computes, and verify checks both.
    chain = _made_by_version_2(schema, 30)
    head = len(chain) - 1
    read_only = _url(schema) + "&options=-c%20default_transaction_read_only%3Don"
    with open_store(read_only, create=False) as store:  # a reader cannot upgrade: it reads version 2 as it is
        assert store.read_only and store.chain_rule.sql_from is None and verify_log(store).healthy
    with open_store(_url(schema)) as store:
        assert [store.chain_at(p) for p in range(head + 1)] == chain
        assert store.chain_rule.sql_from == head + 1
        (position,) = store.append("s0", [SessionUpdated(at=99)])
        record = store.stored_records(head)[0]
        assert (
            record.chain
            == store.chain_at(position)
            == sql_link(chain[-1], position, "s0", record.version, record.event_id, record.recorded_at, record.data)
        )
        store.append("s9", [SessionUpdated(at=1), SessionUpdated(at=2)])  # links computed by this client
        report = verify_log(store)
        assert report.healthy and report.chained and report.events == head + 3
    assert _meta(schema, "schema_version") == str(SCHEMA_VERSION).encode() == b"4"
    assert _meta(schema, "sql_link_from") == str(head + 1).encode()


def test_a_changed_record_or_link_start_is_found_on_both_sides_of_the_upgrade(schema: str) -> None:
    head = len(_made_by_version_2(schema, 10)) - 1
    with open_store(_url(schema)) as store:
        after = [p for n in range(4) for p in store.append(f"s{n}", [SessionUpdated(at=n)])]
        name = sql.Identifier(schema)
        for position in (3, after[1]):
            _admin(sql.SQL("UPDATE {}.events SET recorded_at = 7 WHERE position = %s").format(name), (position,))
        assert [p.position for p in verify_log(store).problems] == [3, after[1]]
    _admin(sql.SQL("UPDATE {}.registry_meta SET value = '5' WHERE key = 'sql_link_from'").format(name))
    with open_store(_url(schema)) as store:  # the upgrade's position moved: the links from 5 to it no longer match
        assert [p.position for p in verify_log(store).problems] == [3, *range(5, head + 1), after[1]]
    _admin(sql.SQL("UPDATE {}.registry_meta SET value = 'x' WHERE key = 'sql_link_from'").format(name))
    with pytest.raises(StoreFormatError, match="no valid sql_link_from"):
        open_store(_url(schema))


def test_a_version_1_store_is_upgraded_in_place_on_its_first_open(schema: str) -> None:
    chain = _made_by_version_2(schema, 30)
    name = sql.Identifier(schema)
    _admin(sql.SQL("ALTER TABLE {}.events DROP COLUMN chain").format(name))
    _admin(sql.SQL("UPDATE {}.registry_meta SET value = '1' WHERE key = 'schema_version'").format(name))
    with open_store(_url(schema)) as store:
        assert [store.chain_at(p) for p in range(len(chain))] == chain  # version 2's links, computed on upgrade
        store.append("s0", [SessionUpdated(at=99)])
        assert verify_log(store).healthy
    assert _meta(schema, "schema_version") == str(SCHEMA_VERSION).encode()
    assert _meta(schema, "sql_link_from") == str(len(chain)).encode()


def test_writers_that_take_turns_append_in_one_exchange_each(schema: str) -> None:
    # With no commit hook, the server finds the log's end, so an append whose process did not write last still
    # goes in one exchange: nothing to read first, nothing to retry.
    with (
        PostgresStore(SERVER, schema=schema, pool_size=1) as mine,
        PostgresStore(SERVER, schema=schema, pool_size=1) as theirs,
    ):
        for n in range(3):
            assert round_trips(mine, functools.partial(mine.append, "a", [SessionUpdated(at=n)])) == 1
            assert round_trips(theirs, functools.partial(theirs.append, "b", [SessionUpdated(at=n)], n)) == 1
        with pytest.raises(ConcurrencyError) as caught:
            mine.append("b", [SessionUpdated(at=9)], 1)
        assert (caught.value.expected, caught.value.actual) == (1, 3)
        assert mine.head() == 6 and verify_log(mine).healthy


_KILLED_BETWEEN_COMMIT_AND_BARRIER = """
import os, signal, sys, uuid
from events import SessionCreated, SessionUpdated
from events.postgres import PostgresStore
from events.postgres_commit import Committer

def die(self, conn):
    conn.execute(b"SELECT 1").fetchone()  # in the pipeline: a sync, so the server has run the append's COMMIT
    os.kill(os.getpid(), signal.SIGKILL)  # before the barrier: the append is committed, its caller never hears

store = PostgresStore(sys.argv[1], schema=sys.argv[2], commit="flush-barrier")
store.append("s", [SessionCreated(cwd="/w", at=1)])
Committer.flush = die
store.append("s", [SessionUpdated(at=2, messages=1)], 1, event_ids=[uuid.UUID(sys.argv[3])])
"""


def test_a_writer_killed_between_its_commit_and_its_flush_barrier(schema: str) -> None:
    # What other processes see of it: a committed event, in order, chained; nothing acknowledged was lost (the
    # caller was not answered). Its retry, with the same event id, returns the same position - after a barrier
    # of its own, as the first attempt's may never have run. (A server crash in that window would lose the event
    # itself; only an acknowledged one must survive, and the acknowledgement waits for the barrier.)
    event_id = uuid.uuid4()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_COMMIT_AND_BARRIER, SERVER, schema, str(event_id)],
        check=False,
        timeout=60,
    )
    assert killed.returncode == -9
    with PostgresStore(SERVER, schema=schema, commit="flush-barrier") as store:
        assert [(r.position, r.event_id) for r in check_log(store)][1:] == [(2, event_id)]
        assert verify_log(store).healthy
        assert store.append("s", [SessionUpdated(at=2, messages=1)], 1, event_ids=[event_id]) == [2]
        assert store.append("s", [SessionUpdated(at=3, messages=1)], 2) == [3]
        assert [r.position for r in check_log(store)] == [1, 2, 3]


def test_the_commit_mode_is_checked(schema: str) -> None:
    with pytest.raises(ValueError, match="flush-barrier, in-lock"):
        PostgresStore(SERVER, schema=schema, commit="later")  # type: ignore[arg-type]
