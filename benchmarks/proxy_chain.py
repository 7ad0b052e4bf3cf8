"""What being one link of a conductor's chain costs the proxy: its CPU per relayed message, chain vs standalone.

    python -m benchmarks.proxy_chain [--flood 50000] [--pings 2000] [--rounds 3] [--json out.json]

The proxy's own CPU time (user + system, from ``/proc/<pid>/stat``, read before and after each part) is what is
compared - not wall time, which the shared machine makes noisy, and not the peers' CPU. Each round runs both
setups, in alternating order:

- **standalone**: ``acp-registry proxy -- AGENT``, the agent a small process that answers pings and floods
  ``session/update`` notifications (pre-encoded), the benchmark the client on the proxy's stdio.
- **chain**: ``acp-registry proxy`` with no command, the benchmark the conductor (``@thinkwell/conductor``'s form):
  it writes the successor's notifications already wrapped in ``_proxy/successor/notification`` and answers the
  proxy's ``_proxy/successor/request`` envelopes itself, so the proxy does everything a chain link does and
  nothing more.

Parts: a flood of ``--flood`` notifications (about 200 bytes each) read to the last one, and ``--pings`` requests
(``_bench/ping``) answered at once, one at a time. Figures: CPU microseconds per notification and per round trip
in each setup, and the chain/standalone ratio per round (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from benchmarks.proxy_relay import Client, bench_agent

_TICK = os.sysconf("SC_CLK_TCK")
_NOTIFICATION = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": "x" * 120}}}


def _cpu(pid: int) -> float:
    """Seconds of CPU the process has used (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _initialize(client: Client, chain: bool) -> None:
    params: dict[str, Any] = {"protocolVersion": 1}
    if chain:
        params["_meta"] = {"proxy": True}
    client.send("initialize", params)
    if chain:  # the proxy forwards it to its successor: the conductor (us) answers for the agent
        envelope = json.loads(client.line())
        assert envelope["method"] == "_proxy/successor/request", envelope
        _answer(client, envelope["id"], {"protocolVersion": 1, "agentInfo": {"name": "bench-agent"}})
    while "result" not in json.loads(client.line()):
        pass


def _answer(client: Client, request_id: Any, result: Any) -> None:
    client._in.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")


def flood(client: Client, count: int, chain: bool) -> float:
    """The proxy's CPU seconds to relay ``count`` notifications from the agent to the client."""
    before = _cpu(client.proc.pid)
    if chain:
        inner = {"method": "session/update", "params": _NOTIFICATION}
        line = json.dumps({"jsonrpc": "2.0", "method": "_proxy/successor/notification", "params": inner}).encode()
        # Written from a thread: the proxy writes while it reads, and a full pipe each way would block both.
        writer = threading.Thread(target=client._in.write, args=((line + b"\n") * count,))
        writer.start()
    else:
        client.send("_bench/flood", {"count": count})
    seen, answered = 0, chain  # standalone, the flood request's answer comes after the last notification
    while seen < count or not answered:
        for line in client.lines():
            if b"session/update" in line:
                seen += 1
            else:
                answered = True
    if chain:
        writer.join()
    return _cpu(client.proc.pid) - before


def pings(client: Client, count: int, chain: bool) -> float:
    """The proxy's CPU seconds for ``count`` requests relayed to the agent and answered, one at a time."""
    before = _cpu(client.proc.pid)
    for _ in range(count):
        client.send("_bench/ping")
        if chain:
            envelope = json.loads(client.line())
            _answer(client, envelope["id"], {})
        client.line()
    return _cpu(client.proc.pid) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flood", type=int, default=50_000)
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    folder, direct = bench_agent("proxy-chain-")
    samples: dict[str, dict[str, list[float]]] = {
        part: {"standalone": [], "chain": []} for part in ("flood_us", "ping_us")
    }
    for round_ in range(args.rounds):
        order = ["standalone", "chain"] if round_ % 2 == 0 else ["chain", "standalone"]
        for setup in order:
            chain = setup == "chain"
            store = f"sqlite://{folder}/{setup}-{round_}.db"
            command = [sys.executable, "-m", "registry.cli", "proxy", "--store", store, "--no-history"]
            client = Client(command if chain else [*command, "--", *direct])
            _initialize(client, chain)
            samples["flood_us"][setup].append(flood(client, args.flood, chain) / args.flood * 1e6)
            samples["ping_us"][setup].append(pings(client, args.pings, chain) / args.pings * 1e6)
            client.close()
    results: dict[str, Any] = {}
    for part, by_setup in samples.items():
        # A round too short for the CPU clock to see the standalone proxy (tiny sizes) has no ratio: said, not failed.
        ratios = [c / s for c, s in zip(by_setup["chain"], by_setup["standalone"], strict=True) if s > 0]
        results[part] = {
            "standalone": [round(v, 1) for v in by_setup["standalone"]],
            "chain": [round(v, 1) for v in by_setup["chain"]],
            "ratio_min": round(min(ratios), 2) if ratios else None,
            "ratio_max": round(max(ratios), 2) if ratios else None,
        }
        print(
            f"{part}: standalone {results[part]['standalone']} chain {results[part]['chain']} "
            f"(CPU us a message in the proxy); chain/standalone {results[part]['ratio_min']}-"
            f"{results[part]['ratio_max']}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
