"""``benchmarks/proxy_capture.py`` at a tiny size, with this checkout as its own baseline: every figure is there
and the proxy relayed every chunk of the turn (the figures themselves are the benchmark's, not a test's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.proxy_relay import Client, paced_latencies

ROOT = Path(__file__).resolve().parent.parent


def test_the_capture_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "capture.json"
    command = [sys.executable, "-m", "benchmarks.proxy_capture", "--baseline", str(ROOT), "--rounds", "1"]
    sizes = ["--pings", "20", "--paced", "20", "--flood", "500", "--json", str(out)]
    done = subprocess.run([*command, *sizes], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    for key in ("added_per_message_p50_ms", "added_per_message_p99_ms", "added_one_way_p50_ms", "added_one_way_p99_ms"):
        assert set(results[key]) == {"before", "after", "direct", "ratio"}
    assert results["chunks_per_s"]["after"] > 0 and results["cpu_us_per_chunk"]["after"] >= 0
    assert results["machine"]["cores"] >= 1 and len(results["runs"]["after"]) == 1


_A_PACED_TURN = """
import json, sys, time
def chunk():
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(time.monotonic_ns())}}
title = {"sessionUpdate": "session_info_update", "title": "Fix the login bug"}
for update in (chunk(), title, chunk()):
    print(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}))
print(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}), flush=True)
sys.stdin.read()
"""


def test_a_paced_turn_counts_the_agents_chunks_and_not_the_registrys_title() -> None:
    """Through the proxy a turn's prompt may bring the registry's own ``session_info_update`` among the agent's
    chunks (a busy machine did): the paced run's reader takes only the chunks' send times."""
    client = Client([sys.executable, "-c", _A_PACED_TURN])
    try:
        latencies = paced_latencies(client, 7)
    finally:
        client.proc.kill()
        client.proc.wait()
    assert len(latencies) == 2 and all(latency >= 0 for latency in latencies), latencies
