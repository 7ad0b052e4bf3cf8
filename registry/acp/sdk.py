"""Adapter for agents built on the official Python SDK (``agent-client-protocol``, 0.12).

An SDK agent keeps its own prompt logic and gets its session history from the registry::

    class MyAgent:
        def __init__(self, registry: SessionRegistry) -> None:
            self.sessions = RegistrySessions(registry)

        def on_connect(self, conn: AgentSideConnection) -> None:
            self.sessions.attach(conn)   # session/delete route + live session_info_update pushes

        async def list_sessions(self, cwd=None, cursor=None, **kwargs):
            return await self.sessions.list_sessions(cwd=cwd, cursor=cursor)

Two gaps of the SDK 0.12 it fills: it has no ``session/delete`` route (``attach`` adds one that answers from
the registry), and its send path drops ``None`` (``exclude_none``), so a cleared title would go out as
"unchanged". ``attach`` therefore pushes the registry's change stream as raw JSON on the connection, where
``null`` survives. Both reach into the SDK's connection object, checked here so a changed SDK fails loudly.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
from acp import RequestError
from acp.agent.connection import AgentSideConnection
from acp.router import Route
from acp.schema import ListSessionsResponse
from reactivex.abc import DisposableBase

from events.errors import RegistryError
from registry.changes import SessionNotification
from registry.errors import rpc_error
from registry.service import SessionRegistry

__all__ = ["RegistrySessions", "request_error", "send_session_update"]

log = logging.getLogger(__name__)


def request_error(exc: BaseException) -> RequestError:
    """The SDK's ``RequestError`` for a registry error, with the code ``registry.errors.rpc_error`` chooses."""
    error = rpc_error(exc)
    return RequestError(error.code, error.message, None if error.data is msgspec.UNSET else error.data)


def _raw_connection(conn: AgentSideConnection) -> Any:
    raw = getattr(conn, "_conn", None)
    if raw is None or not hasattr(raw, "send_notification") or not hasattr(raw, "_handler"):
        raise RuntimeError("this version of agent-client-protocol is not one the registry adapter knows (0.12.x)")
    return raw


async def send_session_update(conn: AgentSideConnection, notification: SessionNotification) -> None:
    """Send a ``session/update`` with explicit nulls kept (``conn.session_update`` would drop them)."""
    await _raw_connection(conn).send_notification("session/update", msgspec.to_builtins(notification))


class RegistrySessions:
    """``session/list`` and ``session/delete`` answered by a registry, and its changes pushed to the client."""

    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry
        self._subscriptions: list[DisposableBase] = []

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_meta: Any
    ) -> ListSessionsResponse:
        try:
            result = self.registry.handle("session/list", {"cwd": cwd, "cursor": cursor})
        except RegistryError as exc:
            raise request_error(exc) from None
        return ListSessionsResponse.model_validate(result)

    async def delete_session(self, session_id: str, **_meta: Any) -> dict[str, Any]:
        try:
            return self.registry.handle("session/delete", {"sessionId": session_id})
        except RegistryError as exc:
            raise request_error(exc) from None

    def attach(self, conn: AgentSideConnection, *, push_updates: bool = True) -> None:
        """Serve ``session/delete`` on ``conn`` and push every ``session_info_update`` to its client.

        Call it from ``on_connect`` (inside the running event loop). Updates arrive on that loop.
        """
        raw = _raw_connection(conn)
        router = raw._handler
        if "session/delete" not in getattr(router, "_requests", {}):

            async def delete(params: Any) -> dict[str, Any]:
                session_id = params.get("sessionId") if isinstance(params, dict) else None
                if not isinstance(session_id, str):
                    raise RequestError.invalid_params({"reason": "sessionId must be a string"})
                return await self.delete_session(session_id)

            router.add_route(Route(method="session/delete", func=delete, kind="request"))
        if push_updates:
            loop = asyncio.get_running_loop()

            def push(notification: SessionNotification) -> None:
                task = loop.create_task(send_session_update(conn, notification))
                task.add_done_callback(_log_failure)

            self._subscriptions.append(self.registry.changes(loop=loop).subscribe(push))

    def close(self) -> None:
        for subscription in self._subscriptions:
            subscription.dispose()
        self._subscriptions.clear()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not push a session update: %s", task.exception())
