"""Event store throughput: appends (durable and fast, single and batched, from one thread and from eight, and
``append_batch`` imports), full reads (``iter_events`` and the lean ``scan``), and how soon another process's
append reaches a subscriber; baseline in the same run: the disk's raw fsync rate. The functions take
any store URL (postgres_throughput.py runs them on PostgreSQL); this script runs them on SQLite.

    python -m benchmarks.store_throughput [--events 100000] [--json results.json]
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from benchmarks.args import bench_parser
from benchmarks.figures import run_together
from events import ANY, AppendRequest, SessionCreated, SessionUpdated, open_store


def fsync_rate(folder: Path, count: int) -> float:
    """Raw durable writes per second: 100 bytes written and fsynced, as a commit would."""
    path = folder / "fsync.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, b"x" * 100)
            os.fsync(fd)
        return count / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def single_appends(url: str, count: int) -> float:
    """One event per append (so one commit each), to 100 sessions in turn."""
    with open_store(url) as store:
        start = time.perf_counter()
        for n in range(count):
            store.append(f"s{n % 100}", [SessionUpdated(at=n, messages=1)], ANY)
        return count / (time.perf_counter() - start)


def batched_appends(url: str, events: int, batch: int) -> float:
    """``batch`` events per append: a session's creation and its activity in one commit."""
    with open_store(url) as store:
        start = time.perf_counter()
        for n in range(0, events, batch):
            evs = [SessionCreated(cwd=f"/work/p{n % 50}", at=n)] + [
                SessionUpdated(at=n + i, messages=1) for i in range(1, batch)
            ]
            store.append(f"b{n // batch}", evs, ANY)
        return events / (time.perf_counter() - start)


def threaded_appends(url: str, count: int, threads: int) -> float:
    """``count`` single-event appends split over ``threads`` threads started together (group commit)."""
    with open_store(url) as store:

        def work(t: int) -> None:
            for n in range(count // threads):
                store.append(f"t{t}-{n % 10}", [SessionUpdated(at=n, messages=1)], ANY)

        seconds = run_together([functools.partial(work, t) for t in range(threads)])
        return threads * (count // threads) / seconds


def batch_import(url: str, sessions: int, per_call: int = 1000) -> float:
    """Events/s of ``append_batch`` of ``per_call`` new sessions (a creation and four activities each) per call."""
    with open_store(url) as store:
        elapsed = 0.0
        for first in range(0, sessions, per_call):
            requests = [
                AppendRequest(
                    f"i{n}",
                    [SessionCreated(cwd=f"/work/p{n % 50}", at=n)]
                    + [SessionUpdated(at=n + i, messages=1) for i in range(4)],
                )
                for n in range(first, min(first + per_call, sessions))
            ]
            start = time.perf_counter()
            store.append_batch(requests)
            elapsed += time.perf_counter() - start
        return 5 * sessions / elapsed


def _activities(n: int) -> list[SessionUpdated]:
    return [SessionUpdated(at=n + i, messages=1) for i in range(1, 5)]


def full_read(url: str) -> float:
    with open_store(url) as store:
        start = time.perf_counter()
        count = sum(1 for _ in store.iter_events())
        return count / (time.perf_counter() - start)


def scan_read(url: str) -> float:
    """The lean read a fold uses: ``scan()`` (position, session, version, event)."""
    with open_store(url) as store:
        start = time.perf_counter()
        count = sum(1 for _ in store.scan())
        return count / (time.perf_counter() - start)


_CHILD = """
import sys, time
from events import open_store, SessionUpdated
store = open_store(sys.argv[1])
print("ready", flush=True)
for n in range(int(sys.argv[2])):
    time.sleep(0.02)
    store.append("remote", [SessionUpdated(at=time.time_ns(), messages=1)])
store.close()
"""


def cross_process_latency(url: str, count: int) -> list[float]:
    """Milliseconds from another process's append (its clock before the call) to a subscriber here, sorted."""
    latencies: list[float] = []
    with open_store(url) as store, store.subscribe() as sub:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, url, str(count)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 60
        while len(latencies) < count and time.monotonic() < deadline:
            for record in sub.poll(timeout=1):
                assert isinstance(record.event, SessionUpdated)
                latencies.append((time.time_ns() - record.event.at) / 1e6)
        child.wait(30)
    return sorted(latencies)


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted values."""
    return ordered[max(0, min(len(ordered), math.ceil(fraction * len(ordered))) - 1)]


def print_results(results: dict[str, float], json_path: Path | None) -> None:
    """The figures as an aligned table on stdout, and as JSON when a path is given."""
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:>12,.2f}")
    if json_path is not None:
        json_path.write_bytes(msgspec.json.format(msgspec.json.encode(results)))


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--events", type=int, default=100_000, help="events for the batched and read runs")
    parser.add_argument("--single", type=int, default=500, help="durable single-event appends to time")
    args = parser.parse_args()
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        results["fsync_per_s"] = fsync_rate(folder, args.single)
        url = f"sqlite://{folder}"
        results["append_single_durable_per_s"] = single_appends(f"{url}/single-full.db", args.single)
        results["append_single_normal_per_s"] = single_appends(
            f"{url}/single-normal.db?synchronous=normal", args.single * 4
        )
        results["append_batched_durable_per_s"] = batched_appends(f"{url}/b-full.db", args.events, 1000)
        results["append_batched_normal_per_s"] = batched_appends(
            f"{url}/b-normal.db?synchronous=normal", args.events, 1000
        )
        results["read_full_per_s"] = full_read(f"{url}/b-full.db")
        results["scan_full_per_s"] = scan_read(f"{url}/b-full.db")
        results["append_single_durable_1_thread_per_s"] = threaded_appends(f"{url}/threads.db", args.single, 1)
        results["append_single_durable_8_threads_per_s"] = threaded_appends(f"{url}/threads.db", args.single, 8)
        results["append_batch_import_durable_per_s"] = batch_import(f"{url}/import.db", args.events // 5)
        latencies = cross_process_latency(f"{url}/latency.db", 200)
        results["cross_process_p50_ms"] = statistics.median(latencies)
        results["cross_process_p99_ms"] = percentile(latencies, 0.99)
    results["durable_single_vs_fsync"] = results["append_single_durable_per_s"] / results["fsync_per_s"]
    results["eight_threads_vs_one"] = (
        results["append_single_durable_8_threads_per_s"] / results["append_single_durable_1_thread_per_s"]
    )
    print_results(results, args.json)


if __name__ == "__main__":
    main()
