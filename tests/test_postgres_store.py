"""The PostgreSQL store keeps the store contract - across processes, killed writers and a server restart - and
refuses schemas that are not its own.

The server is ACP_REGISTRY_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/test); each test gets a
schema of its own and drops it. Without a server the tests skip and say how to start one; with CI=true they fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, LiteralString

import pytest

from events import (
    NO_STREAM,
    AppendRequest,
    Event,
    EventStore,
    RecordedEvent,
    SessionCreated,
    SessionUpdated,
    StoreError,
    StoreFormatError,
    open_store,
)
from events.codec import decode_record_json
from events.testing import StoreContract, check_log, fake_clock
from events.verify import verify_log

try:
    import psycopg
    from psycopg import sql

    from events.postgres import SCHEMA_VERSION, PostgresStore
except ModuleNotFoundError as missing:  # pragma: no cover - the dev extras install psycopg
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"psycopg is not installed ({missing}): pip install -e '.[dev]'", allow_module_level=True)

SERVER = os.environ.get("ACP_REGISTRY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
START = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"


@pytest.fixture(scope="session")
def server() -> str:
    try:
        psycopg.connect(SERVER, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        message = (
            f"no PostgreSQL server at {SERVER} ({' '.join(str(exc).split())}): start one with `{START}`, "
            "or point ACP_REGISTRY_TEST_POSTGRES at one"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return SERVER


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
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what}"
        time.sleep(0.01)


def _acks(lines: list[str]) -> list[list[int]]:
    """Positions of each batch a writer child acknowledged (a line cut short by a kill is not one)."""
    return [[int(p) for p in line.split()[1:]] for line in lines if line.startswith("ack ") and line.endswith("\n")]


def _assert_no_partial_batches(log: list[RecordedEvent]) -> None:
    sizes: dict[str, int] = defaultdict(int)
    expected: dict[str, int] = {}
    for record in log:
        assert isinstance(record.event, SessionUpdated) and isinstance(record.event.payload, dict)
        sizes[record.event.payload["batch"]] += 1
        expected[record.event.payload["batch"]] = record.event.payload["size"]
    partial = {batch: n for batch, n in sizes.items() if n != expected[batch]}
    assert not partial, f"partial batches in the log: {partial}"


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


# -- URLs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://db.example/app?cache=big", "unknown option 'cache'"),
        ("postgresql://db.example/app?cache=big&mode=x", "unknown options 'cache', 'mode'"),
        ("postgresql://db.example/app?schema=Sessions", "schema must be a lowercase SQL identifier"),
        ("postgresql://db.example/app?schema=pg_sessions", "not starting with a digit or pg_"),
        ("postgresql://db.example/app?schema=a%3Bdrop", "got 'a;drop'"),
        ("postgresql://db.example/app?schema=", "got ''"),
        ("postgresql://db.example/app?schema=a&schema=b", "schema is given 2 times"),
        ("postgresql://db.example/app#main", "takes no #fragment"),
    ],
)
def test_bad_postgres_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_store(url)


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
    probe = "import sys, events, events.urls; assert not [m for m in sys.modules if m.startswith('psycopg')]"
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_without_psycopg_a_postgres_url_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an environment without the extra looks like
    monkeypatch.delitem(sys.modules, "events.postgres")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'acp-session-registry\[postgres-binary\]'"):
        open_store("postgresql://db.example/app")


# -- retries ------------------------------------------------------------------------------------------


class _LostAcknowledgement(PostgresStore):
    """Commits an append, then fails as if the connection dropped before the acknowledgement came back."""

    losses = 1

    def _append_alone(self, *args: Any) -> list[int]:
        positions = super()._append_alone(*args)
        if self.losses:
            self.losses -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return positions


class _LostBatchAcknowledgement(PostgresStore):
    """The same for a batch (and a group commit): the whole transaction committed, the answer was lost."""

    losses = 1

    def _commit_once(self, *args: Any) -> list[list[list[int]] | BaseException]:
        outcomes = super()._commit_once(*args)
        if self.losses:
            self.losses -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return outcomes


class _Unreachable(PostgresStore):
    attempts = 0

    def _append_alone(self, *args: Any) -> list[int]:
        self.attempts += 1
        raise psycopg.OperationalError("connection to server failed: Connection refused")


def test_an_append_whose_acknowledgement_was_lost_is_retried_once_and_written_once(schema: str) -> None:
    with _LostAcknowledgement(SERVER, schema=schema) as store:
        batch: list[Event] = [SessionCreated(cwd="/a", at=1), SessionUpdated(at=2)]
        assert store.append("s", batch, NO_STREAM) == [1, 2]  # the retry's NO_STREAM is stale: still the retry
        assert store.losses == 0
        assert [(r.version, r.event) for r in check_log(store)] == list(enumerate(batch, start=1))


def test_a_batch_whose_acknowledgement_was_lost_is_written_once(schema: str) -> None:
    with _LostBatchAcknowledgement(SERVER, schema=schema) as store:
        requests = [
            AppendRequest("a", [SessionCreated(cwd="/a", at=1)], NO_STREAM),
            AppendRequest("b", [SessionUpdated(at=2)]),
        ]
        assert store.append_batch(requests) == [[1], [2]]
        assert store.losses == 0
        assert [(r.session_id, r.version) for r in check_log(store)] == [("a", 1), ("b", 1)]


def test_retries_are_bounded(schema: str) -> None:
    with _Unreachable(SERVER, schema=schema, retry_timeout=0.3) as store:
        with pytest.raises(StoreError, match=r"Connection refused \(still failing after 0\.3 s of retries\)"):
            store.append("s", [SessionUpdated(at=1)])
        assert store.attempts > 2
        assert store.head() == 0


# -- the live tail and lost connections -----------------------------------------------------------------


def test_a_notification_wakes_a_subscriber_of_another_store(schema: str) -> None:
    """The subscriber's store polls once a minute: only the NOTIFY can bring the event in time."""
    with (
        PostgresStore(SERVER, schema=schema, poll_interval=60) as tail,
        open_store(_url(schema)) as writer,
        tail.subscribe() as sub,
    ):
        assert sub.poll(timeout=0.2) == []
        threading.Timer(0.1, lambda: writer.append("s", [SessionUpdated(at=1)])).start()
        start = time.monotonic()
        assert [r.session_id for r in sub.poll(timeout=10)] == ["s"]
        assert time.monotonic() - start < 5


