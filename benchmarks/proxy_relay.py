"""What ``acp-registry proxy`` adds: latency per relayed message, notification throughput, start time.

    python -m benchmarks.proxy_relay [--pings 2000] [--paced 2000] [--flood 200000] [--starts 5] [--sessions 1000]
                                     [--json out.json]

Every figure is measured twice in the same run - the client talking to the agent over a direct pipe, and through
the proxy (on a fresh SQLite store) - and reported with the difference or the ratio, so the machine's load
cancels out as far as it can. The agent is a small flood agent (written to a temporary file; it pre-encodes its
lines so that it is not what limits the rate):

- **round trip**: a request answered at once (``_bench/ping``), one at a time; the proxy relays two messages
  per round trip, so the added latency per relayed message is half the difference of the round trips.
- **one way**: ``session/update`` notifications sent one every millisecond, each stamped with the agent's
  ``time.monotonic_ns()`` (one clock for every process on this machine), timed when the client has read it.
- **throughput**: a ``session/update`` flood of ``--flood`` notifications (about 200 bytes each) read by the
  client to the last one: notifications per second.
- **start**: spawn to the ``initialize`` answer, the agent alone and behind the proxy (the history import runs in
  the background and is not waited for), for the bench agent and for ``acp-registry serve``, runs interleaved;
  medians and p90s (``--only-start`` measures only this). The package's bytecode is compiled first, as an
  installed package has it (with ``PYTHONDONTWRITEBYTECODE`` set every run would compile every module again).
- **with a history** (``--history N``; ``--only-history`` measures only this): the proxy recording as
  ``claude-code`` in front of the bench agent, with a HOME holding an N-session Claude Code history - spawn to the
  first ``session/list`` answer (it waits for the import, within ``--list-wait``'s bound) and whether the history
  was whole by then; and round trips from the moment ``initialize`` is answered, while the import runs.
- **session/list**: a first page of ``--sessions`` sessions through the proxy (the agent's sessions in its store)
  beside the same page from ``acp-registry serve`` over stdio (its own sessions in its store).

Targets (issue 23): p50 <= 0.3 ms and p99 <= 2 ms added per relayed message, >= 20,000 notifications/s through
the proxy, start adds <= 0.2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.machine import compile_bytecode

_AGENT = r"""
import json, os, sys, time
out = sys.stdout.buffer
chunk = {"type": "text", "text": "x" * 120}
for raw in sys.stdin.buffer:
    message = json.loads(raw)
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": 1, "agentInfo": {"name": "bench-agent"}, "agentCapabilities": {}}
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n"); out.flush()
    elif method == "session/new":
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s"}}).encode() + b"\n"); out.flush()
    elif method == "session/prompt":  # "paced N" / "flood N" as the _bench methods below, inside a turn
        word, count = params["prompt"][0]["text"].split()
        method, params = "_bench/" + word, {"count": int(count)}
    if method == "_bench/ping":
        out.write(b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b',"result":{}}\n'); out.flush()
    elif method == "_bench/paced":
        for i in range(params["count"]):
            t = time.monotonic_ns()
            line = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update":
                    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(t)}}}}
            out.write(json.dumps(line).encode() + b"\n"); out.flush()
            time.sleep(0.001)
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).encode() + b"\n"); out.flush()
    elif method == "_bench/flood":
        line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update":
                {"sessionUpdate": "agent_message_chunk", "content": chunk}}}).encode() + b"\n"
        left = params["count"]
        while left:
            n = min(left, 512)
            out.write(line * n)
            left -= n
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).encode() + b"\n"); out.flush()
"""


_PROXY = [sys.executable, "-m", "registry.cli", "proxy"]


def bench_agent(prefix: str) -> tuple[Path, list[str]]:
    """A new temporary folder (its name begins with ``prefix``) holding the bench agent, and the agent's command."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / "agent.py").write_text(_AGENT)
    return folder, [sys.executable, str(folder / "agent.py")]


