"""The PostgreSQL store under failure: acknowledgements lost in flight, connections killed, writer processes
killed inside their transaction, the server restarted - nothing acknowledged is lost, nothing is written twice,
and writers and tails resume. Fixtures and helpers: ``tests.test_postgres_store``."""

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
from typing import Any, TypeVar

import psycopg
import pytest

from events import (
    NO_STREAM,
    AppendRequest,
    Event,
    RecordedEvent,
    SessionCreated,
    SessionUpdated,
    StoreError,
    open_store,
)
from events.codec import decode_record_json
from events.listener import FIRST_DELAY, MAX_DELAY
from events.postgres import PostgresStore
from events.postgres_sql import lock_key
from events.testing import check_log
from events.testing_processes import acknowledged_batches, assert_no_partial_batches
from tests import test_postgres_store as base
from tests.conftest import POSTGRES as SERVER
from tests.test_postgres_store import _admin, _url, _wait_for

server = base.server  # the fixtures: the server (or a skip saying how to start one), a schema per test
schema = base.schema
_A = TypeVar("_A")

# -- retries ------------------------------------------------------------------------------------------


class _LostAcknowledgement(PostgresStore):
    """Commits, then fails as if the connection dropped before the acknowledgement came back: a lone append, or a
    batch (and a group commit) whose whole transaction committed. The first ``losses`` answers are lost."""

    losses = 1

    def _append_alone(self, *args: Any) -> list[int]:
        return self._lost(super()._append_alone(*args))

    def _commit_once(self, *args: Any) -> list[list[list[int]] | BaseException]:
        return self._lost(super()._commit_once(*args))

    def _lost(self, answer: _A) -> _A:
        if self.losses:
            self.losses -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return answer


class _Unreachable(PostgresStore):
    def _append_alone(self, *args: Any) -> list[int]:
        self.attempts: list[float] = [*getattr(self, "attempts", []), time.monotonic()]
        raise psycopg.OperationalError("connection to server failed: Connection refused")


def test_an_append_whose_acknowledgement_was_lost_is_retried_once_and_written_once(schema: str) -> None:
    with _LostAcknowledgement(SERVER, schema=schema) as store:
        batch: list[Event] = [SessionCreated(cwd="/a", at=1), SessionUpdated(at=2)]
        assert store.append("s", batch, NO_STREAM) == [1, 2]  # the retry's NO_STREAM is stale: still the retry
        assert store.losses == 0
        assert [(r.version, r.event) for r in check_log(store)] == list(enumerate(batch, start=1))


def test_a_batch_whose_acknowledgement_was_lost_is_written_once(schema: str) -> None:
    with _LostAcknowledgement(SERVER, schema=schema) as store:
        requests = [
            AppendRequest("a", [SessionCreated(cwd="/a", at=1)], NO_STREAM),
            AppendRequest("b", [SessionUpdated(at=2)]),
        ]
        assert store.append_batch(requests) == [[1], [2]]
        assert store.losses == 0
        assert [(r.session_id, r.version) for r in check_log(store)] == [("a", 1), ("b", 1)]


def test_retries_are_bounded(schema: str) -> None:
    """Retried with a doubling delay, and given up once the next delay would pass ``retry_timeout``. Checked by
    what a loaded machine cannot break: it only makes each attempt and sleep longer, hence fewer attempts, each
    gap no shorter than its delay (the bound is wide enough for three attempts however slow each is)."""
    with _Unreachable(SERVER, schema=schema, retry_timeout=2) as store:
        with pytest.raises(StoreError, match=r"Connection refused \(still failing after 2 s of retries\)"):
            store.append("s", [SessionUpdated(at=1)])
        gave_up = time.monotonic()
        attempts = store.attempts
        delays = [min(FIRST_DELAY * 2**n, MAX_DELAY) for n in range(len(attempts) - 1)]
        fit = next(n for n in range(1, 100) if sum(min(FIRST_DELAY * 2**k, MAX_DELAY) for k in range(n)) > 2)
        assert 3 <= len(attempts) <= fit, attempts  # retried, and no more often than the delays allow
        assert all(b - a >= delay for a, b, delay in zip(attempts, attempts[1:], delays, strict=False)), attempts
        assert gave_up - attempts[0] >= 2 - MAX_DELAY  # not given up early: only once the next delay did not fit
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
    acknowledged = [b for w in writers for b in acknowledged_batches(w.communicate(timeout=60)[0])]
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
    time.sleep(3600)  # holds the lock until the test kills it
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
        key = lock_key("append", schema)
        waiting = (  # the waiter's backend, queued for the append lock the child holds
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND ((classid::bigint << 32) | objid::bigint) = %s"
        )
        _wait_for(lambda: _admin(waiting, (key,)) == [(1,)], 30, "the waiter to queue for the append lock")
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
@pytest.mark.serial  # restarts the server every PostgreSQL test shares: never beside them
def test_writers_and_tails_resume_after_the_server_restarts(schema: str) -> None:
    restart = _restart_command()
    # A fast shutdown first finishes the checkpoint in progress: after a busy run (thousands of test schemas'
    # files to sync on a loaded machine) that took 20-30 s here, longer than the writer's 30 s of retries.
    # Checkpointing now makes the restart below the quick one this test means.
    _admin("CHECKPOINT")
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
        try:  # the follower stops whatever fails: a thread left polling would keep pytest from exiting
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
            acknowledged = [p for batch in acknowledged_batches("".join(lines)) for p in batch]
            assert len(acknowledged) > 40
            assert not [p for p in acknowledged if p not in stored], "an acknowledged event was lost"
            assert_no_partial_batches([r for r in log if r.session_id != "here"])
            _wait_for(lambda: bool(seen) and seen[-1].position == log[-1].position, 60, "the tail to catch up")
        finally:
            stop.set()
            follower.join(30)
        assert [r.position for r in seen] == [r.position for r in log]


# -- no silent new stores, read-only users, tables of others, the integrity chain's upgrade ----------------------


_SILENT_SERVER = """
import socket, sys
from events.errors import StoreError
from events.listener import FIRST_DELAY, MAX_DELAY
from events.postgres import PostgresStore
from events.postgres_sql import lock_key
silent = socket.socket()
silent.bind(("127.0.0.1", 0))
silent.listen(1)  # connections are taken (the kernel's backlog) and never answered
try:
    PostgresStore(f"postgresql://nobody@127.0.0.1:{silent.getsockname()[1]}/db", retry_timeout=2)
except StoreError as exc:
    print("refused:", exc)
"""


def test_the_first_connection_of_a_store_is_bounded_by_its_timeout() -> None:
    """A server that takes the connection and never answers: opening the store gives up after ``retry_timeout``
    (2 s here) with one error, where libpq without a connect_timeout waited for ever. The subprocess's 60 s is a
    deadline only for that hang, far above the 2 s bound on a loaded machine."""
    done = subprocess.run(
        [sys.executable, "-c", _SILENT_SERVER], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.startswith("refused:") and "timeout" in done.stdout, done.stdout + done.stderr
