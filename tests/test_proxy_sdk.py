"""The official Python SDK client (``acp.spawn_agent_process``) drives a proxied agent end to end: the scripted
agent (a permission request mid-turn, answered by the SDK), and ``acp-registry serve`` as a real agent with a
``session/list`` of its own (its past sessions are listed through the proxy and load through it)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, cast

from acp import Client, spawn_agent_process, text_block
from acp.schema import AgentMessageChunk, SessionInfoUpdate

from registry.service import SessionRegistry
from tests.proxy_wire import AGENT, ROOT
from tests.waiting import async_wait_until


class SdkClient:
    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permissions = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        self.permissions += 1
        return {"outcome": {"outcome": "cancelled"}}

    def on_connect(self, conn: Any) -> None:
        pass


def _proxy(url: str, *command: str) -> list[str]:
    return [sys.executable, "-m", "registry.cli", "proxy", "--store", url, "--", *command]


def test_the_python_sdk_drives_a_proxied_agent(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"

    async def main() -> None:
        client = SdkClient()
        command = _proxy(url, sys.executable, AGENT)
        async with spawn_agent_process(cast(Client, client), command[0], *command[1:], cwd=ROOT) as (conn, _):
            init = await conn.initialize(protocol_version=1)
            capabilities = init.agent_capabilities
            assert capabilities is not None and capabilities.session_capabilities is not None
            assert capabilities.session_capabilities.list is not None
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            answer = await conn.prompt(session_id=session, prompt=[text_block("permission")])
            assert answer.stop_reason == "end_turn" and client.permissions == 1
            await conn.prompt(session_id=session, prompt=[text_block("title Named by the agent")])
            listed = await conn.list_sessions()
            assert [(s.session_id, s.title) for s in listed.sessions] == [(session, "Named by the agent")]
            titles = [u.title for _, u in client.updates if isinstance(u, SessionInfoUpdate) and u.title is not None]
            assert titles[-1] == "Named by the agent" and titles.count("Named by the agent") == 1

    asyncio.run(main())


def test_the_proxy_in_front_of_serve_lists_its_past_and_loads_it(tmp_path: Path) -> None:
    agent_store = f"sqlite://{tmp_path}/agent.db"
    with SessionRegistry.open(agent_store) as own:  # serve's sessions from before the proxy ran
        own.create(str(tmp_path), session_id="before-1", title="An old session")
        own.record_activity("before-1", messages=2, payload={"prompt": [{"type": "text", "text": "hi"}], "reply": "hi"})
    url = f"sqlite://{tmp_path}/proxy.db"

    async def main() -> None:
        client = SdkClient()
        serve = [sys.executable, "-m", "registry.cli", "serve", "--store", agent_store]
        command = _proxy(url, *serve)
        async with spawn_agent_process(cast(Client, client), command[0], *command[1:], cwd=ROOT) as (conn, _):
            init = await conn.initialize(protocol_version=1)
            assert init.agent_info is not None and init.agent_info.name == "acp-session-registry"

            async def ready() -> Any:
                listed = await conn.list_sessions()
                meta = listed.field_meta
                return listed if meta and meta["acp-session-registry/proxy"]["history"] == "ready" else None

            listed = await async_wait_until(ready, 30, "the agent's history to be read")
            assert [(s.session_id, s.title) for s in listed.sessions] == [("before-1", "An old session")]
            await conn.load_session(cwd=str(tmp_path), session_id="before-1", mcp_servers=[])
            assert any(isinstance(u, AgentMessageChunk) for _, u in client.updates)
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=session, prompt=[text_block("a new turn")])
            listed = await conn.list_sessions()
            assert [s.session_id for s in listed.sessions] == [session, "before-1"]

    asyncio.run(main())
    with SessionRegistry.open(url) as registry:
        ids = {s.session_id for s in registry.list().sessions}
        assert "acp-session-registry:before-1" in ids