class Client:
    """A client of one agent process (direct, or the proxy in front of it)."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out = self.proc.stdout
        self._buffer = b""
        self._ids = 0

    def line(self) -> bytes:
        while b"\n" not in self._buffer:
            data = os.read(self._out.fileno(), 1 << 20)
            if not data:
                raise EOFError("the agent ended")
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def lines(self) -> list[bytes]:
        """Every complete line available now (at least one)."""
        while b"\n" not in self._buffer:
            data = os.read(self._out.fileno(), 1 << 20)
            if not data:
                raise EOFError("the agent ended")
            self._buffer += data
        *complete, self._buffer = self._buffer.split(b"\n")
        return complete

    def send(self, method: str, params: Any = None) -> int:
        self._ids += 1
        message = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params or {}}
        self._in.write(json.dumps(message).encode() + b"\n")
        return self._ids

    def close(self) -> None:
        self._in.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def round_trips(client: Client, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        client.send("_bench/ping")
        client.line()
        times.append((time.perf_counter() - started) * 1000)
    return times


def one_way(client: Client, count: int) -> list[float]:
    return paced_latencies(client, client.send("_bench/paced", {"count": count}))


def paced_latencies(client: Client, request: int) -> list[float]:
    """Milliseconds from each paced update's send time (its text) to its reading, until ``request``'s answer. Only
    the agent's chunks count: through the proxy a turn's prompt may also bring the registry's own
    ``session_info_update`` (its title), among the chunks when the machine is busy."""
    latencies: list[float] = []
    while True:
        for line in client.lines():
            now = time.monotonic_ns()
            message = json.loads(line)
            if message.get("id") == request:
                return latencies
            update = message.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                latencies.append((now - int(update["content"]["text"])) / 1e6)


def flood(client: Client, count: int) -> float:
    started = time.perf_counter()
    client.send("_bench/flood", {"count": count})
    seen = 0
    while True:
        batch = client.lines()
        seen += len(batch)
        if b'"result"' in batch[-1]:  # the flood's answer: the last line
            break
    elapsed = time.perf_counter() - started
    assert seen - 1 == count, (seen, count)
    return count / elapsed


def list_pages(
    folder: Path, sessions: int, count: int, proxied: Callable[[], list[str]], both: Callable[..., Any]
) -> dict[str, float]:
    """p50 of a first ``session/list`` page: from ``serve`` and through the proxy, on stores of ``sessions``."""
    from registry import SessionRegistry  # noqa: PLC0415 - the benchmark's own process fills the stores

    served = f"sqlite://{folder}/served.db"
    command = proxied()
    proxied_store = command[command.index("--store") + 1]
    for url, agent, prefix in ((served, None, ""), (proxied_store, "bench-agent", "bench-agent:")):
        with SessionRegistry.open(url) as registry:
            for i in range(sessions):
                registry.create(str(folder), session_id=f"{prefix}s{i}", agent=agent)

    def pages(client: Client) -> float:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            client.send("session/list", {})
            client.line()
            times.append((time.perf_counter() - started) * 1000)
        return _percentile(times, 0.5)

    results = {}
    for name, cmd in (
        ("serve", [sys.executable, "-m", "registry.cli", "serve", "--store", served]),
        ("proxy", command),
    ):
        client = Client(cmd)
        client.send("initialize", {"protocolVersion": 1})
        client.line()
        results[name] = pages(client)
        client.close()
    results["ratio"] = results["proxy"] / results["serve"]
    return results


def with_history(folder: Path, direct: list[str], sessions: int, pings: int) -> dict[str, dict[str, Any]]:
    """The proxy recording as ``claude-code`` with a HOME holding a Claude Code history of ``sessions`` sessions
    (``benchmarks/import_agents.generate``, 20 turns each): spawn to the first ``session/list`` answer (which
    waits for the import, within its bound) and what it says; then, on a fresh store, round trips sent from the
    moment ``initialize`` is answered, while the import runs on the proxy's history thread, beside the agent alone
    in the same run (the added latency per relayed message then includes what a relayed line waits on while the
    import holds the interpreter)."""
    from benchmarks.import_agents import generate  # noqa: PLC0415

    home = folder / "history-home"
    generate(home / ".claude", sessions, 20)
    env = {**os.environ, "HOME": str(home)}
    stores = iter(range(100))

    def proxied() -> list[str]:
        return [
            *_PROXY,
            "--store",
            f"sqlite://{folder}/history-{next(stores)}.db",
            "--agent",
            "claude-code",
            "--",
            *direct,
        ]

    started = time.perf_counter()
    client = Client(proxied(), env)
    client.send("initialize", {"protocolVersion": 1})
    client.line()
    client.send("session/list", {})
    page = json.loads(client.line())["result"]
    first = time.perf_counter() - started
    client.close()
    results: dict[str, dict[str, Any]] = {
        "history_first_list": {
            "sessions": sessions,
            "seconds": first,
            "history": page["_meta"]["acp-session-registry/proxy"]["history"],
            "listed": len(page["sessions"]),
        }
    }
    alone = Client(direct)
    alone.send("initialize", {"protocolVersion": 1})
    alone.line()
    direct_times = round_trips(alone, pings)
    alone.close()
    client = Client(proxied(), env)
    client.send("initialize", {"protocolVersion": 1})
    client.line()
    during = round_trips(client, pings)
    client.close()
    for q in (0.5, 0.99):
        d, p = _percentile(direct_times, q), _percentile(during, q)
        results[f"round_trip_during_import_p{round(q * 100)}_ms"] = {
            "direct": d,
            "proxy": p,
            "added_per_message": (p - d) / 2,
        }
    return results


def start_time(command: list[str]) -> float:
    started = time.perf_counter()
    client = Client(command)
    client.send("initialize", {"protocolVersion": 1})
    client.line()
    elapsed = time.perf_counter() - started
    client.close()
    return elapsed


def run(args: argparse.Namespace) -> dict[str, Any]:
    folder, direct = bench_agent("proxy-relay-")
    stores = iter(range(1_000_000))

    def proxied() -> list[str]:
        store = f"sqlite://{folder}/s{next(stores)}.db"
        return [sys.executable, "-m", "registry.cli", "proxy", "--store", store, "--", *direct]

    results: dict[str, Any] = {}

    def both(name: str, measure: Callable[[Client], Any]) -> tuple[Any, Any]:
        values = []
        for command in (direct, proxied()):
            client = Client(command)
            client.send("initialize", {"protocolVersion": 1})
            client.line()
            values.append(measure(client))
            client.close()
        return values[0], values[1]

    rt_direct, rt_proxy = both("round trip", lambda c: round_trips(c, args.pings))
    for q in (0.5, 0.99):
        key = f"p{round(q * 100)}"
        d, p = _percentile(rt_direct, q), _percentile(rt_proxy, q)
        results[f"round_trip_{key}_ms"] = {"direct": d, "proxy": p, "added_per_message": (p - d) / 2}
    ow_direct, ow_proxy = both("one way", lambda c: one_way(c, args.paced))
    for q in (0.5, 0.99):
        key = f"p{round(q * 100)}"
        d, p = _percentile(ow_direct, q), _percentile(ow_proxy, q)
        results[f"one_way_{key}_ms"] = {"direct": d, "proxy": p, "added": p - d}
    fl_direct, fl_proxy = both("flood", lambda c: flood(c, args.flood))
    results["notifications_per_s"] = {"direct": fl_direct, "proxy": fl_proxy, "ratio": fl_proxy / fl_direct}
    results["list_first_page_ms"] = list_pages(folder, args.sessions, args.pings // 4, proxied, both)
    results.update(starts(folder, direct, args.starts))
    if args.history:
        results.update(with_history(folder, direct, args.history, args.pings))
    return results


def starts(folder: Path, direct: list[str], count: int) -> dict[str, dict[str, float]]:
    """Spawn to the ``initialize`` answer, the agent alone and behind the proxy, runs interleaved (direct, proxy,
    direct, ...) so that a load that comes and goes falls on both: medians and p90s, the difference and the
    ratio. Two agents: the small bench agent (stdlib only) and ``acp-registry serve`` (a store of its own). The
    proxy's store is one per agent, made by an untimed first run (a proxy's store outlives its runs); so is
    serve's."""
    served = [sys.executable, "-m", "registry.cli", "serve", "--store", f"sqlite://{folder}/start-served.db"]
    compile_bytecode()
    results = {}
    for name, agent in (("start_s", direct), ("start_serve_s", served)):
        proxied = [sys.executable, "-m", "registry.cli", "proxy", "--store", f"sqlite://{folder}/{name}.db", "--"]
        start_time([*proxied, *agent])
        alone: list[float] = []
        behind: list[float] = []
        for _ in range(count):
            alone.append(start_time(agent))
            behind.append(start_time([*proxied, *agent]))
        d, p = statistics.median(alone), statistics.median(behind)
        d90, p90 = _percentile(alone, 0.9), _percentile(behind, 0.9)
        results[name] = {
            "direct": d,
            "proxy": p,
            "added": p - d,
            "ratio": p / d,
            "direct_p90": d90,
            "proxy_p90": p90,
            "added_p90": p90 - d90,
        }
    return results


