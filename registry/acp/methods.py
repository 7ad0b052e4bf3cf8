"""The ACP method table: every method the library knows, declared once, and the surfaces built from it.

A ``Method`` says a method's ``name``, its ``params`` struct (``registry.acp.params``), the ``capability`` that
advertises it in ``initialize`` (a path in ``agentCapabilities``, or None), its ``handler`` when the registry
answers it, and what each surface does with it (``roles``):

- ``Role.ANSWER``: the table's handler answers it from the registry (``session/list``, ``session/delete``, ...);
- ``Role.OWN``: the surface's own code answers it (``serve``'s echo prompt; an SDK agent's ``new_session``),
  with the params struct the table names;
- ``Role.FORWARD``: a proxy relays it to the agent it fronts (and observes the answer);
- ``Role.FORWARD_OR_ANSWER``: a proxy relays it when its agent advertises the method's capability, and answers
  it with the table's handler otherwise (``session/status``: "open" from what the proxy has seen).

The surfaces: ``serve`` (``registry.acp.agent``) binds its own handlers with ``bind``; the SDK adapter
(``registry.acp.sdk``) routes every ``ANSWER`` method the agent does not answer itself; a proxy answers its
``ANSWER`` methods with ``Method.answer`` and relays those ``Method.forwards`` says to. ``capabilities`` derives what
a surface advertises (for a proxy, with its agent's). A session command (``registry.session_commands``: a method and
its row) is an entry here without a line of its own: its params are its method's, its handler the one generic
``_commanding``, which runs it through ``Context.command`` - on the registry, or where a proxy's writes go. Any other
method is one ``Method`` entry, one handler and its params struct; the serve fuzz test then asks for a template of
each.

A handler gets a ``Context``: the registry, the agent the surface fronts (None for ``serve``: its own sessions)
with the mapping between the ids the client sees and the store's (``X:<native id>`` for agent ``X``), and the
set of sessions open on the surface's connections. ``SessionRegistry.handle`` answers with a context of its own
(no agent, nothing open). Errors carry their JSON-RPC code; ``registry.errors.rpc_error`` maps them.

This module never imports the ``SessionRegistry`` facade: it needs only ``SessionMethods`` and ``SessionCommands``.
"""

from __future__ import annotations

import enum
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, Unpack

import msgspec
from msgspec import UNSET

from registry.acp.params import (
    CancelParams,
    ForkParams,
    InitializeParams,
    ListParams,
    NewSessionParams,
    PromptParams,
    SessionParams,
    SessionRef,
    convert_params,
)
from registry.agents import native_id, stored_id
from registry.commands import check_session_id
from registry.errors import InvalidParams, MethodNotFound, SessionNotFound
from registry.filters import Filters
from registry.model import META_QUERY, ListSessionsResult, SessionInfo, SessionState
from registry.session_commands import COMMANDS, SessionCommand, SessionCommands, wire_params

