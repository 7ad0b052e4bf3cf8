"""What the proxy adds to the conversation it relays: its own answers, its additions, what it observes.

- ``initialize``: forwarded; the agent's answer comes back with ``sessionCapabilities.list`` and ``.delete`` added
  (nothing the agent said is dropped) and ``_meta["acp-session-registry/proxy"]`` naming the agent and the state
  of its past sessions (``"importing"``, ``"ready"``, ``"none"``). The agent's name is decided here when
  ``--agent`` did not give it.
- ``session/new`` / ``load`` / ``resume`` / ``fork``: forwarded; on success the session is recorded under the
  agent's own id (stored as ``<agent>:<id>``) and the cwd of the request.
- ``session/prompt``: forwarded; its answer (a result or an error) is a turn: activity, and a title from the
  prompt when the session has none by then.
- ``session/list``: answered from the registry - this agent's sessions only, the registry's order, pages and
  signed cursors, with the agent's own ids. The recorder is given up to ``LIST_WAIT`` seconds to write what it
  has seen (a session just created is listed); when it cannot, or the store fails, the answer says so
  (``_meta["acp-session-registry/degraded"]``, or a -32603 error when the registry cannot answer at all).
- ``session/delete``: the session is deleted in the registry (for good: a tombstone), then forwarded when the
  agent advertises delete; the client gets ``{}`` once the agent has answered (its error is logged, not passed on:
  the session is gone from the list either way).

The agent's past: once the agent's name is known, a background thread reads its history files with the importer
of that name (``registry.importers``) or, for other agents that advertise ``session/list``, walks the agent's own
list, so that sessions it had before the proxy ran are listed with ids it can ``session/load``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from registry.acp.jsonrpc import Incoming, RequestId, encode_result
from registry.acp.params import DeleteParams, ListParams, convert_params
from registry.commands import check_session_id
from registry.errors import InvalidParams, RpcError, SessionNotFound, rpc_error
from registry.model import META_NAMESPACE, parse_time
from registry.proxy.names import agent_name, native_id
from registry.proxy.wire import AgentLine, encode_error

if TYPE_CHECKING:
    from registry.proxy.relay import Proxy

__all__ = ["ANSWERED", "LIST_WAIT", "META_DEGRADED", "META_PROXY", "Pending", "Surface"]

log = logging.getLogger("acp_registry.proxy")

LIST_WAIT: Final = 2.0
META_PROXY: Final = f"{META_NAMESPACE}/proxy"
META_DEGRADED: Final = f"{META_NAMESPACE}/degraded"
_AGENT_LIST_PAGES: Final = 200  # pages of the agent's own session/list walked for its past, at most
ANSWERED: Final = frozenset({"session/list", "session/delete"})
"""The methods the proxy answers itself (the others are forwarded)."""
_OBSERVED: Final = frozenset({"initialize", "session/new", "session/load", "session/resume", "session/fork"})


class Pending(msgspec.Struct):
    """A request sent to the agent, waiting for its answer: the client's (its id, what to observe in the answer)
    or the proxy's own (``own`` gets the answer; None when the agent ended first)."""

    client_id: RequestId
    method: str
    params: Any = None
    own: Callable[[AgentLine | None], None] | None = None


class _Session(msgspec.Struct, rename="camel"):
    session_id: str


class _Listed(msgspec.Struct, rename="camel"):
    sessions: list[dict[str, Any]]
    next_cursor: str | None = None


_decode_session: Final = msgspec.json.Decoder(_Session).decode
_decode_listed: Final = msgspec.json.Decoder(_Listed).decode