def publish(
    results: dict[str, Any], json_file: str | None, *, width: int, digits: int, hidden: tuple[str, ...] = ()
) -> int:
    """Prints a line per figure (its floats to ``digits`` places), except the ``hidden`` ones, and writes every
    figure to ``json_file`` when one is named: what the proxy's benchmarks end with."""
    for name, figures in results.items():
        if name in hidden:
            continue
        shown = figures
        if isinstance(figures, dict):
            shown = ", ".join(
                f"{k} {v:,.{digits}f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
            )
        print(f"{name:{width}} {shown}")
    if json_file:
        Path(json_file).write_text(json.dumps(results, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=2000)
    parser.add_argument("--flood", type=int, default=200_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--json", default=None, metavar="FILE")
    parser.add_argument("--only-start", action="store_true", help="measure only the start time")
    parser.add_argument("--history", type=int, default=0, metavar="N", help="also: with an N-session history")
    parser.add_argument("--only-history", action="store_true", help="measure only --history's figures")
    args = parser.parse_args(argv)
    if args.only_history:
        folder, direct = bench_agent("proxy-history-")
        results = with_history(folder, direct, args.history or 1000, args.pings)
    elif args.only_start:
        folder, direct = bench_agent("proxy-start-")
        results = starts(folder, direct, args.starts)
    else:
        results = run(args)
    return publish(results, args.json, width=28, digits=3)


if __name__ == "__main__":
    sys.exit(main())
