"""The official ACP SDK clients drive a proxied real agent end to end.

The TypeScript SDK (``@agentclientprotocol/sdk`` 2.4 from the agents cache, run by Node) and the Python SDK
(``agent-client-protocol``, the ``acp`` package of the dev extra) each play the editor in front of
``acp-registry proxy``: initialize, session/new, a prompt answered with ``end_turn``, ``session/list`` walked
page by page with its cursor (the proxy serves pages of 2), a tampered cursor refused with -32602,
``session/delete``, and the list again. Both SDKs parse every answer with their own schema, so a malformed
answer from the proxy fails here. Run with ``make test-agents``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
from acp import RequestError, spawn_agent_process, text_block
from acp.interfaces import Client
from acp.schema import AgentMessageChunk, TextContentBlock

from tests.agents import peers
from tests.agents.llm_stub import REPLY_PREFIX
from tests.agents.scene import scene

pytestmark = pytest.mark.real_agents

SCRIPT = Path(__file__).resolve().parent / "agents" / "ts_sdk_client.mjs"
PROMPTS = ["First task", "Second task", "Third task"]


def _sdk_entry() -> Path:
    package = peers.TS_SDK.folder / "node_modules" / "@agentclientprotocol" / "sdk"
    exports = json.loads((package / "package.json").read_text())["exports"]["."]
    return package / str(exports["import"])


def typescript_client(node: str, config: dict[str, Any], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """What ``ts_sdk_client.mjs`` observed, driving ``config["command"]`` as the editor."""
    argv = [node, str(SCRIPT), str(_sdk_entry()), json.dumps(config)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_typescript_sdk_client_through_the_proxy_in_front_of_fast_agent(tmp_path: Path) -> None:
    peers.TS_SDK.require()
    node = peers.node()
    if node is None:
        pytest.skip("no node to run the TypeScript SDK client (run `make agents`)")
    with scene(tmp_path, peers.FAST_AGENT) as world:
        config = {
            "command": peers.proxy_command(world.store_url, peers.FAST_AGENT, "--page-size", "2"),
            "cwd": str(world.project),
            "env": world.env,
            "prompts": PROMPTS,
            "authenticate": None,
        }
        report = typescript_client(node, config, world.env, world.project)

    caps = report["init"]["agentCapabilities"]["sessionCapabilities"]
    assert {"list", "delete"} <= set(caps)
    made = [s["sessionId"] for s in report["sessions"]]
    assert len(set(made)) == 3
    assert [(s["stopReason"], s["reply"]) for s in report["sessions"]] == [("end_turn", p) for p in PROMPTS]

    pages = report["pagesBefore"]
    assert [len(p["sessions"]) for p in pages] == [2, 1]
    assert "nextCursor" in pages[0] and "nextCursor" not in pages[-1]
    walked = [s["sessionId"] for p in pages for s in p["sessions"]]
    assert walked == list(reversed(made))  # newest activity first, each once
    titles = {s["sessionId"]: s.get("title") for p in pages for s in p["sessions"]}
    assert [titles[sid] for sid in made] == PROMPTS
    assert report["badCursor"]["code"] == -32602

    assert report["deleteResult"] == {}
    after = [s["sessionId"] for p in report["pagesAfter"] for s in p["sessions"]]
    assert after == [sid for sid in reversed(made) if sid != report["deleted"]]
    infos = [u for u in report["updates"] if u["kind"] == "session_info_update" and "title" in u["update"]]
    assert sorted(u["sessionId"] for u in infos) == sorted(made)  # each session's title reached the client once
    assert report["exitCode"] == 0


class _Client:
    """The Python SDK's client side: keeps the updates, cancels permission requests."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return {"outcome": {"outcome": "cancelled"}}

    def on_connect(self, conn: Any) -> None:
        pass

    def reply(self, session_id: str) -> str:
        return "".join(
            u.content.text
            for s, u in self.updates
            if s == session_id and isinstance(u, AgentMessageChunk) and isinstance(u.content, TextContentBlock)
        )


async def _python_sdk_session(world: Any) -> None:
    client = _Client()
    command = peers.proxy_command(world.store_url, peers.CLAUDE_AGENT_ACP, "--page-size", "2")
    async with spawn_agent_process(
        cast(Client, client), command[0], *command[1:], env=world.env, cwd=world.project
    ) as (conn, proc):
        init = await asyncio.wait_for(conn.initialize(protocol_version=1), 120)
        caps = init.agent_capabilities
        assert caps is not None and caps.session_capabilities is not None
        assert caps.session_capabilities.list is not None and caps.session_capabilities.delete is not None
        made = []
        for text in PROMPTS:
            sid = (await conn.new_session(cwd=str(world.project), mcp_servers=[])).session_id
            answer = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(text)]), 90)
            assert answer.stop_reason == "end_turn"
            assert client.reply(sid).startswith(REPLY_PREFIX + text)
            made.append(sid)

        walked, cursor, pages = [], None, 0
        while True:
            page = await conn.list_sessions(cursor=cursor)
            pages += 1
            assert len(page.sessions) <= 2
            walked += [s.session_id for s in page.sessions]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 2
        assert walked == list(reversed(made))
        with pytest.raises(RequestError) as refused:
            await conn.list_sessions(cursor=cursor_of_another_filter(await conn.list_sessions(cwd=str(world.project))))
        assert refused.value.code == -32602

        # The SDK 0.12 client has no method for session/delete; the request is sent as it is.
        assert await conn._conn.send_request("session/delete", {"sessionId": made[0]}) == {}
        listed = await conn.list_sessions()
        assert [s.session_id for s in listed.sessions] == list(reversed(made[1:]))
        assert listed.next_cursor is None
    assert proc.returncode == 0


def cursor_of_another_filter(page: Any) -> str:
    """A cursor the cwd-filtered walk gave, to be used without that filter (bound to the filter: refused)."""
    assert page.next_cursor is not None
    return str(page.next_cursor)


def test_python_sdk_client_through_the_proxy_in_front_of_claude_agent_acp(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        asyncio.run(_python_sdk_session(world))
        # The delete was forwarded: claude-agent-acp removed its own transcript.
        transcripts = {p.stem for p in (world.home / ".claude" / "projects").glob("*/*.jsonl")}
        assert len(transcripts) == 2