class Surface:
    def __init__(self, proxy: Proxy, *, import_history: bool = True) -> None:
        self.proxy = proxy
        self.registry = proxy.registry
        self.recorder = proxy.recorder
        self._import_history = import_history
        self.history = "none"
        self.agent_list = False
        self.agent_delete = False
        self._history_thread: threading.Thread | None = None
        self._lister = _lists_by_agent(self.registry)

    # -- answered here ------------------------------------------------------------------------------

    def answer(self, message: Incoming) -> bytes | None:
        """The proxy's own answer to a client request, ``b""`` when it comes later, None: forward it."""
        method = message.method
        if method not in ANSWERED:
            return None
        try:
            if method == "session/list":
                return encode_result(message.id, self._list(message.params))
            return self._delete(message)
        except Exception as exc:
            if not isinstance(exc, InvalidParams | SessionNotFound):
                log.warning("%s failed: %s", method, exc)
            error = rpc_error(exc)
            if self.recorder.degraded is not None:
                error = RpcError(error.code, error.message, {"degraded": self.recorder.degraded})
            return encode_error(message.id, error)

    def _list(self, params: Any) -> dict[str, Any]:
        request = convert_params(params, ListParams)
        caught_up = self.recorder.wait_idle(LIST_WAIT)
        agent = self.proxy.agent
        page = self._lister(request.cwd, request.cursor, agent)
        result: dict[str, Any] = msgspec.to_builtins(page)
        shown = []
        for info in result.get("sessions", []):
            native = native_id(agent, info["sessionId"])
            if native is not None:
                info["sessionId"] = native
                shown.append(info)
        result["sessions"] = shown
        meta: dict[str, Any] = dict(result.get("_meta") or {})
        meta[META_PROXY] = {"agent": agent, "history": self.history}
        degraded = self.recorder.degraded or (None if caught_up else "the recorder is behind: recent changes missing")
        if degraded is not None:
            meta[META_DEGRADED] = degraded
        result["_meta"] = meta
        return result

    def _delete(self, message: Incoming) -> bytes:
        native = check_session_id(convert_params(message.params, DeleteParams).session_id)
        self.recorder.wait_idle(LIST_WAIT)  # a session just created is deleted, not created after
        self.recorder.delete(native)
        if not self.agent_delete:
            return encode_result(message.id, {})
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
        keep = method in _OBSERVED or method == "session/prompt"
        return Pending(message.id, method, message.params if keep else None)

    def response(self, pending: Pending, answer: AgentLine) -> bytes | None:
        """The client's answer when the proxy changes it (None: the agent's, relayed as it is); records what
        the answer tells."""
        method, params = pending.method, pending.params if isinstance(pending.params, dict) else {}
        ok = len(answer.result) > 0
        if method == "session/prompt":
            turn_of = params.get("sessionId")
            if isinstance(turn_of, str):
                text = _prompt_text(params.get("prompt"))
                self.recorder.put(lambda r: r.turn(turn_of, text, answered=ok))
            return None
        if not ok or method not in _OBSERVED:
            return None
        if method == "initialize":
            return self._initialized(pending.client_id, answer)
        try:
            result = msgspec.json.decode(answer.result)
        except msgspec.DecodeError:
            return None
        native = (
            result.get("sessionId") if isinstance(result, dict) and method in ("session/new", "session/fork") else None
        )
        native = native if native is not None else params.get("sessionId")
        cwd, directories = params.get("cwd"), params.get("additionalDirectories")
        if isinstance(native, str) and isinstance(cwd, str):
            dirs = [d for d in directories if isinstance(d, str)] if isinstance(directories, list) else None
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
        capabilities = result.get("agentCapabilities")
        if capabilities is None:
            capabilities = result["agentCapabilities"] = {}
        if isinstance(capabilities, dict):
            session = capabilities.get("sessionCapabilities")
            if not isinstance(session, dict):
                session = capabilities["sessionCapabilities"] = {}
            self.agent_list = isinstance(session.get("list"), dict)
            self.agent_delete = isinstance(session.get("delete"), dict)
            for name in ("list", "delete"):
                if not isinstance(session.get(name), dict):
                    session[name] = {}
        self._start_history()
        meta = result.get("_meta")
        if not isinstance(meta, dict):
            meta = result["_meta"] = {} if meta is None else result.get("_meta")
        if isinstance(meta, dict):
            meta[META_PROXY] = {"agent": self.proxy.agent, "history": self.history}
        return encode_result(client_id, result)

    # -- the agent's past ---------------------------------------------------------------------------

    def _start_history(self) -> None:
        if not self._import_history or self._history_thread is not None:
            return
        from registry.importers import AGENTS  # noqa: PLC0415 - only a proxy in front of a known agent needs it

        agent = self.proxy.agent
        if agent in AGENTS:
            target: Callable[[], None] = lambda: self._import(agent)  # noqa: E731
        elif self.agent_list:
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
        if self._history_thread is not None:
            self._history_thread.join(5.0)


def _prompt_text(prompt: Any) -> str:
    if not isinstance(prompt, list):
        return ""
    return "".join(
        b["text"] for b in prompt if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _lists_by_agent(registry: Any) -> Callable[[str | None, str | None, str], Any]:
    """``registry.list`` for one agent's sessions (the facade's ``agent=`` filter, bound into the cursor)."""
    import inspect  # noqa: PLC0415

    if "agent" in inspect.signature(registry.list).parameters:
        return lambda cwd, cursor, agent: registry.list(cwd, cursor, agent=agent)
    return lambda cwd, cursor, agent: registry.list(cwd, cursor)
