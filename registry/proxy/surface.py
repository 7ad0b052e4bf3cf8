"""What the proxy adds to the conversation it relays: its own answers, its additions, what it observes.

The proxy is one more surface over the method table (``registry.acp.methods``, surface ``"proxy"``):

- ``Role.ANSWER`` methods (``session/list``, ``session/delete``, and those the table adds for every agent:
  ``session/set_title``, ``session/archive`` / ``unarchive``, ``_registry/rename``) are answered from the
  registry by the table's own handlers, in a ``Context`` naming the agent, so ids are the agent's own and only
  its sessions are listed (stored as ``<agent>:<id>``). Before answering, the recorder is given up to
  ``LIST_WAIT`` seconds to write what it has seen (a session just created is listed); when it cannot, or the
  store fails, the answer says so (``_meta["acp-session-registry/degraded"]``, or ``data.degraded`` on an
  error) rather than answering from stale data silently. ``session/delete`` is also forwarded when the agent
  advertises delete (the client gets ``{}`` once the agent has answered; the agent's error is logged: the
  session is gone from the list either way).
- Forward-or-answer methods (``session/status``) are forwarded when the agent advertises them, else answered.
- Everything else - the agent's own methods, extension methods, methods nobody knows - is forwarded. Of the
  answers: ``initialize`` comes back with the capabilities of every method the proxy answers added (nothing
  the agent said is dropped) and ``_meta["acp-session-registry/proxy"]`` naming the agent and the state of its
  past sessions (``"importing"``, ``"ready"``, ``"none"``, ``"failed"``); the agent's name is decided there when
  ``--agent`` did not give it. ``session/new`` / ``load`` / ``resume`` / ``fork`` that succeed record the
  session (with the cwd of the request; a fork with its parent) and make it open on this connection;
  ``session/close`` ends that. ``session/prompt``'s answer, a result or an error, is a turn: activity, and a
  title from the prompt when the session has none by then.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from events.codec import now_ns
from events.model import TitleSource
from registry.acp.jsonrpc import Incoming, RequestId, encode_notification, encode_result
from registry.acp.methods import METHODS, Context, Method, Role
from registry.errors import InvalidParams, RpcError, SessionNotFound, rpc_error
from registry.follow import Following
from registry.model import META_NAMESPACE, parse_time
from registry.projection import Change
from registry.proxy.names import IMPORTED, agent_name
from registry.proxy.wire import AgentLine, encode_error

if TYPE_CHECKING:
    from registry.proxy.relay import Proxy

__all__ = ["LIST_WAIT", "META_DEGRADED", "META_PROXY", "Pending", "Surface"]

log = logging.getLogger("acp_registry.proxy")

LIST_WAIT: Final = 2.0
META_PROXY: Final = f"{META_NAMESPACE}/proxy"
META_DEGRADED: Final = f"{META_NAMESPACE}/degraded"
_AGENT_LIST_PAGES: Final = 200  # pages of the agent's own session/list walked for its past, at most
_READS: Final = frozenset({"session/list", "session/status"})  # answered methods that write nothing
_OPENING: Final = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
_OBSERVED: Final = _OPENING | {"initialize", "session/prompt", "session/close", "authenticate"}


class Pending(msgspec.Struct):
    """A request sent to the agent, waiting for its answer: the client's (its id, what to observe in the answer)
    or the proxy's own (``own`` gets the answer; None when the agent ended first)."""

    client_id: RequestId
    method: str
    params: Any = None
    own: Callable[[AgentLine | None], None] | None = None


class _Listed(msgspec.Struct, rename="camel"):
    sessions: list[dict[str, Any]]
    next_cursor: str | None = None


_decode_listed: Final = msgspec.json.Decoder(_Listed).decode


class _ProxyContext(Context):
    """The table's context in front of an agent: closing a session (before archiving it) closes it at the agent
    too when the agent advertises ``session/close``."""

    surface: Surface | None = None

    def close(self, wire_id: str) -> None:
        was_open = wire_id in self.open_sessions
        super().close(wire_id)
        surface = self.surface
        if was_open and surface is not None and surface.advertised("session/close"):
            surface.proxy.request_agent("session/close", {"sessionId": wire_id}, lambda _answer: None)


