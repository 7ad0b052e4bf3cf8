"""Threads with an owner (issue 22): every thread the library starts is joined on close within a bound, a failed
subscribe leaves nothing registered, and one exception object is never raised in several threads at once."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from events.errors import CorruptEventError, StoreError
from events.factory import open_store
from events.group_commit import GroupCommit
from registry import SessionRegistry
from registry.backends import backend_for
from registry.readmodel.tables import SnapshotPlan
from registry.snapshot import EVERY
from tests.waiting import wait_until


def _named(prefix: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith(prefix) and thread.is_alive()]


@pytest.mark.idle  # joined within 3 s where a join timeout took 10: a bound a busy machine may pass
def test_the_follower_thread_is_joined_when_the_last_subscriber_leaves_and_on_close(tmp_path: Path) -> None:
    registry = SessionRegistry.open(f"sqlite://{tmp_path}/log.db")
    try:
        seen: list[object] = []
        subscription = registry.list_changes().subscribe(seen.append)
        registry.create("/w", session_id="a")
        assert registry.wait_for_changes(timeout=10)
        follower = registry._follower
        thread = follower.thread
        assert thread is not None and thread.is_alive()
        started = time.monotonic()
        subscription.dispose()
        assert not thread.is_alive() and follower.thread is None
        assert time.monotonic() - started < 3  # stopped promptly, not by a join's timeout
        registry.list_changes().subscribe(seen.append)
        again = follower.thread
        assert again is not None and again.is_alive()
    finally:
        registry.close()
    assert not again.is_alive()


def test_a_subscribe_whose_catch_up_fails_leaves_nothing_registered(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        for n in range(3):
            registry.create("/w", session_id=f"s{n}")
        with contextlib.closing(sqlite3.connect(path)) as db, db:  # a record the catch-up must read is damaged
            db.execute("UPDATE events SET data = x'c1ff00' WHERE position = 2")
        errors: list[BaseException] = []
        registry.list_changes(after=0).subscribe(on_error=errors.append)
        follower = registry._follower
        assert errors and isinstance(errors[0], CorruptEventError | StoreError)
        assert follower._listeners == []
        assert follower.thread is None
        assert _named("acp-registry follower") == []


def test_each_member_of_a_failed_group_commit_raises_its_own_exception() -> None:
    def commit(works: list[int]) -> list[int | BaseException]:
        if not calls:  # the leader's commit lasts until the seven others have queued behind it
            wait_until(lambda: len(works) + len(group._queue) == 8, 30, "the others to queue behind the leader")
        calls.append(works)
        raise StoreError("the disk is full")

    calls: list[list[int]] = []

    group: GroupCommit[int, int] = GroupCommit(commit)
    raised: list[BaseException] = []
    lock = threading.Lock()

    def submit(n: int) -> None:
        try:
            group.submit(n)
        except StoreError as exc:
            with lock:
                raised.append(exc)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(raised) == 8
    assert len({id(exc) for exc in raised}) == 8  # no object shared between threads
    assert all(str(exc) == "the disk is full" and isinstance(exc.__cause__, StoreError) for exc in raised)


def test_a_snapshot_kept_in_the_background_is_joined_on_close() -> None:
    store = open_store("memory://")
    done = threading.Event()

    def dump(_checkpoint: int) -> None:
        assert release.wait(30)  # under way until the test has seen its thread
        done.set()

    release = threading.Event()

    backend = backend_for(store)
    plan = SnapshotPlan(backend, EVERY - 1, EVERY + 1, dump)  # a short catch-up that passes a multiple of EVERY
    plan.passed(EVERY + 1)
    assert _named("acp-registry snapshot")
    release.set()
    assert backend.join_background(timeout=10) and done.is_set()
    assert _named("acp-registry snapshot") == []
    store.close()


def test_the_listen_thread_is_joined_on_close_and_its_errors_are_logged(
    postgres_schemas: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg  # noqa: PLC0415

    from tests.conftest import POSTGRES  # noqa: PLC0415

    store = open_store(postgres_schemas())
    try:
        subscription = store.subscribe(after=0)
        subscription.poll(timeout=0.2)  # a subscription that waits starts the listener
        listener = store._listener  # type: ignore[attr-defined]
        assert listener is not None and listener.thread.is_alive()
        with caplog.at_level(logging.DEBUG, logger="events.postgres"), psycopg.connect(POSTGRES) as admin:
            terminate = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
            # the listener's connection may still be opening
            wait_until(lambda: admin.execute(terminate).fetchall(), 30, "the listener's connection")
            wait_until(lambda: "LISTEN connection failed" in caplog.text, 30, "the listener to log its failure")
        subscription.close()
    finally:
        store.close()
    assert not listener.thread.is_alive()


def test_a_subscription_keeps_one_delivery_thread_which_ends_with_it_or_with_the_registry(tmp_path: Path) -> None:
    earlier = set(_named("acp-registry delivery"))  # other tests' may still be ending

    def delivering() -> int:
        return len(set(_named("acp-registry delivery")) - earlier)

    registry = SessionRegistry.open(f"sqlite://{tmp_path}/log.db")
    received: list[list[object]] = [[], [], []]
    completed = threading.Event()
    try:
        subscriptions = [
            registry.list_changes().subscribe(on_next=items.append, on_completed=completed.set) for items in received
        ]
        for burst in range(3):  # a thread per subscription for its life, not one per burst
            registry.create("/w", session_id=f"s{burst}")
            assert registry.wait_for_changes(timeout=10)
            wait_until(partial(lambda n: all(len(items) == n for items in received), burst + 1), 30, "each change")
            assert delivering() == 3
        subscriptions[0].dispose()
        wait_until(lambda: delivering() == 2, 30, "two delivery threads")
    finally:
        registry.close()
    assert completed.wait(5)  # the stream completes when its registry closes ...
    wait_until(lambda: delivering() == 0, 30, "no delivery thread")  # ... and its delivery thread ends


def test_a_writer_never_waits_for_a_fan_out_under_way(tmp_path: Path) -> None:
    with SessionRegistry.open(f"sqlite://{tmp_path}/log.db") as registry:
        registry.create("/w", session_id="a")
        inside, leave = threading.Event(), threading.Event()

        def stuck(_changes: object) -> None:  # a fan-out that takes its time, holding the follower's lock
            inside.set()
            leave.wait(10)

        following = registry.follow(stuck)
        try:
            registry.change_info("a", title="one")
            assert inside.wait(10)
            wrote = threading.Event()

            def write() -> None:
                registry.change_info("a", title="two")
                wrote.set()

            threading.Thread(target=write, daemon=True).start()
            assert wrote.wait(5)  # the write committed and answered while the fan-out is still under way
        finally:
            leave.set()
            following.stop()
        assert registry.get("a").title == "two"