def test_killed_connections_are_replaced_without_losing_anything(schema: str) -> None:
    """Every backend of both stores is terminated: the next append and read retry on new connections, and the
    listener reconnects (its subscriber polls once a minute, so the event arrives through the listener)."""
    app = f"acp_test_{uuid.uuid4().hex[:12]}"
    conninfo = f"{SERVER}{'&' if '?' in SERVER else '?'}application_name={app}"
    with (
        PostgresStore(conninfo, schema=schema) as writer,
        PostgresStore(conninfo, schema=schema, poll_interval=60) as tail,
        tail.subscribe(after=0) as sub,
    ):
        assert sub.poll(timeout=0.01) == []
        listening = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND query LIKE 'LISTEN%%'"
        _wait_for(lambda: _admin(listening, (app,)) == [(1,)], 10, "the listener")
        writer.append("s", [SessionUpdated(at=1)])
        assert [r.version for r in sub.poll(timeout=10)] == [1]
        killed = _admin(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s", (app,)
        )
        assert killed[0][0] >= 3  # both pools and the listener
        assert writer.append("s", [SessionUpdated(at=2)], 1) == [2]
        start = time.monotonic()
        assert [r.version for r in sub.poll(timeout=10)] == [2]
        assert time.monotonic() - start < 5
        assert [r.version for r in tail.read_stream("s")] == [1, 2]


# -- many processes -------------------------------------------------------------------------------------


def _events_module(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "events.testing_processes", *args], stdout=subprocess.PIPE, text=True
    )


def test_four_writer_processes_and_two_follower_processes(schema: str) -> None:
    url, batches = _url(schema), 40
    total = 4 * batches * 3
    followers = [_events_module("follower", url, str(total), "--timeout", "60") for _ in range(2)]
    for follower in followers:
        assert follower.stdout is not None and follower.stdout.readline() == "ready\n"
    writers = [_events_module("writer", url, f"w{n}", str(batches)) for n in range(4)]
    acknowledged = [b for w in writers for b in _acks(w.communicate(timeout=60)[0].splitlines(keepends=True))]
    seen = [
        [decode_record_json(line.removeprefix("event ")) for line in f.communicate(timeout=60)[0].splitlines()]
        for f in followers
    ]
    assert [p.returncode for p in writers + followers] == [0] * 6
    with open_store(url) as store:
        log = check_log(store)
    assert len(log) == total
    assert sorted(p for batch in acknowledged for p in batch) == [r.position for r in log]
    for n, records in enumerate(seen):
        positions = [r.position for r in records]
        assert positions == sorted(set(positions)), f"follower {n} saw a position out of order or twice"
        assert records == log, f"follower {n} did not see exactly the log"


_HOLDER = """
import sys, time
from events import SessionUpdated, open_store

def clock():  # the store asks for the time inside its transaction, holding the append lock
    print("inside", flush=True)
    time.sleep(3600)
    return 0

open_store(sys.argv[1], clock=clock).append("victim", [SessionUpdated(at=n) for n in range(5)])
"""


