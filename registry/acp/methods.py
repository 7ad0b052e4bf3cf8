"""The ACP method table: every method the library knows, declared once, and the surfaces built from it.

A ``Method`` says a method's ``name``, its ``params`` struct (``registry.acp.params``), the ``capability`` that
advertises it in ``initialize`` (a path in ``agentCapabilities``, or None), its ``handler`` when the registry
answers it, and what each surface does with it (``roles``):

- ``Role.ANSWER``: the table's handler answers it from the registry (``session/list``, ``session/delete``, ...);
- ``Role.OWN``: the surface's own code answers it (``serve``'s echo prompt; an SDK agent's ``new_session``),
  with the params struct the table names;
- ``Role.FORWARD``: a proxy relays it to the agent it fronts (and observes the answer).

The surfaces: ``serve`` (``registry.acp.agent``) binds its own handlers with ``bind``; the SDK adapter
(``registry.acp.sdk``) routes every ``ANSWER`` method the SDK's router lacks; a proxy answers its ``ANSWER``
methods with ``Method.answer`` and forwards the rest. ``capabilities`` derives what a surface advertises. Adding a
method is one ``Method`` entry and one handler.

A handler gets a ``Context``: the registry, the agent the surface fronts (None for ``serve``: its own sessions)
with the mapping between the ids the client sees and the store's (``X:<native id>`` for agent ``X``), and the
set of sessions open on the surface's connections. ``SessionRegistry.handle`` answers with a context of its own
(no agent, nothing open). Errors carry their JSON-RPC code; ``registry.errors.rpc_error`` maps them.

This module never imports the ``SessionRegistry`` facade: it needs only ``SessionMethods``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from events.model import TitleSource
from registry.acp.params import (
    CancelParams,
    DeleteParams,
    InitializeParams,
    ListParams,
    NewSessionParams,
    PromptParams,
    RenameParams,
    SessionRef,
    convert_params,
)
from registry.commands import check_session_id
from registry.errors import MethodNotFound
from registry.model import ListSessionsResult, SessionInfo, SessionState

__all__ = [
    "METHODS",
    "Capability",
    "Context",
    "Method",
    "Role",
    "SessionMethods",
    "Surface",
    "bind",
    "capabilities",
    "handle",
    "served",
]

Surface = Literal["serve", "sdk", "proxy"]
Result = dict[str, Any]


class SessionMethods(Protocol):
    """What the table's handlers need of a registry (``SessionRegistry`` has it)."""

    def list(self, cwd: str | None = None, cursor: str | None = None) -> ListSessionsResult: ...

    def delete(self, session_id: str, *, reason: str | None = None) -> None: ...

    def change_info(
        self, session_id: str, *, title: str | UnsetType | None = UNSET, title_source: TitleSource = TitleSource.USER
    ) -> SessionInfo: ...

    def state(self, session_id: str) -> SessionState | None: ...


class Role(enum.Enum):
    """What a surface does with a method."""

    ANSWER = "answer"  # the table's handler answers it from the registry
    OWN = "own"  # the surface's own code answers it
    FORWARD = "forward"  # a proxy relays it to its agent


@dataclass(frozen=True, slots=True)
class Capability:
    """Where advertising a method goes in ``agentCapabilities``: ``("sessionCapabilities", "list")`` -> ``{}``,
    ``("loadSession",)`` -> ``true``."""

    path: tuple[str, ...]

    @property
    def value(self) -> Any:
        return {} if self.path[0] == "sessionCapabilities" else True


@dataclass
class Context:
    """What a handler may use: the registry, the agent a surface fronts, and the sessions open on it.

    ``agent`` None: the registry's own sessions (``serve``), ids shown as stored. ``agent`` ``X``: a proxy in front
    of ``X``, whose sessions are stored as ``X:<native id>`` and shown with their native ids. ``open_sessions``
    holds the wire ids live on this surface (created, loaded, resumed or forked, and not closed); a surface
    shares one set between its connections when "open" is to mean "in this process". A proxy overrides
    ``close`` to close a session at its agent too before the registry archives it.
    """

    registry: SessionMethods
    agent: str | None = None
    open_sessions: set[str] = field(default_factory=set)

    def store_id(self, wire_id: str) -> str:
        """The store's id of a session the client names ``wire_id``."""
        return wire_id if self.agent is None else f"{self.agent}:{wire_id}"

    def wire_id(self, store_id: str) -> str:
        """The id the client sees for a stored session."""
        return store_id if self.agent is None else store_id.removeprefix(f"{self.agent}:")

    def opened(self, wire_id: str) -> None:
        self.open_sessions.add(wire_id)

    def close(self, wire_id: str) -> None:
        self.open_sessions.discard(wire_id)


Handler = Callable[[Context, Any], Result]


@dataclass(frozen=True, slots=True)
class Method:
    """One ACP method: its params struct, capability, handler (None: each surface's own) and roles."""

    name: str
    params: type[Any]
    roles: Mapping[Surface, Role]
    handler: Handler | None = None
    capability: Capability | None = None
    notification: bool = False

    def role(self, surface: Surface) -> Role | None:
        """What ``surface`` does with this method (None: it does not serve it: -32601)."""
        return self.roles.get(surface)

    def convert(self, params: Any) -> Any:
        """``params`` as this method's struct; ``InvalidParams`` (-32602) naming the field otherwise."""
        return convert_params(params, self.params)

    def answer(self, context: Context, params: Any) -> Result:
        """The result of this method for ``params``, from the registry in ``context``."""
        if self.handler is None:
            raise TypeError(f"{self.name} has no handler in the table: each surface answers it itself")
        return self.handler(context, self.convert(params))


