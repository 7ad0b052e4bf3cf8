"""What recording the conversation costs the relay: the proxy of another source tree (``--baseline DIR``, e.g.
the commit before the capture, unpacked with ``git archive``) beside this one, in the same run, in front of the
same agent, with the agent alone as the reference.

    python -m benchmarks.proxy_capture --baseline DIR [--rounds 3] [--pings 2000] [--paced 2000] [--flood 100000]
                                       [--json out.json]

Each round runs the agent alone, the baseline's proxy and this tree's, in turn (so a load that comes and goes falls
on all three), each on a fresh SQLite store, measuring ``benchmarks.proxy_relay``'s figures:

- **round trip** added per relayed message (half the difference of the round trips, p50 and p99);
- **one way in a turn**: ``agent_message_chunk``s paced 1 ms apart inside a ``session/prompt`` turn (so this
  tree's proxy captures every one of them), stamped with the agent's monotonic clock, added latency p50 and p99;
- **a flood in a turn**: ``--flood`` chunks of about 200 bytes inside one turn, read to the answer: chunks per
  second, and the proxy process's CPU time (user + system, every thread: relay, capture, recorder) per chunk.

Reported per tree as the median over the rounds, with this tree's figure as a ratio of the baseline's (the
target: added latency within 1.2x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.machine import CpuMeter, describe_machine
from benchmarks.proxy_relay import Client, _percentile, bench_agent, paced_latencies, publish, round_trips

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """Seconds of CPU the process ``pid`` used so far, all its threads (``/proc/PID/stat``: utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _turn(client: Client, text: str) -> int:
    return client.send("session/prompt", {"sessionId": "s", "prompt": [{"type": "text", "text": text}]})


def paced_in_a_turn(client: Client, count: int) -> list[float]:
    return paced_latencies(client, _turn(client, f"paced {count}"))


def flood_in_a_turn(client: Client, count: int) -> tuple[float, float]:
    """Chunks per second read by the client, and the agent-side process's CPU seconds per chunk."""
    cpu = _cpu(client.proc.pid)
    started = time.perf_counter()
    _turn(client, f"flood {count}")
    seen = 0
    while True:
        batch = client.lines()
        seen += len(batch)
        if any(b'"result"' in line for line in batch[-2:]):  # the answer (the proxy's title may follow it)
            break
    elapsed = time.perf_counter() - started
    assert seen - 1 >= count, (seen, count)  # the proxy's title for the session may come among them
    return count / elapsed, (_cpu(client.proc.pid) - cpu) / count


def _measure(command: list[str], env: dict[str, str] | None, args: argparse.Namespace) -> dict[str, Any]:
    client = Client(command, env)
    client.send("initialize", {"protocolVersion": 1})
    client.line()
    client.send("session/new", {"cwd": "/", "mcpServers": []})
    client.line()
    trips = round_trips(client, args.pings)
    paced = paced_in_a_turn(client, args.paced)
    rate, cpu = flood_in_a_turn(client, args.flood)
    client.close()
    return {
        "round_trip_p50": _percentile(trips, 0.5),
        "round_trip_p99": _percentile(trips, 0.99),
        "one_way_p50": _percentile(paced, 0.5),
        "one_way_p99": _percentile(paced, 0.99),
        "chunks_per_s": rate,
        "cpu_us_per_chunk": cpu * 1e6,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    folder, direct = bench_agent("proxy-capture-")
    stores = iter(range(1_000_000))
    # Each proxy imports its own tree: -P keeps the working directory off sys.path, PYTHONPATH names the tree.
    trees = {"before": Path(args.baseline).resolve(), "after": Path(__file__).resolve().parents[1]}
    envs = {tree: {**os.environ, "PYTHONPATH": str(path)} for tree, path in trees.items()}

    def proxied() -> list[str]:
        store = f"sqlite://{folder}/s{next(stores)}.db"
        return [sys.executable, "-P", "-m", "registry.cli", "proxy", "--store", store, "--", *direct]

    rounds: dict[str, list[dict[str, Any]]] = {"direct": [], "before": [], "after": []}
    for _ in range(args.rounds):
        rounds["direct"].append(_measure(direct, None, args))
        for tree in ("before", "after"):
            rounds[tree].append(_measure(proxied(), envs[tree], args))
    median = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in rounds.items()}
    results: dict[str, Any] = {"rounds": args.rounds}
    for key in ("round_trip_p50", "round_trip_p99", "one_way_p50", "one_way_p99"):
        halve = 2 if key.startswith("round_trip") else 1  # a round trip relays two messages
        added = {tree: (median[tree][key] - median["direct"][key]) / halve for tree in ("before", "after")}
        name = f"added_{key.replace('round_trip', 'per_message')}_ms"
        results[name] = {**added, "direct": median["direct"][key], "ratio": _ratio(added["after"], added["before"])}
    for key in ("chunks_per_s", "cpu_us_per_chunk"):
        figures = {tree: median[tree][key] for tree in ("direct", "before", "after")}
        results[key] = {**figures, "ratio": _ratio(figures["after"], figures["before"])}
    results["runs"] = rounds
    return results


def _ratio(after: float, before: float) -> float:
    return after / before if before > 0 else float("inf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, metavar="DIR", help="a source tree of the proxy to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=2000)
    parser.add_argument("--flood", type=int, default=100_000)
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args(argv)
    machine, meter, started = describe_machine(), CpuMeter(), time.perf_counter()
    results = run(args)
    elapsed = time.perf_counter() - started
    results["machine"] = msgspec.to_builtins(
        msgspec.structs.replace(machine, load_after=os.getloadavg(), others_cpu_cores=meter.others(elapsed))
    )
    return publish(results, args.json, width=32, digits=4, hidden=("runs", "machine"))


if __name__ == "__main__":
    sys.exit(main())