class Surface:
    def __init__(self, proxy: Proxy, *, import_history: bool = True) -> None:
        self.proxy = proxy
        self.registry = proxy.registry
        self.recorder = proxy.recorder
        self.context = _ProxyContext(self.registry, agent=proxy.agent)
        self.context.surface = self
        self._import_history = import_history
        self.history = "none"
        self.agent_capabilities: dict[str, Any] = {}
        self._history_thread: threading.Thread | None = None
        self._own_writes = threading.Lock()
        self._own_writes_at: collections.deque[int] = collections.deque(maxlen=256)
        self._following: Following | None = None
        self._changes: queue.SimpleQueue[Sequence[Change] | None] = queue.SimpleQueue()

    def advertised(self, name: str) -> bool:
        """Whether the agent advertised method ``name`` in its ``initialize`` answer."""
        method = METHODS.get(name)
        if method is None or method.capability is None:
            return False
        node: Any = self.agent_capabilities
        for key in method.capability.path:
            node = node.get(key) if isinstance(node, dict) else None
        return node is True or isinstance(node, dict)

    def answers(self, name: str) -> bool:
        """Whether the proxy answers method ``name`` itself (else it is forwarded)."""
        method = METHODS.get(name)
        return method is not None and self._answers(method)

    def _answers(self, method: Method) -> bool:
        """Whether the proxy answers ``method`` itself (else it is forwarded)."""
        role = method.role("proxy")
        if role is Role.ANSWER:
            return True
        return role is not None and role.value == "forward-or-answer" and not self.advertised(method.name)

    # -- answered here ------------------------------------------------------------------------------

    def answer(self, message: Incoming) -> bytes | None:
        """The proxy's own answer to a client request, ``b""`` when it comes later, None: forward it."""
        method = METHODS.get(message.method or "")
        if method is None or not self._answers(method):
            return None
        history = self.history  # read first: "ready" then covers every observation the history walk queued
        try:
            # What the client has seen happen is written first (not waited for while the store is failing).
            caught_up = self.recorder.degraded is None and self.recorder.wait_idle(LIST_WAIT)
            self.context.agent = self.proxy.agent
            with self._own_writes:  # the change stream does not echo what this client just asked for
                before = self.registry.position
                result = method.answer(self.context, message.params)
                if method.name not in _READS and self.registry.position != before:
                    self._own_writes_at.append(self.registry.position)  # its one event is the last folded
            if method.name == "session/delete" and self.advertised("session/delete"):
                return self._forward_delete(message)
            if method.name == "session/list":
                result["_meta"] = self._list_meta(result.get("_meta"), caught_up, history)
            return encode_result(message.id, result)
        except Exception as exc:
            if not isinstance(exc, InvalidParams | SessionNotFound):
                log.warning("%s failed: %s", method.name, exc)
            error = rpc_error(exc)
            if self.recorder.degraded is not None:
                error = RpcError(error.code, error.message, {"degraded": self.recorder.degraded})
            return encode_error(message.id, error)

    def _list_meta(self, meta: Any, caught_up: bool, history: str) -> dict[str, Any]:
        shown: dict[str, Any] = dict(meta) if isinstance(meta, dict) else {}
        shown[META_PROXY] = {"agent": self.proxy.agent, "history": history}
        degraded = self.recorder.degraded or (None if caught_up else "the recorder is behind: recent changes missing")
        if degraded is not None:
            shown[META_DEGRADED] = degraded
        return shown

    def _forward_delete(self, message: Incoming) -> bytes:
        native = message.params["sessionId"]  # checked by the table's handler
        client_id = message.id

        def answered(answer: AgentLine | None) -> None:
            if answer is not None and len(answer.error):
                log.warning("the agent's own session/delete of %s failed: %s", native, bytes(answer.error)[:300])
            self.proxy.send_client(encode_result(client_id, {}))

        self.proxy.request_agent("session/delete", {"sessionId": native}, answered)
        return b""

    # -- forwarded and observed ---------------------------------------------------------------------

    def observer(self, message: Incoming) -> Pending:
        method = message.method
        assert method is not None
        return Pending(message.id, method, message.params if method in _OBSERVED else None)

    def response(self, pending: Pending, answer: AgentLine) -> bytes | None:
        """The client's answer when the proxy changes it (None: the agent's, relayed as it is); records what
        the answer tells."""
        method, params = pending.method, pending.params if isinstance(pending.params, dict) else {}
        ok = len(answer.result) > 0
        if method == "session/prompt":
            turn_of = params.get("sessionId")
            if isinstance(turn_of, str):
                text = _prompt_text(params.get("prompt"))
                ended = now_ns()  # the turn's time is when it ended here, not when the recorder gets to it
                self.recorder.put(lambda r: r.turn(turn_of, answered=ok, at=ended))
                self.recorder.put(lambda r: r.prompt_title(turn_of, text))
            return None
        if ok and method == "authenticate" and self.history == "failed" and self._history_thread is not None:
            self._history_thread = None  # the agent's own list may have needed it: walk it again
            self._start_history()
        if not ok or method not in _OBSERVED:
            return None
        if method == "initialize":
            return self._initialized(pending.client_id, answer)
        if method == "session/close":
            if isinstance(params.get("sessionId"), str):
                self.context.open_sessions.discard(params["sessionId"])
            return None
        try:
            result = msgspec.json.decode(answer.result)
        except msgspec.DecodeError:
            return None
        source = params.get("sessionId")
        native = (
            result.get("sessionId")
            if isinstance(result, dict) and method in ("session/new", "session/fork")
            else source
        )
        cwd, directories = params.get("cwd"), params.get("additionalDirectories")
        if not isinstance(native, str):
            return None
        self.context.opened(native)
        if isinstance(cwd, str):
            dirs = [d for d in directories if isinstance(d, str)] if isinstance(directories, list) else None
            if method == "session/fork" and isinstance(source, str):
                self.recorder.put(lambda r: r.fork(native, source, cwd, dirs))
            else:
                self.recorder.put(lambda r: r.session(native, cwd, dirs))
        return None

    def _initialized(self, client_id: RequestId, answer: AgentLine) -> bytes | None:
        try:
            result = msgspec.json.decode(answer.result)
        except msgspec.DecodeError:
            return None
        if not isinstance(result, dict):
            return None
        info = result.get("agentInfo")
        if not self.proxy.named and isinstance(info, dict) and isinstance(info.get("name"), str) and info["name"]:
            self.recorder.agent = agent_name(info["name"])
        self.context.agent = self.proxy.agent
        capabilities = result.get("agentCapabilities")
        if capabilities is None:
            capabilities = result["agentCapabilities"] = {}
        if isinstance(capabilities, dict):
            self.agent_capabilities = msgspec.json.decode(msgspec.json.encode(capabilities))  # as the agent said
            _add_capabilities(capabilities, [m for m in METHODS.values() if self._answers(m)])
        self._start_history()
        self._follow()
        meta = result.get("_meta")
        if meta is None:
            meta = result["_meta"] = {}
        if isinstance(meta, dict):
            meta[META_PROXY] = {"agent": self.proxy.agent, "history": self.history}
        return encode_result(client_id, result)

    # -- titles set elsewhere ------------------------------------------------------------------------

    def _follow(self) -> None:
        if self._following is None:
            threading.Thread(target=self._push_titles, name="acp-registry-proxy-titles", daemon=True).start()
            self._following = self.registry.follow(self._changes.put)

    def _push_titles(self) -> None:
        """A user's title set elsewhere (another window, ``acp-registry title``, a host) for one of this agent's
        sessions reaches the client as a ``session_info_update``. Only users' titles: the agent's reach the client
        from the agent, the proxy's own from the recorder, a title this client set is in the answer it got, and
        activity (``updatedAt``, counts) is not pushed. The follower's thread only queues the changes: this
        thread waits for an answer being given to finish (it may be writing what would be echoed), and the
        follower must never wait for that answer, which may be waiting for the follower."""
        while True:
            changes = self._changes.get()
            if changes is None:
                return
            agent = self.proxy.agent
            with self._own_writes:
                own = set(self._own_writes_at)
            for change in changes:
                before, after = change.before, change.after
                if before is None or after.agent != agent or after.deleted or change.position in own:
                    continue
                if after.title is None or after.title == before.title or after.title_source is not TitleSource.USER:
                    continue
                update = {"sessionUpdate": "session_info_update", "title": after.title}
                self.proxy.send_client(_encode_update(self.context.wire_id(after.session_id), update))

    # -- the agent's past ---------------------------------------------------------------------------

    def _start_history(self) -> None:
        if not self._import_history or self._history_thread is not None:
            return
        agent = self.proxy.agent
        if agent in IMPORTED:  # not registry.importers.AGENTS: importing the importers waits for the history thread
            target: Callable[[], None] = lambda: self._import(agent)  # noqa: E731
        elif self.advertised("session/list"):
            target = self._walk_agent_list
        else:
            return
        self.history = "importing"
        self._history_thread = threading.Thread(target=target, name="acp-registry-proxy-history", daemon=True)
        self._history_thread.start()

    def _import(self, agent: str) -> None:
        from registry.importers import Importer, sources  # noqa: PLC0415

        try:
            summary = Importer(self.registry.store, sources([agent])).run()
        except Exception as exc:
            log.warning("reading %s's past sessions failed: %s", agent, exc)
            self.history = "failed"
            return
        for part in summary.agents:
            log.info("%s's past sessions: %d added, %d changed (%s)", agent, part.added, part.changed, part.root)
        self.history = "ready"

    def _walk_agent_list(self) -> None:
        cursor: str | None = None
        for _ in range(_AGENT_LIST_PAGES):
            done = threading.Event()
            box: list[AgentLine | None] = []

            def answered(
                answer: AgentLine | None, box: list[AgentLine | None] = box, done: threading.Event = done
            ) -> None:
                box.append(answer)
                done.set()

            self.proxy.request_agent("session/list", {} if cursor is None else {"cursor": cursor}, answered)
            if not done.wait(60) or not box or box[0] is None or not len(box[0].result):
                self.history = "failed"
                return
            try:
                page = _decode_listed(box[0].result)
            except msgspec.DecodeError:
                self.history = "failed"
                return
            for item in page.sessions:
                self._listed(item)
            cursor = page.next_cursor
            if not cursor:
                break
        self.history = "ready"

    def _listed(self, item: dict[str, Any]) -> None:
        native, cwd, title = item.get("sessionId"), item.get("cwd"), item.get("title")
        if not isinstance(native, str) or not isinstance(cwd, str):
            return
        at: int | None = None
        if isinstance(item.get("updatedAt"), str):
            try:
                at = parse_time(item["updatedAt"])
            except (InvalidParams, ValueError):
                at = None
        self.recorder.put(lambda r: r.session(native, cwd, at=at))
        if isinstance(title, str):
            self.recorder.put(lambda r: r.agent_title(native, title))

    def close(self) -> None:
        if self._following is not None:
            self._following.stop()
            self._following = None
            self._changes.put(None)
        if self._history_thread is not None:
            self._history_thread.join(5.0)


def _prompt_text(prompt: Any) -> str:
    if not isinstance(prompt, list):
        return ""
    return "".join(
        b["text"] for b in prompt if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _encode_update(wire_id: str, update: dict[str, Any]) -> bytes:
    return encode_notification("session/update", {"sessionId": wire_id, "update": update})


def _add_capabilities(capabilities: dict[str, Any], methods: list[Method]) -> None:
    """Advertise ``methods`` in an agent's ``agentCapabilities``, keeping every value the agent gave."""
    for method in methods:
        if method.capability is None:
            continue
        *parents, key = method.capability.path
        node: Any = capabilities
        for parent in parents:
            child = node.get(parent)
            if not isinstance(child, dict):
                child = node[parent] = {}
            node = child
        if not (node.get(key) is True or isinstance(node.get(key), dict)):
            node[key] = method.capability.value
