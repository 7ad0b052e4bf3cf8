"""What an idle subscription costs: CPU time of a process that only waits for appends that never come, and how soon
another process's append still reaches it (the wait must stay cheap without getting slow).

    python -m benchmarks.idle_subscription [--seconds 10] [--url sqlite:///tmp/idle.db] [--json out.json]

The idle figure is the child's own CPU time (user + system, from ``resource``) over its wall time, in percent of
one core; the latency figures come from ``store_throughput.cross_process_latency`` on the same store.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

from benchmarks.args import bench_parser
from benchmarks.store_throughput import cross_process_latency, percentile, print_results

_IDLE = """
import resource, sys, time
from events import open_store
store = open_store(sys.argv[1])
sub = store.subscribe()
seconds = float(sys.argv[2])
sub.poll(timeout=0.5)  # warm: the reader connection is open
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.monotonic()
deadline = start + seconds
while (left := deadline - time.monotonic()) > 0:
    sub.poll(timeout=left)
after = resource.getrusage(resource.RUSAGE_SELF)
wall = time.monotonic() - start
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(100 * cpu / wall)
"""


def idle_cpu_percent(url: str, seconds: float) -> float:
    """Percent of one core used by a process whose one subscription waits ``seconds`` for nothing."""
    out = subprocess.run([sys.executable, "-c", _IDLE, url, str(seconds)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = bench_parser(__doc__, url=True)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the idle process waits")
    parser.add_argument("--latency", type=int, default=200, help="cross-process appends to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        url = args.url or f"sqlite://{tmp}/idle.db"
        from events import open_store  # noqa: PLC0415 - the store must exist before the child opens it

        open_store(url).close()
        results = {"idle_cpu_percent_of_a_core": idle_cpu_percent(url, args.seconds)}
        latencies = cross_process_latency(url, args.latency)
        results["cross_process_p50_ms"] = statistics.median(latencies)
        results["cross_process_p99_ms"] = percentile(latencies, 0.99)
    print_results(results, args.json)


if __name__ == "__main__":
    main()
