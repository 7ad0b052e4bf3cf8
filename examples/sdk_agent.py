"""An agent built on the official ACP Python SDK that keeps its sessions in the registry.

    python examples/sdk_agent.py sqlite:///home/me/sessions.db

It echoes prompts and implements only ``initialize``, ``session/new``, ``session/prompt`` and ``list_sessions``;
``RegistrySessions.attach`` gives it the rest of the registry's method table - ``session/delete``,
``session/set_title``, ``session/archive`` / ``unarchive`` (and ``session/list``'s ``archived``),
``session/status``, ``session/fork``, ``_registry/rename`` (``"title": null`` clears) - advertised in its
``initialize`` answer, plus live ``session_info_update`` pushes with explicit nulls.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from acp import InitializeResponse, NewSessionResponse, PromptResponse, RequestError, run_agent
from acp.agent.connection import AgentSideConnection
from acp.helpers import update_agent_message_text
from acp.schema import Implementation, ListSessionsResponse

from events import TitleSource
from events.errors import RegistryError
from registry import SessionRegistry
from registry.acp.sdk import RegistrySessions, request_error
from registry.commands import prompt_title


class EchoAgent:
    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry
        self.sessions = RegistrySessions(registry)
        self.conn: AgentSideConnection | None = None

    def on_connect(self, conn: AgentSideConnection) -> None:
        self.conn = conn
        self.sessions.attach(conn)

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        # attach() adds the capabilities of the methods the registry answers (list, delete, ...) to this.
        return InitializeResponse(protocol_version=1, agent_info=Implementation(name="sdk-echo-agent", version="1"))

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        try:
            info = self.registry.create(cwd)
        except RegistryError as exc:
            raise request_error(exc) from None  # -32602 naming the field, as the registry says
        return NewSessionResponse(session_id=info.session_id)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        return await self.sessions.list_sessions(cwd=cwd, cursor=cursor)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        assert self.conn is not None
        await self.conn.session_update(session_id, update_agent_message_text(text))
        first = (state := self.registry.state(session_id)) is not None and state.messages == 0
        self.registry.record_activity(session_id, messages=2)
        title = prompt_title(text)  # the title rule every way in shares
        if first and title is not None:
            self.registry.change_info(session_id, title=title, title_source=TitleSource.PROMPT)
        return PromptResponse(stop_reason="end_turn")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")  # attach() answers the registry's own (_registry/rename)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def main(url: str) -> None:
    with SessionRegistry.open(url) as registry:
        await run_agent(EchoAgent(registry))  # type: ignore[arg-type]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
