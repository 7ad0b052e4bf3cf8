"""Adapter for agents built on the official Python SDK (``agent-client-protocol``, 0.12): the SDK surface of the
method table (``registry.acp.methods``).

An SDK agent keeps its own prompt logic and gets its session history from the registry::

    class MyAgent:
        def __init__(self, registry: SessionRegistry) -> None:
            self.sessions = RegistrySessions(registry)

        def on_connect(self, conn: AgentSideConnection) -> None:
            self.sessions.attach(conn)   # the table's routes + live session_info_update pushes

        async def list_sessions(self, cwd=None, cursor=None, **kwargs):
            return await self.sessions.list_sessions(cwd=cwd, cursor=cursor)

``attach`` routes every method the table answers from the registry (``Role.ANSWER`` for ``"sdk"``) that the
agent does not answer itself: the SDK 0.12 has no route for ``session/delete``, ``session/set_title``,
``session/archive``, ``session/unarchive`` or ``session/status``, and routes ``session/fork`` to the agent's
``fork_session`` only when it has one (``RegistrySessions.fork_session`` answers it from the registry for an agent
that wants its own); extension methods (``_registry/rename``) are answered before the agent's ``ext_method`` sees
them. ``session/list`` is always routed from the table, raw: the SDK 0.12's models know no ``archived`` (neither
the filter nor ``SessionInfo.archived``) and would drop it; ``list_sessions`` stays for an agent's own calls.
Params are checked by the table's structs, so errors read as they do from ``serve``. ``attach`` also watches the
SDK's ``session/new``, ``load``, ``resume`` and ``close`` routes to keep the set of sessions open on the
connection (``session/status``), and adds the table's capabilities to the agent's ``initialize`` answer.

The SDK's send path drops ``None`` (``exclude_none``), so a cleared title would go out as "unchanged": ``attach``
therefore pushes the registry's change stream as raw JSON on the connection, where ``null`` survives. Both reach
into the SDK's connection object, checked here so a changed SDK fails loudly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from acp import RequestError
from acp.agent.connection import AgentSideConnection
from acp.router import Route
from acp.schema import ForkSessionResponse, ListSessionsResponse
from pydantic import BaseModel
from reactivex.abc import DisposableBase

from events.errors import RegistryError
from registry.acp.methods import METHODS, Context, Method, Role, capabilities, served
from registry.diffs import SessionNotification
from registry.errors import rpc_error
from registry.service import SessionRegistry

__all__ = ["RegistrySessions", "request_error", "send_session_update"]

log = logging.getLogger(__name__)

_OPENING = ("session/new", "session/load", "session/resume")
# Routed from the table even when the agent has a handler: the SDK 0.12's pydantic models drop ``archived`` from
# the request and from each listed session, so its own route cannot answer the archive filter.
_RAW = frozenset({"session/list"})


def request_error(exc: BaseException) -> RequestError:
    """The SDK's ``RequestError`` for a registry error, with the code ``registry.errors.rpc_error`` chooses."""
    error = rpc_error(exc)
    return RequestError(error.code, error.message, None if error.data is msgspec.UNSET else error.data)


def _raw_connection(conn: AgentSideConnection) -> Any:
    raw = getattr(conn, "_conn", None)
    router = getattr(raw, "_handler", None)
    if raw is None or not hasattr(raw, "send_notification") or not hasattr(router, "_requests"):
        raise RuntimeError("this version of agent-client-protocol is not one the registry adapter knows (0.12.x)")
    return raw


async def send_session_update(conn: AgentSideConnection, notification: SessionNotification) -> None:
    """Send a ``session/update`` with explicit nulls kept (``conn.session_update`` would drop them)."""
    await _raw_connection(conn).send_notification("session/update", msgspec.to_builtins(notification))


