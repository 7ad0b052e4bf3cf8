"""Change stream figures: diffs per second with 1 and 10 subscribers, and cross-process latency on SQLite.

    python -m benchmarks.change_stream [--changes 200000] [--json out.json]

Diffs/s: the events are in the log already (and in the read model, which writers keep up for session/list); the
clock runs from ``registry.sync()`` (the follower folds them from the log and hands each change to the stream)
until every subscriber has received every item on its own thread: the stream from the log to its subscribers.
Latency: another process appends activity stamped with its wall clock; the figure is the time until a
subscriber here holds the ``session_info_update``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.args import bench_parser
from benchmarks.store_throughput import percentile, print_results
from events import MemoryStore, SessionCreated, SessionUpdated
from registry import SessionRegistry
from registry.changes import ListChange, Updated


class _Counter:
    def __init__(self, target: int) -> None:
        self.count = 0
        self.target = target
        self.done = threading.Event()

    def __call__(self, _item: ListChange) -> None:
        self.count += 1
        if self.count >= self.target:
            self.done.set()


def sync_seconds(subscribers: int, changes: int, sessions: int = 1000) -> float:
    store = MemoryStore()
    registry = SessionRegistry(store, follow=False)
    for n in range(sessions):
        store.append(f"s{n}", [SessionCreated(cwd=f"/work/p{n % 50}", at=n)])
    registry.sync()
    counters = [_Counter(changes) for _ in range(subscribers)]
    for counter in counters:
        registry.list_changes().subscribe(counter)
    for n in range(changes):
        store.append(f"s{n % sessions}", [SessionUpdated(at=10_000 + n, messages=1)])
    registry.read_model.catch_up()  # session/list's own fold: not on the stream's path (writers keep it up)
    start = time.perf_counter()
    registry.sync()  # the follower's fold of the log, each change handed to every subscriber's queue
    for counter in counters:
        counter.done.wait(600)
    elapsed = time.perf_counter() - start
    registry.close()
    return elapsed


_CHILD = """
import sys, time
from registry import SessionRegistry
with SessionRegistry.open(sys.argv[1], follow=False) as registry:
    for n in range(int(sys.argv[2])):
        time.sleep(0.02)
        registry.record_activity("remote", at=time.time_ns())
"""


def cross_process_latency(folder: Path, count: int) -> list[float]:
    url = f"sqlite://{folder / 'latency.db'}"
    latencies: list[float] = []
    done = threading.Event()
    with SessionRegistry.open(url) as registry:
        registry.create("/work/remote", session_id="remote")

        def on_item(item: ListChange) -> None:
            if isinstance(item, Updated) and isinstance(item.notification.update.updated_at, str):
                state = registry.state("remote")
                assert state is not None and state.updated_at is not None
                latencies.append((time.time_ns() - state.updated_at) / 1e6)
                if len(latencies) >= count:
                    done.set()

        registry.list_changes().subscribe(on_item)
        child = subprocess.Popen([sys.executable, "-c", _CHILD, url, str(count)])
        done.wait(120)
        child.wait(60)
    return latencies


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--latency-samples", type=int, default=200)
    args = parser.parse_args()
    results: dict[str, float] = {}
    for k in (1, 10):  # without a subscriber no follower runs: nothing to time
        results[f"end_to_end_per_s_{k}_subscribers"] = args.changes / sync_seconds(k, args.changes)
    with tempfile.TemporaryDirectory() as tmp:
        latencies = sorted(cross_process_latency(Path(tmp), args.latency_samples))
    results["cross_process_p50_ms"] = statistics.median(latencies)
    results["cross_process_p99_ms"] = percentile(latencies, 0.99)
    print_results(results, args.json)


if __name__ == "__main__":
    main()
