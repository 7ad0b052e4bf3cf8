"""The contract every event store must keep, as an importable pytest suite.

A backend's test module subclasses ``StoreContract`` and says how to build its store::

    class TestSqliteStore(StoreContract):
        @pytest.fixture
        def store_url(self, tmp_path): return f"sqlite:///{tmp_path}/log.db"

``store_url`` may return None for a store that cannot be shared between processes (the cross-process
and crash tests then skip). ``tamper`` may be overridden to run one SQL statement on the stored tables behind
the store's back (``?`` parameters), as a damaged disk or a hand edit would; the tests that damage records
skip without it.

Run as ``python -m events.testing writer URL ...`` it is the child process of the cross-process tests;
``python -m events.testing follower URL COUNT`` prints what a subscription in another process sees.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from events.chain import GENESIS, LINK_SIZE, link
from events.codec import encode_event, encode_record_json
from events.errors import (
    ConcurrencyError,
    CorruptEventError,
    EventIdConflict,
    StoreClosedError,
)
from events.model import Event, LogEntry, RecordedEvent, SessionCreated, SessionInfoChanged, SessionUpdated
from events.store import ANY, NO_STREAM, AppendRequest, EventStore
from events.urls import open_store
from events.verify import verify_log

__all__ = ["StoreContract", "check_log", "fake_clock"]


def fake_clock(start: int = 1_700_000_000_000_000_000, step: int = 1_000) -> Callable[[], int]:
    """A deterministic clock in epoch ns that advances ``step`` on every call."""
    now = [start]

    def clock() -> int:
        now[0] += step
        return now[0]

    return clock


def check_log(store: EventStore) -> list[RecordedEvent]:
    """Read the whole log and assert the store's invariants; return it."""
    report = verify_log(store)
    assert report.healthy, report.problems
    log = store.read()
    positions = [r.position for r in log]
    assert positions == sorted(set(positions)), "positions must strictly increase"
    assert len({r.event_id for r in log}) == len(log), "an event id is stored twice"
    return log


def _activity(n: int, **payload: object) -> SessionUpdated:
    return SessionUpdated(at=1_000 + n, messages=1, payload=payload or None)