class RegistrySessions:
    """The methods the table answers from a registry, for an SDK agent, and the registry's changes pushed to its
    client. ``context`` holds the sessions open on the attached connections (``session/status`` reads it)."""

    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry
        self.context = Context(registry)
        self._subscriptions: list[DisposableBase] = []

    async def answer(self, method: str, params: Any) -> dict[str, Any]:
        """The table's answer to ``method`` (one it answers from the registry); ``RequestError`` with the
        registry's JSON-RPC code otherwise."""
        try:
            return METHODS[method].answer(self.context, params)
        except RegistryError as exc:
            raise request_error(exc) from None

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_meta: Any
    ) -> ListSessionsResponse:
        return ListSessionsResponse.model_validate(await self.answer("session/list", {"cwd": cwd, "cursor": cursor}))

    async def delete_session(self, session_id: str, **_meta: Any) -> dict[str, Any]:
        return await self.answer("session/delete", {"sessionId": session_id})

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **_meta: Any,
    ) -> ForkSessionResponse:
        """``session/fork`` from the registry: for an agent's own ``fork_session`` to call (and then set up
        whatever it keeps per session). Without one, ``attach`` routes the table's."""
        params = {"sessionId": session_id, "cwd": cwd, "additionalDirectories": additional_directories}
        return ForkSessionResponse.model_validate(await self.answer("session/fork", params))

    def capabilities(self) -> dict[str, Any]:
        """The ``agentCapabilities`` entries of the methods this adapter answers; ``attach`` adds them to the
        agent's ``initialize`` answer."""
        return capabilities("sdk", (Role.ANSWER,))

    def attach(self, conn: AgentSideConnection, *, push_updates: bool = True) -> None:
        """Route the table's methods on ``conn`` where the agent has no handler, watch which sessions are open,
        and push every ``session_info_update`` to its client.

        Call it from ``on_connect`` (inside the running event loop). Updates arrive on that loop.
        """
        router = _raw_connection(conn)._handler
        extensions: dict[str, Method] = {}
        for method in served("sdk", (Role.ANSWER,)):
            if method.name.startswith("_"):  # the SDK hands these to ext_method, without the underscore
                extensions[method.name[1:]] = method
                continue
            route = router._requests.get(method.name)
            if route is None or route.func is None or method.name in _RAW:
                router.add_route(Route(method=method.name, func=self._route(method.name), kind="request"))
        if extensions:
            router._request_extensions = self._extensions(extensions, router._request_extensions)
        for name in (*_OPENING, "session/close"):
            route = router._requests.get(name)
            if route is not None and route.func is not None:
                route.func = self._watching(name, route.func)
        initialize = router._requests.get("initialize")
        if initialize is not None and initialize.func is not None:
            initialize.func = self._advertising(initialize.func)
        if push_updates:
            loop = asyncio.get_running_loop()

            def push(notification: SessionNotification) -> None:
                task = loop.create_task(send_session_update(conn, notification))
                task.add_done_callback(_log_failure)

            self._subscriptions.append(self.registry.changes(loop=loop).subscribe(push))

    def _route(self, name: str) -> Callable[[Any], Awaitable[dict[str, Any]]]:
        async def route(params: Any) -> dict[str, Any]:
            return await self.answer(name, params)

        return route

    def _extensions(
        self, table: dict[str, Method], agents: Callable[[str, Any], Awaitable[Any]] | None
    ) -> Callable[[str, Any], Awaitable[Any]]:
        async def extension(name: str, params: Any) -> Any:
            if name in table:
                return await self.answer(table[name].name, params)
            if agents is None:
                raise RequestError.method_not_found(f"_{name}")
            return await agents(name, params)

        return extension

    def _advertising(self, func: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """The agent's ``initialize`` with the capabilities of the methods this adapter answers added (the SDK's
        own models know only some of them, and would drop the rest)."""

        async def initialize(params: Any) -> Any:
            result = await func(params)
            if isinstance(result, BaseModel):
                result = result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
            if isinstance(result, dict):
                agent = result.setdefault("agentCapabilities", {})
                for key, value in self.capabilities().items():
                    if isinstance(value, dict) and isinstance(agent.get(key), dict):
                        agent[key] = {**agent[key], **value}
                    else:
                        agent[key] = value
            return result

        return initialize

    def _watching(self, name: str, func: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """``func`` (the agent's handler of ``name``) that also notes the session it opened or closed."""

        async def watched(params: Any) -> Any:
            result = await func(params)
            if name == "session/new":  # the agent's model, or a plain dict
                session_id = (
                    result.get("sessionId") if isinstance(result, dict) else getattr(result, "session_id", None)
                )
            else:
                session_id = params.get("sessionId") if isinstance(params, dict) else None
            if isinstance(session_id, str):
                if name == "session/close":
                    self.context.close(session_id)
                else:
                    self.context.opened(session_id)
            return result

        return watched

    def close(self) -> None:
        for subscription in self._subscriptions:
            subscription.dispose()
        self._subscriptions.clear()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not push a session update: %s", task.exception())
