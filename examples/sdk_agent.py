"""An agent built on the official ACP Python SDK that keeps its sessions in the registry.

    python examples/sdk_agent.py sqlite:///home/me/sessions.db

It echoes prompts; the registry gives it ``session/list`` (signed cursors, cwd rules, recency order),
``session/delete``, titles taken from the first prompt, and live ``session_info_update`` pushes with explicit
nulls (``_registry/rename`` with ``"title": null`` clears a title, and the client sees ``"title": null``).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import msgspec
from acp import InitializeResponse, NewSessionResponse, PromptResponse, RequestError, run_agent
from acp.agent.connection import AgentSideConnection
from acp.helpers import update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    Implementation,
    ListSessionsResponse,
    SessionCapabilities,
    SessionListCapabilities,
)

from events import TitleSource
from events.errors import RegistryError
from registry import SessionRegistry
from registry.acp.methods import convert_params
from registry.acp.sdk import RegistrySessions, request_error
from registry.commands import prompt_title


class Rename(msgspec.Struct, rename="camel"):
    """``_registry/rename`` params: checked by msgspec, so a bad one is -32602 naming the field."""

    session_id: str
    title: str | None


class EchoAgent:
    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry
        self.sessions = RegistrySessions(registry)
        self.conn: AgentSideConnection | None = None

    def on_connect(self, conn: AgentSideConnection) -> None:
        self.conn = conn
        self.sessions.attach(conn)

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="sdk-echo-agent", version="1"),
        )

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
        if method != "registry/rename":
            raise RequestError.method_not_found(f"_{method}")
        try:
            rename = convert_params(params, Rename)
            self.registry.change_info(rename.session_id, title=rename.title, title_source=TitleSource.USER)
        except RegistryError as exc:
            raise request_error(exc) from None
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def main(url: str) -> None:
    with SessionRegistry.open(url) as registry:
        await run_agent(EchoAgent(registry))  # type: ignore[arg-type]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
