"""The contract every event store must keep, as an importable pytest suite.

A backend's test module subclasses ``StoreContract`` and says how to build its store::

    class TestSqliteStore(StoreContract):
        @pytest.fixture
        def store_url(self, tmp_path): return f"sqlite:///{tmp_path}/log.db"

``store_url`` may return None for a store that cannot be shared between processes (the cross-process
and crash tests then skip). ``tamper`` may be overridden to run one SQL statement on the stored tables behind
the store's back (``?`` parameters), as a damaged disk or a hand edit would; the tests that damage records
skip without it (``events.testing_integrity``).

The cross-process and crash tests, and the child processes they start, are ``events.testing_processes``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from events.errors import (
    ConcurrencyError,
    EventIdConflict,
    StoreClosedError,
)
from events.factory import open_store
from events.model import Event, LogEntry, RecordedEvent, SessionCreated, SessionInfoChanged, SessionUpdated
from events.store import ANY, NO_STREAM, AppendRequest, EventStore
from events.testing_content import ContentContract
from events.testing_integrity import IntegrityContract
from events.testing_processes import ProcessContract, _activity, _assert_batches_do_not_interleave, _flat, check_log

__all__ = ["StoreContract", "check_log", "fake_clock"]


def fake_clock(start: int = 1_700_000_000_000_000_000, step: int = 1_000) -> Callable[[], int]:
    """A deterministic clock in epoch ns that advances ``step`` on every call."""
    now = [start]

    def clock() -> int:
        now[0] += step
        return now[0]

    return clock


class StoreContract(IntegrityContract, ContentContract, ProcessContract):
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
