"""ACP v2 through the proxy with the real thing on both sides: the official TypeScript SDK's v2 client (its
``/experimental/v2/unstable`` entry point) as the editor, claude-agent-acp 0.101 (which answers a v2 client in the
v2 draft's shape) behind ``acp-registry proxy``, offline against the LLM stub. The SDK parses every answer with its
own v2 schema, so the proxy's additions must be where v2 has them. Run with ``make test-agents``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agents import peers
from tests.agents.llm_stub import REPLY_PREFIX
from tests.agents.scene import scene

pytestmark = pytest.mark.real_agents

SCRIPT = Path(__file__).resolve().parent / "agents" / "ts_sdk_v2_client.mjs"


def _v2_entry() -> Path:
    package = peers.TS_SDK.folder / "node_modules" / "@agentclientprotocol" / "sdk"
    exports = json.loads((package / "package.json").read_text())["exports"]["./experimental/v2/unstable"]
    return package / str(exports["import"])


def test_the_typescript_sdks_v2_client_through_the_proxy_in_front_of_claude_agent_acp(tmp_path: Path) -> None:
    peers.TS_SDK.require()
    node = peers.node()
    if node is None:
        pytest.skip("no node to run the TypeScript SDK client (run `make agents`)")
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        config = {
            "command": peers.proxy_command(world.store_url, peers.CLAUDE_AGENT_ACP),
            "cwd": str(world.project),
            "env": world.env,
            "prompt": "Plan the v2 move",
        }
        argv = [node, str(SCRIPT), str(_v2_entry()), json.dumps(config)]
        done = subprocess.run(
            argv, capture_output=True, text=True, env=world.env, cwd=world.project, timeout=240, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        report: dict[str, Any] = json.loads(done.stdout)
        with world.registry() as registry:
            state = registry.state(f"claude-code:{report['sessionId']}")

    init = report["init"]
    assert report["protocolVersion"] == init["protocolVersion"] == 2  # the agent answered in v2, through the proxy
    assert init["info"]["name"] == "@agentclientprotocol/claude-agent-acp"
    assert {"delete", "title", "archive", "status"} <= set(init["capabilities"]["session"])
    assert init["_meta"]["acp-session-registry/proxy"]["agent"] == "claude-code"
    assert "acp-registry proxy: recording as agent 'claude-code' (from info)" in done.stderr
    assert report["reply"].startswith(REPLY_PREFIX + "Plan the v2 move") and report["stopReason"] == "end_turn"
    sid = report["sessionId"]
    assert [s["sessionId"] for s in report["listed"]["result"]["sessions"]] == [sid]
    assert report["titled"] == {"result": {"title": "Named in v2"}}
    assert report["status"] == {"result": {"status": "open"}}
    assert report["archived"] == {"result": {}}
    (archived,) = report["listedArchived"]["result"]["sessions"]
    assert (archived["sessionId"], archived["title"], archived["archived"]) == (sid, "Named in v2", True)
    assert report["exitCode"] == 0
    assert state is not None and state.messages == 2 and state.title == "Named in v2" and state.archived