__all__ = [
    "METHODS",
    "Capability",
    "Context",
    "EncodedSessions",
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
    """What the table's handlers read of a registry, and ``fork`` (``SessionRegistry`` has it); the session commands
    are ``registry.session_commands``' (``Context.command``)."""

    def list(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        *,
        query: str | None = None,
        **filters: Unpack[Filters],
    ) -> ListSessionsResult: ...

    def state(self, session_id: str) -> SessionState | None: ...

    def fork(
        self,
        source_id: str,
        cwd: str,
        *,
        additional_directories: Sequence[str] = (),
        session_id: str | None = None,
        agent: str | None = None,
    ) -> SessionInfo: ...


class Role(enum.Enum):
    """What a surface does with a method."""

    ANSWER = "answer"  # the table's handler answers it from the registry
    OWN = "own"  # the surface's own code answers it
    FORWARD = "forward"  # a proxy relays it to its agent
    FORWARD_OR_ANSWER = "forward-or-answer"  # a proxy relays it if its agent advertises it, else answers it


@dataclass(frozen=True, slots=True)
class Capability:
    """Where advertising a method goes in ``agentCapabilities``: ``("sessionCapabilities", "list")`` -> ``{}``,
    ``("loadSession",)`` -> ``true``; ``meta`` names the extensions of the method advertised in its ``_meta``
    (``session/list``'s search: ``{"_meta": {"acp-session-registry/query": {}}}``)."""

    path: tuple[str, ...]
    meta: tuple[str, ...] = ()

    @property
    def value(self) -> Any:
        if self.path[0] != "sessionCapabilities":
            return True
        return {"_meta": {key: {} for key in self.meta}} if self.meta else {}


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
    reports_archived: bool = True
    """ACP: an agent advertising ``sessionCapabilities.archive`` MUST put ``archived`` on every listed session; the
    registry's own rendering (``SessionRegistry.list``, ``handle``, ``list --json``) sends it only when true."""
    encoded: EncodedSessions | None = None
    """Set by a surface that writes its results with msgspec's JSON (``serve``): a page's sessions are then their
    JSON as ``msgspec.Raw``, each encoded once per version of the session, not built and encoded per page."""

    def store_id(self, wire_id: str) -> str:
        """The store's id of a session the client names ``wire_id``."""
        return wire_id if self.agent is None else stored_id(self.agent, wire_id)

    def wire_id(self, store_id: str) -> str:
        """The id the client sees for a stored session."""
        return store_id if self.agent is None else native_id(self.agent, store_id) or store_id

    def opened(self, wire_id: str) -> None:
        self.open_sessions.add(wire_id)

    def close(self, wire_id: str) -> None:
        self.open_sessions.discard(wire_id)

    def command(self, row: SessionCommand, store_id: str, params: Mapping[str, Any]) -> Any:
        """Run a session command on the registry (a proxy runs it where its writes go: ``registry.proxy.surface``)."""
        if not isinstance(self.registry, SessionCommands):
            raise TypeError("this context's registry runs no session commands")
        return row.run(self.registry, store_id, params)


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

    def advertised_in(self, agent_capabilities: Any) -> bool:
        """Whether an agent's ``agentCapabilities`` (as it answered ``initialize``) advertise this method: its
        capability is present and not null or false. A method without a capability is always there."""
        if self.capability is None:
            return True
        node = agent_capabilities
        for key in self.capability.path:
            if not isinstance(node, Mapping):
                return False
            node = node.get(key)
        return node is not None and node is not False

    def forwards(self, surface: Surface, agent_capabilities: Any) -> bool:
        """Whether ``surface`` relays this method to its agent: ``FORWARD``, or ``FORWARD_OR_ANSWER`` when the
        agent advertises it."""
        role = self.role(surface)
        return role is Role.FORWARD or (role is Role.FORWARD_OR_ANSWER and self.advertised_in(agent_capabilities))

    def answer(self, context: Context, params: Any) -> Result:
        """The result of this method for ``params``, from the registry in ``context``."""
        if self.handler is None:
            raise TypeError(f"{self.name} has no handler in the table: each surface answers it itself")
        return self.handler(context, self.convert(params))


# -- the handlers ---------------------------------------------------------------------------------------------


@contextmanager
def _stored(context: Context, wire_id: str) -> Iterator[str]:
    """The store's id of ``wire_id`` (checked); a ``SessionNotFound`` inside names the id the client sent, so
    -32002's ``data.sessionId`` is the requested one."""
    store_id = context.store_id(check_session_id(wire_id))
    try:
        yield store_id
    except SessionNotFound as exc:
        if store_id == wire_id:
            raise
        raise SessionNotFound(wire_id, str(exc).replace(repr(store_id), repr(wire_id))) from None


def _shown(context: Context, shown: Result) -> Result:
    """A listed session's ``SessionInfo`` as builtins, made what the client sees (in place)."""
    if context.reports_archived:
        shown.setdefault("archived", False)
    if context.agent is not None:
        shown["sessionId"] = context.wire_id(shown["sessionId"])
    return shown


class EncodedSessions:
    """The JSON of each listed session as a context shows it (``_shown``), kept by session for the ``SessionInfo``
    it was made from: the registry makes one ``SessionInfo`` per version of a session and hands out that very
    object again (``registry.pages.Renderer``), so a session listed again costs a look-up and an identity test.
    Bounded as the renderer is (the oldest half goes when it is full)."""

    def __init__(self, size: int = 20_000) -> None:
        self._size = size
        self._made: dict[str, tuple[SessionInfo, msgspec.Raw]] = {}

    def page(self, context: Context, infos: list[SessionInfo]) -> list[msgspec.Raw]:
        made = self._made
        encoded = []
        for info in infos:
            found = made.get(info.session_id)
            if found is None or found[0] is not info:
                if len(made) >= self._size:
                    for key in list(itertools.islice(made, self._size // 2)):
                        del made[key]
                shown = _shown(context, msgspec.to_builtins(info))
                found = made[info.session_id] = (info, msgspec.Raw(_encode(shown)))
            encoded.append(found[1])
        return encoded


_encode = msgspec.json.Encoder().encode


def _query(meta: Any) -> str | None:
    """The search a ``session/list`` asks for in its ``_meta``: ours (``acp-session-registry/query``), or goose's
    ``query``; blank is none (a ``_meta`` that is not an object asks for nothing)."""
    if not isinstance(meta, dict):
        return None
    for key in (META_QUERY, "query"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidParams(f"_meta.{key} must be a string (the words to search for)", {"field": f"_meta.{key}"})
        return value if value.strip() else None
    return None


def _list(context: Context, request: ListParams) -> Result:
    # ``filters.list_filter`` checks ``archived`` (an unsupported value is refused by name, never read as "exclude")
    query = _query(request.meta)
    page = context.registry.list(
        cwd=request.cwd, cursor=request.cursor, archived=request.archived, agent=context.agent, query=query
    )
    if context.encoded is None or query is not None:
        result: Result = msgspec.to_builtins(page)
        for shown in result["sessions"]:
            _shown(context, shown)
        return result
    result = {"sessions": context.encoded.page(context, page.sessions)}  # the keys in the struct's order
    if page.next_cursor is not UNSET:
        result["nextCursor"] = page.next_cursor
    if page.meta is not UNSET:
        result["_meta"] = page.meta
    return result


def _commanding(row: SessionCommand) -> Handler:
    """The table's handler of a session command: its session found as the client names it, a session open on the
    connection closed first when the command closes it, the command run in the context, its answer."""

    def handle(context: Context, request: Any) -> Result:
        params = msgspec.structs.asdict(request)
        wire_id = params.pop("session_id")
        with _stored(context, wire_id) as store_id:
            if row.closes and wire_id in context.open_sessions:  # ACP: an archived session is closed first
                context.close(wire_id)
            returned = context.command(row, store_id, params)
        return row.answer(returned)

    return handle


def _status(context: Context, request: SessionParams) -> Result:
    """No side effects: "open" when live on this surface, "saved" when known and resumable, -32002 otherwise."""
    with _stored(context, request.session_id) as store_id:
        state = context.registry.state(store_id)
        if state is None:
            raise SessionNotFound(store_id)
        if state.deleted:
            raise SessionNotFound(store_id, f"session {store_id!r} was deleted; it has no status")
    return {"status": "open" if request.session_id in context.open_sessions else "saved"}


def _fork(context: Context, request: ForkParams) -> Result:
    """A new session from the source's turns so far (the registry records the source and the position)."""
    with _stored(context, request.session_id) as store_id:
        new_id = None if context.agent is None else context.store_id(str(uuid.uuid4()))
        info = context.registry.fork(
            store_id,
            request.cwd,
            additional_directories=request.additional_directories or (),
            session_id=new_id,
            agent=context.agent,
        )
    wire_id = context.wire_id(info.session_id)
    context.opened(wire_id)
    return {"sessionId": wire_id}


# -- the table ------------------------------------------------------------------------------------------------

_AGENTS_OWN: Final[Mapping[Surface, Role]] = {"serve": Role.OWN, "sdk": Role.OWN, "proxy": Role.FORWARD}
_REGISTRY: Final[Mapping[Surface, Role]] = {"serve": Role.ANSWER, "sdk": Role.ANSWER, "proxy": Role.ANSWER}
_STATUS: Final[Mapping[Surface, Role]] = {"serve": Role.ANSWER, "sdk": Role.ANSWER, "proxy": Role.FORWARD_OR_ANSWER}
_FORK: Final[Mapping[Surface, Role]] = {"serve": Role.ANSWER, "sdk": Role.ANSWER, "proxy": Role.FORWARD}


def _session(name: str, *meta: str) -> Capability:
    return Capability(("sessionCapabilities", name), meta)


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
        Method("session/list", ListParams, _REGISTRY, _list, _session("list", META_QUERY)),
        *(
            Method(
                row.method,
                wire_params(row),
                _REGISTRY,
                _commanding(row),
                None if row.capability is None else Capability(row.capability),
            )
            for row in COMMANDS
        ),
        Method("session/status", SessionParams, _STATUS, _status, _session("status")),
        Method("session/fork", ForkParams, _FORK, _fork, _session("fork")),
    )
}
"""Every method: the agents' own, ``session/list``, each session command (``registry.session_commands``), the
registry's reads."""


# -- surfaces -------------------------------------------------------------------------------------------------


_SERVED: Final = (Role.ANSWER, Role.OWN, Role.FORWARD_OR_ANSWER)


def served(surface: Surface, roles: Iterable[Role] = _SERVED) -> list[Method]:
    """The methods ``surface`` serves with one of ``roles``, in table order."""
    wanted = set(roles)
    return [method for method in METHODS.values() if method.role(surface) in wanted]


def capabilities(surface: Surface, roles: Iterable[Role] = _SERVED, *, agent_capabilities: Any = None) -> Result:
    """The ``agentCapabilities`` that advertise the methods ``surface`` serves with ``roles``: ``loadSession``
    and the ``sessionCapabilities`` entries. With ``agent_capabilities`` (a proxy's agent's), the methods it
    forwards are advertised as that agent advertises them (the rest of the agent's capabilities are the proxy's
    to merge)."""
    advertised: Result = {"sessionCapabilities": {}}
    chosen = served(surface, roles)
    if agent_capabilities is not None:
        forwarded = served(surface, (Role.FORWARD,))
        chosen += [method for method in forwarded if method.advertised_in(agent_capabilities)]
    for method in chosen:
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
    for method in served(surface, (Role.ANSWER, Role.OWN)):
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
    from the registry, as no connection (no agent, nothing open; ``archived`` listed only when true, as
    ``SessionRegistry.list`` renders it); ``MethodNotFound`` for any other."""
    entry = METHODS.get(method) if isinstance(method, str) else None
    if entry is None or entry.handler is None:
        raise MethodNotFound(method)
    return entry.answer(Context(registry, reports_archived=False), params)
