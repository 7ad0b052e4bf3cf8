"""A conductor of our own, for the chain tests: real component processes, the client's side driven with raw lines.

``StandIn(form, proxies, agent)`` starts each proxy command and the agent command, and routes between them and the
test (the client) as a conductor of ``form`` does:

- ``"thinkwell"`` - ``@thinkwell/conductor`` 0.5.7 (its ``dist/conductor.js``): the first proxy gets the client's
  ``initialize`` with ``_meta.proxy: true`` and must answer with it; envelopes are ``_proxy/successor/request`` and
  ``_proxy/successor/notification``; what a proxy forwards reaches its successor as it was sent.
- ``"proxy/initialize"`` - the Proxy Chains RFD: every proxy gets ``proxy/initialize``, the agent ``initialize``
  (also when a proxy forwards an ``initialize``); one envelope, ``proxy/successor``, with an id for a request.
- ``"_proxy/initialize"`` - the same as the Rust conductor spells it (``_proxy/initialize``, ``_proxy/successor``).

As a real conductor, it gives every request it forwards an id of its own. The test speaks to it with
``ProxyProcess``'s methods (``call``, ``result``, ``pump``, ``updates``, ``wait_request``, ...); every line a component
writes is checked to be JSON-RPC (``check_line``), and each proxy's lines are kept in ``wire`` for the test to read.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from typing import IO, Any

import msgspec

from tests.proxy_wire import Message, ProxyProcess, check_line, piped

FORMS = ("thinkwell", "proxy/initialize", "_proxy/initialize")
_ENVELOPES = {
    "thinkwell": ("_proxy/successor/request", "_proxy/successor/notification"),
    "proxy/initialize": ("proxy/successor", "proxy/successor"),
    "_proxy/initialize": ("_proxy/successor", "_proxy/successor"),
}
_CLIENT = -1  # the index of the client in routes


class StandIn(ProxyProcess):
    def __init__(
        self,
        form: str,
        proxies: list[list[str]],
        agent: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        # ProxyProcess's reading side (lines, pump, call, ...) over the messages this conductor gives the client.
        self.lines: queue.Queue[Message | list[Message] | None] = queue.Queue()
        self.stderr_lines: list[str] = []
        self.notifications: list[Message] = []
        self.requests: list[Message] = []
        self._responses: dict[Any, Message] = {}
        self.form = form
        self.wire: list[list[Message]] = [[] for _ in proxies]
        self._request_method, self._notification_method = _ENVELOPES[form]
        self._ids = itertools.count(1)
        self._routes: dict[int, tuple[int, Any, str]] = {}  # conductor id -> (who asked, their id, method)
        self._lock = threading.Lock()
        self._initialized = False
        self.components = [piped(command, cwd=cwd, env=env) for command in [*proxies, agent]]
        self.proc = self.components[0]
        self._writes = [threading.Lock() for _ in self.components]
        for index, component in enumerate(self.components):
            threading.Thread(target=self._read_component, args=(index,), daemon=True).start()
            assert component.stderr is not None
            threading.Thread(target=self._read_errors, args=(component.stderr,), daemon=True).start()

    @property
    def _agent(self) -> int:
        return len(self.components) - 1

    # -- the client's side -------------------------------------------------------------------------------

    def send(self, message: Message | bytes) -> None:
        """A line from the client: a request (given a conductor id), a notification, or an answer."""
        if isinstance(message, bytes):
            self._write(0, message)
            return
        if "method" not in message:  # the client's answer to a request the conductor gave it
            self._answer(message)
            return
        method, params = message["method"], message.get("params")
        if "id" in message and method == "initialize" and not self._initialized and self._agent > 0:
            self._initialized = True
            method, params = self._initialize_for(0, params)
        self._forward(_CLIENT, 0, message.get("id"), method, params, "id" in message)

    def conductor_id(self, their_id: Any) -> int:
        """The id this conductor gave the client's request ``their_id`` (still waiting) on its way to the first
        component."""
        with self._lock:
            (conductor_id,) = [
                c for c, (who, theirs, _) in self._routes.items() if who == _CLIENT and theirs == their_id
            ]
        return conductor_id

    def close(self, timeout: float = 20.0) -> int:
        """The client has gone: the conductor closes every component's input; the first proxy's exit code."""
        self.close_inputs()
        codes = [component.wait(timeout) for component in self.components]
        return codes[0]

    def close_inputs(self) -> None:
        for index, component in enumerate(self.components):
            with self._writes[index], contextlib.suppress(BrokenPipeError, ValueError, OSError):
                assert component.stdin is not None
                component.stdin.close()

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        for component in self.components:
            if component.poll() is None:
                component.kill()
                component.wait()

    # -- routing -----------------------------------------------------------------------------------------

    def _initialize_for(self, target: int, params: Any) -> tuple[str, Any]:
        """The initialize a component gets: a proxy is told it is one, in the form's way."""
        if target == self._agent or (self.form == "thinkwell" and target > 0):
            return "initialize", params  # thinkwell passes on what a proxy forwards as it is
        if self.form == "thinkwell":
            meta = params.get("_meta") if isinstance(params, dict) else None
            return "initialize", {**(params or {}), "_meta": {**(meta or {}), "proxy": True}}
        return self.form, params

    def _forward(self, source: int, target: int, their_id: Any, method: str, params: Any, request: bool) -> None:
        """A message from ``source`` for ``target`` (the next component, or the previous one / the client)."""
        wrapped = source > target and target != _CLIENT  # from a successor to a proxy: in an envelope
        message: Message = {"jsonrpc": "2.0"}
        if wrapped:
            inner: Message = {"method": method} if params is None else {"method": method, "params": params}
            method, params = (self._request_method if request else self._notification_method), inner
        if request:
            conductor_id = next(self._ids)
            with self._lock:
                self._routes[conductor_id] = (source, their_id, method)
            message["id"] = conductor_id
        message["method"] = method
        if params is not None:
            message["params"] = params
        self._deliver(target, message)

    def _deliver(self, target: int, message: Message) -> None:
        if target == _CLIENT:
            self.lines.put(message)
        else:
            self._write(target, msgspec.json.encode(message))

    def _answer(self, message: Message) -> None:
        """An answer to a request the conductor sent, back to whoever asked, under their id."""
        with self._lock:
            route = self._routes.pop(message["id"], None)
        if route is None:  # an answer to a raw line the test wrote (a conductor never passes one on): as it is
            self.lines.put(message)
            return
        asker, their_id, method = route
        answer = {key: value for key, value in message.items() if key in ("result", "error")}
        if method == "initialize" and asker == _CLIENT and self.form == "thinkwell" and self._agent > 0:
            meta = answer.get("result", {}).get("_meta") or {}
            if "result" in answer and meta.get("proxy") is not True:  # as @thinkwell/conductor checks
                answer = {"error": {"code": -32600, "message": "Proxy component did not accept proxy capability"}}
        self._deliver(asker, {"jsonrpc": "2.0", "id": their_id, **answer})

    def _read_component(self, index: int) -> None:
        component = self.components[index]
        assert component.stdout is not None
        for line in component.stdout:
            message = check_line(line.rstrip(b"\n"))
            assert isinstance(message, dict), f"a batch from component {index}: {message}"
            if index < self._agent:
                self.wire[index].append(message)
            self._route(index, message)
        if index == 0:
            self.lines.put(None)
        self.close_inputs()  # any component's end ends the chain, as both conductors do

    def _route(self, index: int, message: Message) -> None:
        method = message.get("method")
        if method is None:
            self._answer(message)
        elif index < self._agent and method in (self._request_method, self._notification_method):
            inner_method, inner_params = message["params"]["method"], message["params"].get("params")
            if "id" in message and inner_method == "initialize":
                inner_method, inner_params = self._initialize_for(index + 1, inner_params)
            self._forward(index, index + 1, message.get("id"), inner_method, inner_params, "id" in message)
        else:  # for the predecessor: the client, or the previous proxy (wrapped)
            target = _CLIENT if index == 0 else index - 1
            self._forward(index, target, message.get("id"), method, message.get("params"), "id" in message)

    def _write(self, index: int, data: bytes) -> None:
        stdin = self.components[index].stdin
        assert stdin is not None
        with self._writes[index], contextlib.suppress(BrokenPipeError, ValueError, OSError):
            stdin.write(data + b"\n")
            stdin.flush()

    def _read_errors(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.stderr_lines.append(line.decode(errors="replace").rstrip("\n"))