# -- the handlers ---------------------------------------------------------------------------------------------


def _list(context: Context, request: ListParams) -> Result:
    result: Result = msgspec.to_builtins(context.registry.list(cwd=request.cwd, cursor=request.cursor))
    if context.agent is not None:
        for info in result["sessions"]:
            info["sessionId"] = context.wire_id(info["sessionId"])
    return result


def _delete(context: Context, request: DeleteParams) -> Result:
    wire_id = check_session_id(request.session_id)
    context.registry.delete(context.store_id(wire_id))
    context.close(wire_id)
    return {}


def _rename(context: Context, request: RenameParams) -> Result:
    store_id = context.store_id(check_session_id(request.session_id))
    context.registry.change_info(store_id, title=request.title, title_source=TitleSource.USER)
    return {}


# -- the table ------------------------------------------------------------------------------------------------

_AGENTS_OWN: Final[Mapping[Surface, Role]] = {"serve": Role.OWN, "sdk": Role.OWN, "proxy": Role.FORWARD}
_REGISTRY: Final[Mapping[Surface, Role]] = {"serve": Role.ANSWER, "sdk": Role.ANSWER, "proxy": Role.ANSWER}


def _session(name: str) -> Capability:
    return Capability(("sessionCapabilities", name))


METHODS: Final[Mapping[str, Method]] = {
    method.name: method
    for method in (
        Method("initialize", InitializeParams, _AGENTS_OWN),
        Method("session/new", NewSessionParams, _AGENTS_OWN),
        Method("session/load", SessionRef, _AGENTS_OWN, capability=Capability(("loadSession",))),
        Method("session/resume", SessionRef, _AGENTS_OWN, capability=_session("resume")),
        Method("session/close", SessionRef, _AGENTS_OWN, capability=_session("close")),
        Method("session/prompt", PromptParams, _AGENTS_OWN),
        Method("session/cancel", CancelParams, _AGENTS_OWN, notification=True),
        Method("session/list", ListParams, _REGISTRY, _list, _session("list")),
        Method("session/delete", DeleteParams, _REGISTRY, _delete, _session("delete")),
        Method("_registry/rename", RenameParams, _REGISTRY, _rename),
    )
}


# -- surfaces -------------------------------------------------------------------------------------------------


def served(surface: Surface, roles: Iterable[Role] = (Role.ANSWER, Role.OWN)) -> list[Method]:
    """The methods ``surface`` serves with one of ``roles``, in table order."""
    wanted = set(roles)
    return [method for method in METHODS.values() if method.role(surface) in wanted]


def capabilities(surface: Surface, roles: Iterable[Role] = (Role.ANSWER, Role.OWN)) -> Result:
    """The ``agentCapabilities`` that advertise the methods ``surface`` serves with ``roles``: ``loadSession``
    and the ``sessionCapabilities`` entries. A proxy adds those of the methods it forwards as its agent has them."""
    advertised: Result = {"sessionCapabilities": {}}
    for method in served(surface, roles):
        if method.capability is not None:
            *parents, key = method.capability.path
            node = advertised
            for parent in parents:
                node = node.setdefault(parent, {})
            node[key] = method.capability.value
    return advertised


def bind(
    surface: Surface, context: Context, own: Mapping[str, Callable[[Any], Result]]
) -> dict[str, Callable[[Any], Result]]:
    """Each method ``surface`` serves, as a function of raw params: ``ANSWER`` ones answered by the table in
    ``context``, ``OWN`` ones by ``own[name]`` with the converted params struct. ``own`` must implement exactly
    the surface's ``OWN`` methods (a forgotten or a stray one is a ``ValueError`` when the surface starts)."""
    owned = {method.name for method in served(surface, (Role.OWN,))}
    if set(own) != owned:
        raise ValueError(f"{surface} must implement {sorted(owned)}; it has {sorted(own)}")
    bound: dict[str, Callable[[Any], Result]] = {}
    for method in served(surface):
        if method.role(surface) is Role.ANSWER:
            bound[method.name] = _answering(method, context)
        else:
            bound[method.name] = _owning(method, own[method.name])
    return bound


def _answering(method: Method, context: Context) -> Callable[[Any], Result]:
    return lambda params: method.answer(context, params)


def _owning(method: Method, handler: Callable[[Any], Result]) -> Callable[[Any], Result]:
    return lambda params: handler(method.convert(params))


def handle(registry: SessionMethods, method: str, params: Any = None) -> Result:
    """Answer an ACP request from ``registry`` alone (``SessionRegistry.handle``): any method the table answers
    from the registry, as no connection (no agent, nothing open); ``MethodNotFound`` for any other."""
    entry = METHODS.get(method) if isinstance(method, str) else None
    if entry is None or entry.handler is None:
        raise MethodNotFound(method)
    return entry.answer(Context(registry), params)
