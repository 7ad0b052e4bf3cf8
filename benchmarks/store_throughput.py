"""Event store throughput on SQLite: appends (durable and fast, single and batched), full reads, and how soon
another process's append reaches a subscriber. Baseline in the same run: the disk's raw fsync rate.

    python benchmarks/store_throughput.py [--events 100000] [--json results.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from events import ANY, SessionCreated, SessionUpdated, SqliteStore, open_store
from events.sqlite import Synchronous


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


def single_appends(folder: Path, synchronous: Synchronous, count: int) -> float:
    path = folder / f"single-{synchronous}.db"
    with SqliteStore(path, synchronous=synchronous) as store:
        start = time.perf_counter()
        for n in range(count):
            store.append(f"s{n % 100}", [SessionUpdated(at=n, messages=1)], ANY)
        return count / (time.perf_counter() - start)


def batched_appends(path: Path, synchronous: Synchronous, events: int, batch: int) -> float:
    with SqliteStore(path, synchronous=synchronous) as store:
        start = time.perf_counter()
        for n in range(0, events, batch):
            session = f"s{n // batch}"
            evs = [SessionCreated(cwd=f"/work/p{n % 50}", at=n)] + [
                SessionUpdated(at=n + i, messages=1) for i in range(1, batch)
            ]
            store.append(session, evs, ANY)
        return events / (time.perf_counter() - start)


def full_read(path: Path) -> float:
    with SqliteStore(path) as store:
        start = time.perf_counter()
        count = sum(1 for _ in store.iter_events())
        return count / (time.perf_counter() - start)


_CHILD = """
import sys, time
from events import open_store, SessionUpdated
store = open_store(sys.argv[1])
for n in range(int(sys.argv[2])):
    time.sleep(0.02)
    store.append("remote", [SessionUpdated(at=time.time_ns(), messages=1)])
store.close()
"""


def cross_process_latency(folder: Path, count: int) -> list[float]:
    """Milliseconds from another process's append (its clock before the call) to a subscriber here."""
    url = f"sqlite://{folder / 'latency.db'}"
    latencies: list[float] = []
    with open_store(url) as store, store.subscribe() as sub:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, url, str(count)])
        deadline = time.monotonic() + 60
        while len(latencies) < count and time.monotonic() < deadline:
            for record in sub.poll(timeout=1):
                assert isinstance(record.event, SessionUpdated)
                latencies.append((time.time_ns() - record.event.at) / 1e6)
        child.wait(30)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000, help="events for the batched and read runs")
    parser.add_argument("--single", type=int, default=500, help="durable single-event appends to time")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        results["fsync_per_s"] = fsync_rate(folder, args.single)
        results["append_single_durable_per_s"] = single_appends(folder, "full", args.single)
        results["append_single_normal_per_s"] = single_appends(folder, "normal", args.single * 4)
        results["append_batched_durable_per_s"] = batched_appends(folder / "b-full.db", "full", args.events, 1000)
        results["append_batched_normal_per_s"] = batched_appends(folder / "b-normal.db", "normal", args.events, 1000)
        results["read_full_per_s"] = full_read(folder / "b-full.db")
        latencies = sorted(cross_process_latency(folder, 200))
        results["cross_process_p50_ms"] = statistics.median(latencies)
        results["cross_process_p99_ms"] = latencies[int(len(latencies) * 0.99) - 1]
    results["durable_single_vs_fsync"] = results["append_single_durable_per_s"] / results["fsync_per_s"]
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:>12,.2f}")
    if args.json:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(results)))


if __name__ == "__main__":
    main()
