"""Our event log on SQLite, measured exactly as the baselines are: appends (durable single events, per-session
batches durable and ``synchronous="normal"``), the full read and the lean scan, and how soon another process's
append arrives; and a second store filled as an importer would (``append_batch``), on which concurrent durable
appenders are timed against one (group commit)."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.figures import Latency, Stopwatch, Throughput, Timer, latency, run_together, throughput
from benchmarks.generate import History
from benchmarks.store_throughput import cross_process_latency
from events import ANY, NO_STREAM, AppendRequest, Event, SqliteStore

__all__ = ["EventLogBench", "ImportBench", "subscription_latency"]


class EventLogBench:
    """One SQLite store grown stage by stage. Bulk loading uses ``synchronous="normal"`` (one transaction per
    session, no fsync); the durable measurements open the same file with the default ``synchronous=FULL``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store = SqliteStore(path, synchronous="normal")
        self.loaded = Stopwatch()

    def load(self, histories: Sequence[History]) -> None:
        """Append each session's events as one batch, as an importer or a live agent would."""
        append = self._store.append
        for session_id, events in histories:
            with self.loaded:
                append(session_id, events, NO_STREAM)
            self.loaded.count += len(events)

    @contextlib.contextmanager
    def durable_batches(self) -> Iterator[Timer[History]]:
        """Times per-session batches with ``synchronous=FULL``: each acknowledged batch survives power loss."""
        with SqliteStore(self.path) as store:

            def append(history: History) -> float:
                start = time.perf_counter()
                store.append(history[0], history[1], NO_STREAM)
                return time.perf_counter() - start

            yield append

    @contextlib.contextmanager
    def durable_appends(self) -> Iterator[Timer[tuple[str, Event]]]:
        """Times one event per transaction with ``synchronous=FULL``."""
        with SqliteStore(self.path) as store:

            def append(item: tuple[str, Event]) -> float:
                start = time.perf_counter()
                store.append(item[0], [item[1]], ANY)
                return time.perf_counter() - start

            yield append

    def read_all(self) -> int:
        """``iter_events()`` over the whole log: every record decoded with its envelope; returns how many."""
        count = 0
        for _ in self._store.iter_events():
            count += 1
        return count

    def scan_all(self) -> int:
        """``scan()`` over the whole log: what a fold reads (no envelope); returns how many."""
        count = 0
        for _ in self._store.scan():
            count += 1
        return count

    def close(self) -> None:
        self._store.close()


class ImportBench:
    """A store filled as an importer fills one: ``append_batch`` of many sessions per call, one durable
    (``synchronous=FULL``) commit each, as eventsourcing's bulk ``save`` of many aggregates is."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store = SqliteStore(path)
        self.loaded = Stopwatch()

    def load(self, histories: Sequence[History]) -> None:
        requests = [AppendRequest(session_id, events, NO_STREAM) for session_id, events in histories]
        with self.loaded:
            self._store.append_batch(requests)
        self.loaded.count += sum(len(events) for _, events in histories)

    def appenders(self, items: Sequence[tuple[str, Event]], threads: int) -> Throughput:
        """``items`` appended durably one event per call, split over ``threads`` threads started together."""
        parts = [items[n::threads] for n in range(threads)]

        def work(part: Sequence[tuple[str, Event]]) -> None:
            for session_id, event in part:
                self._store.append(session_id, [event], ANY)

        seconds = run_together([functools.partial(work, part) for part in parts])
        return throughput(len(items), seconds, note=f"{threads} thread(s), synchronous=FULL")

    def close(self) -> None:
        self._store.close()


def subscription_latency(folder: Path, count: int = 200) -> Latency:
    """From another process's append (its clock, before the call) to a subscriber here, over SQLite."""
    # The store URL must be absolute, whatever folder the caller passed.
    url = f"sqlite://{folder.resolve() / 'latency.db'}"
    return latency([ms / 1000 for ms in cross_process_latency(url, count)], note="store subscription")