def test_a_writer_killed_inside_its_transaction_leaves_nothing_and_blocks_nobody(schema: str) -> None:
    url = _url(schema)
    with open_store(url) as store:
        store.append("victim", [SessionUpdated(at=-1)], NO_STREAM)
        child = subprocess.Popen([sys.executable, "-c", _HOLDER, url], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline() == "inside\n"
        done: list[list[int]] = []
        waiter = threading.Thread(target=lambda: done.append(store.append("victim", [SessionUpdated(at=99)], 1)))
        waiter.start()
        time.sleep(0.3)
        assert not done, "an append went ahead while another writer held the lock"
        with (
            PostgresStore(SERVER, schema=schema, lock_timeout=0.2) as impatient,
            pytest.raises(StoreError, match=r"another writer held the append lock for over 0\.2 s"),
        ):
            impatient.append("other", [SessionUpdated(at=1)])
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        waiter.join(10)
        assert len(done) == 1
        log = check_log(store)
        assert [(r.version, r.event) for r in log] == [(1, SessionUpdated(at=-1)), (2, SessionUpdated(at=99))]


def _restart_command() -> list[str]:
    local = urllib.parse.urlsplit(SERVER).hostname in ("127.0.0.1", "localhost")
    if not local or shutil.which("pg_ctlcluster") is None or not os.path.isdir("/etc/postgresql"):
        pytest.skip("restarting the server needs a local Debian cluster (pg_ctlcluster)")
    return ["pg_ctlcluster", "--skip-systemctl-redirect", sorted(os.listdir("/etc/postgresql"))[-1], "main", "restart"]


@pytest.mark.slow
def test_writers_and_tails_resume_after_the_server_restarts(schema: str) -> None:
    restart = _restart_command()
    url = _url(schema)
    started = _admin("SELECT pg_postmaster_start_time()")
    with open_store(url) as store, open_store(url) as tail_store:
        seen: list[RecordedEvent] = []
        stop = threading.Event()

        def follow() -> None:
            with tail_store.subscribe(after=0) as sub:
                while not stop.is_set():
                    seen.extend(sub.poll(timeout=0.2))

        lines: list[str] = []

        def collect(child: subprocess.Popen[str]) -> None:
            assert child.stdout is not None
            for line in child.stdout:
                lines.append(line)

        follower = threading.Thread(target=follow)
        follower.start()
        writer = _events_module("writer", url, "r", "1000000")
        reader = threading.Thread(target=collect, args=(writer,))
        reader.start()
        try:
            _wait_for(lambda: len(lines) > 20, 30, "the writer to start")
            subprocess.run(restart, check=True, timeout=120, capture_output=True)
            assert _admin("SELECT pg_postmaster_start_time()") != started
            resumed_from = len(lines)
            _wait_for(lambda: len(lines) > resumed_from + 20, 60, "the writer to resume after the restart")
            store.append("here", [SessionUpdated(at=1)])  # this process's pool reconnects too
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait(30)
            reader.join(30)
        log = check_log(store)
        stored = {r.position for r in log}
        acknowledged = [p for batch in _acks(lines) for p in batch]
        assert len(acknowledged) > 40
        assert not [p for p in acknowledged if p not in stored], "an acknowledged event was lost"
        _assert_no_partial_batches([r for r in log if r.session_id != "here"])
        try:
            _wait_for(lambda: bool(seen) and seen[-1].position == log[-1].position, 60, "the tail to catch up")
        finally:
            stop.set()
            follower.join(30)
        assert [r.position for r in seen] == [r.position for r in log]


# -- no silent new stores, read-only users, tables of others, the integrity chain's upgrade ----------------------


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


def test_a_version_1_store_is_upgraded_in_place_on_its_first_open(schema: str) -> None:
    with PostgresStore(SERVER, schema=schema, clock=fake_clock()) as store:
        for n in range(30):
            store.append(f"s{n % 4}", [SessionUpdated(at=n)])
        expected = [store.chain_at(p) for p in range(31)]
    name = sql.Identifier(schema)
    _admin(sql.SQL("ALTER TABLE {}.events DROP COLUMN chain").format(name))
    _admin(sql.SQL("UPDATE {}.registry_meta SET value = '1' WHERE key = 'schema_version'").format(name))
    with open_store(_url(schema)) as store:
        assert [store.chain_at(p) for p in range(31)] == expected
        store.append("s0", [SessionUpdated(at=99)])
        assert verify_log(store).healthy
    version = _admin(sql.SQL("SELECT value FROM {}.registry_meta WHERE key = 'schema_version'").format(name))
    assert bytes(version[0][0]) == str(SCHEMA_VERSION).encode() == b"2"