class StoreContract:
    """What every ``EventStore`` promises. Subclass and provide the ``store_url`` fixture."""

    @pytest.fixture
    def store_url(self) -> str | None:
        raise NotImplementedError("a backend's test class provides the store_url fixture")

    @pytest.fixture
    def store(self, store_url: str | None) -> Iterator[EventStore]:
        store = self.open(store_url)
        yield store
        store.close()

    def open(self, url: str | None) -> EventStore:
        return open_store(url or "memory://", clock=fake_clock())

    def tamper(self, store: EventStore, statement: str, params: tuple[object, ...] = ()) -> None:
        """Run ``statement`` (SQL on the tables ``events``, ``streams``..., ``?`` parameters) on the stored log
        from outside the store (backends that can be edited so override this)."""
        pytest.skip(f"{type(store).__name__} cannot be edited from outside")

    def corrupt(self, store: EventStore, position: int) -> None:
        """Damage the stored bytes of one record."""
        self.tamper(store, "UPDATE events SET data = ? WHERE position = ?", (b"\xc1\xff\x00", position))

    # -- basics -------------------------------------------------------------------------------------

    def test_empty_store(self, store: EventStore) -> None:
        assert store.head() == 0
        assert store.read() == []
        assert store.read_stream("nobody") == []
        assert list(store.iter_events()) == []

    def test_append_and_read_back(self, store: EventStore) -> None:
        created = SessionCreated(
            cwd="/work/a", at=5, additional_directories=("/lib", "/docs"), title="hi", meta={"k": [1, 2]}
        )
        changed = SessionInfoChanged(title=None, updated_at=7, meta={"x": None})
        ids = [uuid.uuid4(), uuid.uuid4()]
        positions = store.append("s1", [created, changed], NO_STREAM, event_ids=ids)
        assert len(positions) == 2 and positions[0] < positions[1]
        assert store.head() == positions[1]
        log = store.read()
        assert [r.event for r in log] == [created, changed]
        assert [r.version for r in log] == [1, 2]
        assert [r.event_id for r in log] == ids
        assert [r.session_id for r in log] == ["s1", "s1"]
        assert log[0].recorded_at == log[1].recorded_at > 0
        assert isinstance(log[1].event, SessionInfoChanged)
        assert log[1].event.title is None  # an explicit clear survives storage
        assert log[1].event.title_source is not None  # UNSET stays UNSET, never becomes None

    def test_recorded_time_comes_from_the_clock(self, store: EventStore) -> None:
        store.append("s1", [_activity(1)])
        store.append("s1", [_activity(2)])
        first, second = store.read()
        assert 1_700_000_000_000_000_000 < first.recorded_at < second.recorded_at < 1_800_000_000_000_000_000

    def test_versions_are_gapless_per_session(self, store: EventStore) -> None:
        for n in range(5):
            store.append("a", [_activity(n)])
            store.append("b", [_activity(n), _activity(n)])
        assert [r.version for r in store.read_stream("a")] == [1, 2, 3, 4, 5]
        assert [r.version for r in store.read_stream("b")] == list(range(1, 11))
        assert [r.version for r in store.read_stream("b", after_version=8)] == [9, 10]
        check_log(store)

    def test_read_after_and_limit(self, store: EventStore) -> None:
        positions = [p for n in range(10) for p in store.append(f"s{n % 3}", [_activity(n)])]
        assert [r.position for r in store.read(after=positions[3], limit=4)] == positions[4:8]
        assert [r.position for r in store.read(after=positions[-1])] == []
        assert [r.position for r in store.iter_events(after=positions[1], batch=3)] == positions[2:]

    # -- expected versions and atomicity -------------------------------------------------------------

    def test_expected_version(self, store: EventStore) -> None:
        store.append("s", [_activity(1)], NO_STREAM)
        with pytest.raises(ConcurrencyError) as caught:
            store.append("s", [_activity(2)], NO_STREAM)
        assert (caught.value.session_id, caught.value.expected, caught.value.actual) == ("s", 0, 1)
        store.append("s", [_activity(2), _activity(3)], 1)
        with pytest.raises(ConcurrencyError) as caught:
            store.append("s", [_activity(4)], 2)
        assert (caught.value.expected, caught.value.actual) == (2, 3)
        with pytest.raises(ConcurrencyError):
            store.append("new", [_activity(1)], 4)
        store.append("s", [_activity(5)], ANY)
        assert [r.version for r in store.read_stream("s")] == [1, 2, 3, 4]
        assert store.read_stream("new") == []
        store.append("new", [_activity(1)], NO_STREAM)  # the refused append left no stream behind

    def test_a_refused_batch_writes_nothing(self, store: EventStore) -> None:
        taken = uuid.uuid4()
        store.append("s", [_activity(1)], event_ids=[taken])
        head = store.head()
        with pytest.raises(EventIdConflict):
            store.append("s", [_activity(2), _activity(3), _activity(4)], event_ids=[uuid.uuid4(), taken, uuid.uuid4()])
        with pytest.raises(ConcurrencyError):
            store.append("s", [_activity(2), _activity(3)], 5)
        with pytest.raises(TypeError):  # not encodable: refused before anything is written
            store.append("s", [_activity(2), SessionUpdated(at=1, payload=object())])
        assert store.head() == head
        assert [r.version for r in store.read_stream("s")] == [1]
        assert store.append("s", [_activity(2)], 1) == [store.head()]

    # -- idempotency ----------------------------------------------------------------------------------

    def test_a_retried_batch_returns_its_original_positions(self, store: EventStore) -> None:
        ids = [uuid.uuid4(), uuid.uuid4()]
        batch: list[Event] = [SessionCreated(cwd="/a", at=1), _activity(2)]
        first = store.append("s", batch, NO_STREAM, event_ids=ids)
        store.append("other", [_activity(3)])
        again = store.append("s", batch, NO_STREAM, event_ids=ids)  # stale expected version: still a retry
        assert again == first
        assert store.append("s", batch, ANY, event_ids=ids) == first
        assert len(store.read()) == 3
        check_log(store)

    def test_a_reused_event_id_with_other_content_is_refused(self, store: EventStore) -> None:
        taken = uuid.uuid4()
        store.append("s", [_activity(1)], event_ids=[taken])
        with pytest.raises(EventIdConflict, match="other content"):
            store.append("s", [_activity(99)], event_ids=[taken])
        with pytest.raises(EventIdConflict, match="stored for session 's'"):
            store.append("t", [_activity(1)], event_ids=[taken])
        with pytest.raises(ValueError):  # EventIdConflict is a ValueError too
            store.append("s", [_activity(1), _activity(2)], event_ids=[taken, uuid.uuid4()])
        assert len(store.read()) == 1

    # -- bad arguments --------------------------------------------------------------------------------

    def test_bad_arguments_say_what_is_wrong(self, store: EventStore) -> None:
        ok = [_activity(1)]
        cases: list[tuple[type[Exception], str, Callable[[], object]]] = [
            (TypeError, "session_id must be a str", lambda: store.append(7, ok)),  # type: ignore[arg-type]
            (ValueError, "must not be empty", lambda: store.append("", ok)),
            (ValueError, "at least one event", lambda: store.append("s", [])),
            (TypeError, "not a session event", lambda: store.append("s", [{"at": 1}])),  # type: ignore[list-item]
            (TypeError, "sequence of events", lambda: store.append("s", _activity(1))),  # type: ignore[arg-type]
            (TypeError, "expected_version must be an int", lambda: store.append("s", ok, "1")),  # type: ignore[arg-type]
            (ValueError, "expected_version must be", lambda: store.append("s", ok, -2)),
            (ValueError, "1 events", lambda: store.append("s", ok, event_ids=[])),
            (TypeError, "not a uuid.UUID", lambda: store.append("s", ok, event_ids=["x"])),  # type: ignore[list-item]
            (ValueError, "repeats an id", lambda: store.append("s", ok * 2, event_ids=[uuid.UUID(int=1)] * 2)),
            (TypeError, "after must be an int", lambda: store.subscribe(after="0")),  # type: ignore[arg-type]
            (ValueError, "after must be >= 0", lambda: store.subscribe(after=-1)),
        ]
        for error, message, call in cases:
            with pytest.raises(error, match=message):
                call()
        assert store.head() == 0

    # -- subscriptions --------------------------------------------------------------------------------

    def test_subscribe_catches_up_then_goes_live(self, store: EventStore) -> None:
        early = store.append("s", [_activity(1), _activity(2)])
        with store.subscribe(after=0) as sub:
            assert [r.position for r in sub.poll(timeout=5)] == early
            assert sub.poll(timeout=0.01) == []
            threading.Timer(0.05, lambda: store.append("t", [_activity(3)])).start()
            live = sub.poll(timeout=10)
            assert [r.session_id for r in live] == ["t"]
            assert sub.position == live[-1].position

    def test_subscribe_without_after_starts_at_the_head(self, store: EventStore) -> None:
        store.append("s", [_activity(1)])
        with store.subscribe() as sub:
            assert sub.poll(timeout=0.01) == []
            store.append("s", [_activity(2)])
            assert [r.version for r in sub.poll(timeout=5)] == [2]

    def test_closing_ends_subscriptions_and_refuses_use(self, store_url: str | None) -> None:
        store = self.open(store_url)
        store.append("s", [_activity(1)])
        sub = store.subscribe(after=0)
        seen: list[RecordedEvent] = []
        reader = threading.Thread(target=lambda: seen.extend(sub))
        reader.start()
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.005)
        store.close()
        reader.join(10)
        assert not reader.is_alive() and len(seen) == 1
        store.close()  # twice is harmless
        for call in (store.head, store.read, lambda: store.append("s", [_activity(2)])):
            with pytest.raises(StoreClosedError):
                call()

    # -- concurrency ----------------------------------------------------------------------------------

    def test_threads_append_and_subscribers_see_everything_once_in_order(self, store: EventStore) -> None:
        writers, batches = 8, 40
        acknowledged: list[list[int]] = []
        lock = threading.Lock()
        total = writers * batches * 2
        seen: dict[int, list[RecordedEvent]] = {0: [], 1: []}

        def write(w: int) -> None:
            for b in range(batches):
                session = f"w{w}" if b % 2 else "shared"
                positions = store.append(session, [_activity(b, w=w, b=b), _activity(b, w=w, b=b)])
                with lock:
                    acknowledged.append(positions)

        def follow(n: int) -> None:
            with store.subscribe(after=0) as sub:
                deadline = time.monotonic() + 60
                while len(seen[n]) < total and time.monotonic() < deadline:
                    seen[n].extend(sub.poll(timeout=1))

        threads = [threading.Thread(target=follow, args=(n,)) for n in (0, 1)]
        threads += [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        log = check_log(store)
        assert len(log) == total
        assert sorted(p for batch in acknowledged for p in batch) == [r.position for r in log]
        for n in (0, 1):
            assert [r.position for r in seen[n]] == [r.position for r in log], f"subscriber {n} differs"
        _assert_batches_do_not_interleave(acknowledged)
        assert [r.version for r in store.read_stream("shared")] == list(range(1, writers * batches + 1))

    def test_optimistic_writers_never_lose_an_update(self, store: EventStore) -> None:
        """Read-decide-append loops with exact expected versions: every success is a distinct version."""
        store.append("counter", [_activity(0)], NO_STREAM)
        conflicts = Counter[int]()

        def bump(w: int) -> None:
            done = 0
            while done < 15:
                version = len(store.read_stream("counter"))
                try:
                    store.append("counter", [_activity(version, w=w)], version)
                    done += 1
                except ConcurrencyError:
                    conflicts[w] += 1

        threads = [threading.Thread(target=bump, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [r.version for r in store.read_stream("counter")] == list(range(1, 62))
        check_log(store)

    # -- damaged records ------------------------------------------------------------------------------

    def test_a_corrupt_record_is_reported_with_its_position(self, store: EventStore) -> None:
        positions = [p for n in range(4) for p in store.append("s", [_activity(n)])]
        self.corrupt(store, positions[2])
        with pytest.raises(CorruptEventError) as caught:
            store.read()
        assert caught.value.position == positions[2]
        assert str(positions[2]) in str(caught.value)
        assert [r.position for r in store.read(limit=2)] == positions[:2]
        for read in (store.scan, store.iter_events):
            seen: list[int] = []
            with pytest.raises(CorruptEventError) as caught:
                seen.extend(e.position for e in read(0, batch=2))
            assert caught.value.position == positions[2] and seen == positions[:2]
        report = verify_log(store)
        assert [p.position for p in report.problems] == [positions[2]]
        assert report.events == 3

    # -- the lean read path ----------------------------------------------------------------------------

    def test_scan_yields_what_a_fold_needs_in_position_order(self, store: EventStore) -> None:
        for n in range(9):
            store.append(f"s{n % 3}", [_activity(n), _activity(n + 1)] if n % 2 else [_activity(n)])
        log = store.read()
        entries = [(r.position, r.session_id, r.version, r.event) for r in log]
        scanned = list(store.scan(batch=4))
        assert all(isinstance(e, LogEntry) for e in scanned)
        assert [(e.position, e.session_id, e.version, e.event) for e in scanned] == entries
        p = [r.position for r in log]
        assert [e.position for e in store.scan(p[2], until=p[9], batch=3)] == p[3:10]
        assert [e.position for e in store.scan(p[-1])] == []
        assert list(store.scan(p[5], until=p[5])) == []
        with pytest.raises(ValueError, match="after must be >= 0"):
            next(store.scan(-1))
        with pytest.raises(TypeError, match="until must be an int"):
            next(store.scan(0, until="9"))  # type: ignore[arg-type]

    # -- appends to many sessions in one call ------------------------------------------------------------

    def test_a_batch_appends_to_several_sessions_in_one_call(self, store: EventStore) -> None:
        store.append("old", [_activity(0)])
        with store.subscribe() as sub:
            positions = store.append_batch(
                [
                    AppendRequest("a", [SessionCreated(cwd="/a", at=1), _activity(1)], NO_STREAM),
                    AppendRequest("old", [_activity(2)], 1),
                    AppendRequest("a", [_activity(3)], 2),  # sees the request before it in the same batch
                    AppendRequest("b", [_activity(4)]),
                ]
            )
            assert [r.position for r in sub.poll(timeout=5)] == [p for part in positions for p in part]
        assert [len(part) for part in positions] == [2, 1, 1, 1]
        flat = [p for part in positions for p in part]
        assert flat == sorted(flat) and len(set(flat)) == 5
        assert [r.version for r in store.read_stream("a")] == [1, 2, 3]
        assert [r.version for r in store.read_stream("old")] == [1, 2]
        assert [r.position for r in store.read_stream("a")] == positions[0] + positions[2]
        assert store.append_batch([]) == []
        check_log(store)

    def test_a_batch_is_stored_whole_or_not_at_all(self, store: EventStore) -> None:
        store.append("a", [_activity(0)])
        taken = uuid.uuid4()
        store.append("t", [_activity(0)], event_ids=[taken])
        head = store.head()
        with pytest.raises(ConcurrencyError) as caught:
            store.append_batch(
                [
                    AppendRequest("new", [_activity(1)]),
                    AppendRequest("a", [_activity(2)], 5),
                    AppendRequest("c", [_activity(3)]),
                ]
            )
        assert (caught.value.session_id, caught.value.expected, caught.value.actual) == ("a", 5, 1)
        with pytest.raises(EventIdConflict):
            store.append_batch(
                [
                    AppendRequest("new", [_activity(1)]),
                    AppendRequest("c", [_activity(2), _activity(3)], event_ids=[uuid.uuid4(), taken]),
                ]
            )
        assert store.head() == head and store.read_stream("new") == []
        assert store.append_batch([AppendRequest("new", [_activity(1)], NO_STREAM)]) == [[head + 1]]
        check_log(store)

    def test_a_retried_batch_writes_nothing_again(self, store: EventStore) -> None:
        requests = [
            AppendRequest("a", [_activity(1), _activity(2)], NO_STREAM, [uuid.uuid4(), uuid.uuid4()]),
            AppendRequest("b", [_activity(3)], NO_STREAM, [uuid.uuid4()]),
        ]
        first = store.append_batch(requests)
        head = store.head()
        assert store.append_batch(requests) == first  # stale expected versions: still the retry
        assert store.head() == head
        fresh = AppendRequest("c", [_activity(4)], NO_STREAM)
        assert store.append_batch([requests[1], fresh]) == [first[1], [head + 1]]
        assert store.append("a", requests[0].events, event_ids=requests[0].event_ids) == first[0]
        check_log(store)

    def test_bad_batches_say_what_is_wrong(self, store: EventStore) -> None:
        same = uuid.uuid4()
        one = AppendRequest("a", [_activity(1)])
        twice = [
            AppendRequest("a", [_activity(1)], event_ids=[same]),
            AppendRequest("b", [_activity(1)], event_ids=[same]),
        ]
        not_a_request: list[Any] = [one, ("b", [])]
        cases: list[tuple[type[Exception], str, Callable[[], object]]] = [
            (TypeError, "sequence of AppendRequest", lambda: store.append_batch(one)),  # type: ignore[arg-type]
            (TypeError, r"requests\[1\] is a tuple", lambda: store.append_batch(not_a_request)),
            (ValueError, "at least one event", lambda: store.append_batch([AppendRequest("a", [])])),
            (ValueError, "must not be empty", lambda: store.append_batch([AppendRequest("", [_activity(1)])])),
            (ValueError, r"requests\[1\] repeats an event id", lambda: store.append_batch(twice)),
        ]
        for error, message, call in cases:
            with pytest.raises(error, match=message):
                call()
        assert store.head() == 0

    # -- concurrent appenders (group commit) ------------------------------------------------------------

    def test_concurrent_appenders_fail_alone_and_are_acknowledged_once(self, store: EventStore) -> None:
        """Threads append at once - good appends, stale expected versions, retries, batches - so that the store
        commits them together; each outcome is the one that append alone would have had."""
        threads, rounds = 8, 25
        outcomes: dict[int, list[tuple[str, object]]] = defaultdict(list)
        gate = threading.Barrier(threads)

        def work(t: int) -> None:
            session = f"t{t}"
            gate.wait()
            for n in range(rounds):
                version = len(store.read_stream(session))
                ids = [uuid.uuid4()]
                positions = store.append(session, [_activity(n, t=t)], version, event_ids=ids)
                outcomes[t].append(("ok", positions))
                with pytest.raises(ConcurrencyError):
                    store.append(session, [_activity(n, stale=True)], version)  # stale now: fails alone
                assert store.append(session, [_activity(n, t=t)], ANY, event_ids=ids) == positions  # a retry
                if n % 5 == 0:
                    parts = store.append_batch(
                        [AppendRequest(session, [_activity(n, b=1)]), AppendRequest(f"{session}-b", [_activity(n)])]
                    )
                    outcomes[t].append(("batch", parts))

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        assert not any(w.is_alive() for w in workers)
        log = check_log(store)
        acknowledged = [p for t in outcomes for kind, value in outcomes[t] for p in _flat(kind, value)]
        assert sorted(acknowledged) == [r.position for r in log]
        assert not [r for r in log if isinstance(r.event, SessionUpdated) and (r.event.payload or {}).get("stale")]
        for t in range(threads):
            assert [r.version for r in store.read_stream(f"t{t}")] == list(range(1, rounds + rounds // 5 + 1))

    # -- the integrity chain ---------------------------------------------------------------------------

    def test_each_record_carries_a_link_of_the_chain(self, store: EventStore) -> None:
        positions = [p for n in range(6) for p in store.append(f"s{n % 2}", [_activity(n), _activity(n + 1)])]
        assert store.chain_at(0) == GENESIS
        chain = [store.chain_at(p) for p in positions]
        assert all(isinstance(value, bytes) and len(value) == LINK_SIZE for value in chain)
        assert len(set(chain)) == len(chain)
        assert store.chain_at(positions[-1] + 1) is None
        stored = store.stored_records()
        assert [r.position for r in stored] == positions and [r.chain for r in stored] == chain
        previous = GENESIS
        for r in stored:  # a function of the stored records alone: the same log gives the same chain anywhere
            previous = link(previous, r.position, r.session_id, r.version, r.event_id, r.recorded_at, r.data)
            assert r.chain == previous
        report = verify_log(store, batch=5)
        assert report.healthy and report.chained and report.events == len(positions)

    def test_verify_finds_a_changed_a_removed_and_a_moved_record(self, store: EventStore) -> None:
        created = SessionCreated(cwd="/work/a", at=1, title="hello")
        first = store.append("a", [created, _activity(1), _activity(2)])
        middle = [p for n in range(3) for p in store.append(f"b{n}", [_activity(n)])]
        last = [p for n in range(4) for p in store.append(f"c{n}", [_activity(n)])]
        # One byte of a stored title: the record still decodes, as another valid event.
        self.tamper(
            store,
            "UPDATE events SET data = ? WHERE position = ?",
            (encode_event(msgspec.structs.replace(created, title="hellp")), first[0]),
        )
        self.tamper(store, "DELETE FROM events WHERE position = ?", (middle[1],))
        for old, new in ((last[1], -1), (last[2], last[1]), (-1, last[2])):  # two records trade places
            self.tamper(store, "UPDATE events SET position = ? WHERE position = ?", (new, old))
        edited = store.read(limit=1)[0].event
        assert isinstance(edited, SessionCreated) and edited.title == "hellp"
        report = verify_log(store, batch=3)
        # A moved record breaks three links: its own two places' and that of the record after them.
        moved = [last[1], last[2], last[3]]
        assert [p.position for p in report.problems] == [first[0], middle[2], *moved], report.problems
        assert all("integrity link does not match" in p.problem for p in report.problems)

    # -- other processes ------------------------------------------------------------------------------

    def test_two_processes_append_to_one_store(self, store_url: str | None, store: EventStore) -> None:
        if store_url is None:
            pytest.skip("this store cannot be shared between processes")
        children = [_spawn_writer(store_url, f"p{n}", batches=60) for n in range(2)]
        seen: list[RecordedEvent] = []
        with store.subscribe(after=0) as sub:
            deadline = time.monotonic() + 120
            while len(seen) < 2 * 60 * 3 and time.monotonic() < deadline:
                seen.extend(sub.poll(timeout=1))
        acknowledged = [_acknowledged(child.communicate(timeout=120)[0]) for child in children]
        assert [child.returncode for child in children] == [0, 0]
        log = check_log(store)
        assert len(log) == 2 * 60 * 3
        assert [r.position for r in seen] == [r.position for r in log], "a subscriber missed a remote append"
        batches = [b for child in acknowledged for b in child]
        assert sorted(p for b in batches for p in b) == [r.position for r in log]
        _assert_batches_do_not_interleave(batches)

    def test_acknowledged_appends_survive_sigkill(self, store_url: str | None) -> None:
        if store_url is None:
            pytest.skip("this store cannot be shared between processes")
        rng = random.Random(20261202)
        acknowledged: list[list[int]] = []
        for run in range(20):
            # Every other child appends from four threads: killed while a group commit is in flight.
            child = _spawn_writer(store_url, f"crash{run}", batches=100_000, threads=1 if run % 2 else 4)
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 0.25))
            child.send_signal(signal.SIGKILL)
            out, _ = child.communicate(timeout=30)
            acknowledged.extend(_acknowledged(out))
        store = self.open(store_url)
        try:
            log = check_log(store)
            by_position = {r.position: r for r in log}
            missing = [p for batch in acknowledged for p in batch if p not in by_position]
            assert not missing, f"acknowledged events lost: {missing[:10]}"
            sizes: dict[str, int] = defaultdict(int)
            expected: dict[str, int] = {}
            for r in log:
                assert isinstance(r.event, SessionUpdated) and isinstance(r.event.payload, dict)
                sizes[r.event.payload["batch"]] += 1
                expected[r.event.payload["batch"]] = r.event.payload["size"]
            partial = {b: n for b, n in sizes.items() if n != expected[b]}
            assert not partial, f"partial batches in the log: {partial}"
            assert len(acknowledged) >= 20, "the children were killed before acknowledging anything"
        finally:
            store.close()


def _flat(kind: str, value: Any) -> list[int]:
    """The positions an append (``ok``: a list) or a batch (a list of lists) acknowledged."""
    return list(value) if kind == "ok" else [p for part in value for p in part]


def _assert_batches_do_not_interleave(batches: list[list[int]]) -> None:
    spans = sorted((min(b), max(b)) for b in batches)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end < start, f"two batches interleave their positions: ...{end} and {start}..."


def _spawn_writer(url: str, prefix: str, batches: int, threads: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "events.testing", "writer", url, prefix, str(batches), "--threads", str(threads)],
        stdout=subprocess.PIPE,
        text=True,
    )


def _acknowledged(out: str) -> list[list[int]]:
    """Positions of each batch the child acknowledged (a line cut short by the kill is not one)."""
    batches = []
    for line in out.splitlines(keepends=True):
        if line.startswith("ack ") and line.endswith("\n"):
            batches.append([int(p) for p in line.split()[1:]])
    return batches


def _writer(url: str, prefix: str, batches: int, threads: int = 1) -> None:
    """Append batches of 1-5 events (each knowing its batch and size) and print every acknowledgement, from
    ``threads`` threads at once (then the store commits them in groups); every 7th batch goes to two sessions in
    one ``append_batch`` in the crash tests (``batches`` over 1000)."""
    store = open_store(url)
    printing = threading.Lock()
    print("ready", flush=True)

    crash = batches > 1000  # the crash tests: random sizes, and some batches across sessions

    def write(thread: int) -> None:
        rng = random.Random(f"{prefix}{os.getpid()}-{thread}")
        for n in range(batches):
            batch_id = f"{prefix}-{os.getpid()}-{thread}-{n}"
            size = rng.randint(1, 5) if crash else 3
            sessions = [f"{prefix}-{thread}-{rng.randrange(5)}" for _ in range(2 if crash and n % 7 == 6 else 1)]
            events = [_activity(n, batch=batch_id, size=size * len(sessions), i=i) for i in range(size)]
            if len(sessions) == 1:
                positions = store.append(sessions[0], events, ANY)
            else:
                split = store.append_batch([AppendRequest(session, events) for session in sessions])
                positions = [p for part in split for p in part]
            with printing:
                print("ack", *positions, flush=True)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    store.close()


def _follower(url: str, count: int, timeout: float) -> None:
    """Subscribe from the start, say "ready", then print every event as it arrives ("event" and its JSON line)
    until ``count`` events have come or ``timeout`` seconds have passed."""
    store = open_store(url)
    seen = 0
    deadline = time.monotonic() + timeout
    with store.subscribe(after=0) as sub:
        print("ready", flush=True)
        while seen < count and time.monotonic() < deadline:
            records = sub.poll(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
            for record in records:
                print("event", encode_record_json(record).decode())
            seen += len(records)
            sys.stdout.flush()
    store.close()


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m events.testing")
    sub = parser.add_subparsers(dest="command", required=True)
    writer = sub.add_parser("writer", help="append batches and acknowledge each on stdout")
    writer.add_argument("url")
    writer.add_argument("prefix")
    writer.add_argument("batches", type=int)
    writer.add_argument("--threads", type=int, default=1)
    follower = sub.add_parser("follower", help="subscribe from the start and print every event seen")
    follower.add_argument("url")
    follower.add_argument("count", type=int)
    follower.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if args.command == "follower":
        _follower(args.url, args.count, args.timeout)
    else:
        _writer(args.url, args.prefix, args.batches, args.threads)


if __name__ == "__main__":
    _main()
