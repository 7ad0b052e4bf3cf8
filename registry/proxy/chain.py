"""The proxy as one link of a conductor's chain: its agent is the successor the conductor reaches for it.

A conductor (an ACP proxy-chain host) starts every component itself and speaks to each on its stdio. It tells a
component that has a successor that it is a proxy; such a component sends what is meant for its successor to the
conductor in an envelope, and what its successor sends comes back in the same envelopes. Two forms are published:

======================  =====================================  ===============================================
form                    told it is a proxy by                  to and from the successor
======================  =====================================  ===============================================
``@thinkwell/conductor`` ``initialize`` with ``_meta.proxy:    ``_proxy/successor/request`` and
0.5 (npm)               true``; the answer must carry          ``_proxy/successor/notification``
                        ``_meta.proxy: true`` too
Proxy Chains RFD, and   ``proxy/initialize`` (the Rust SDK:    ``proxy/successor`` (``_proxy/successor``): an
the Rust conductor      ``_proxy/initialize``), the params     outer id makes it a request, none a notification
                        and answer of ``initialize``
======================  =====================================  ===============================================

Either way an envelope's params are the inner message's ``method`` and ``params``, and the answer to an envelope
request is the inner request's answer. ``Chain`` reads the conductor's lines on one descriptor and demultiplexes
them into the relay's two ports (``registry.proxy.ports``): ``client`` (a ``ClientPort``: the client's requests
and notifications, its answers to the agent's requests) and ``agent`` (an ``AgentPort``: the successor's requests
and notifications, unwrapped, and its answers). What the relay sends the agent is wrapped; what it sends the
client goes out as it is. The one reader thread is the agent port's: it hands the successor's lines (most of the
traffic) to ``relay.from_agent`` itself and queues the client's for the client port's thread, so each direction
is delivered on a thread of its own, as standalone.

Ids: every request the chain writes to the conductor carries an id from the chain's own counter (the relay's ids
and the successor's would otherwise meet on the one wire) and its answer is handed back under the id it had; the
successor's requests keep the conductor's envelope ids, which the client's answers then name. A
``$/cancel_request`` names the id the next hop knows: the envelope's on the way to the successor, the chain's on
the way to the client (mapped as it is unwrapped: the lines for the client are then never searched for it).

The initialize request is the client's, as the conductor gives it: the relay forwards it (as ``initialize``, in
an envelope) and the conductor gives it to the successor - as ``proxy/initialize`` or ``initialize`` in the RFD's
form. In the earlier form it reaches the successor as sent, so ``_meta.proxy`` is kept: a proxy after this one
learns from it that it is one, and agents ignore ``_meta`` keys they do not know. A plain ``initialize`` (no
conductor told this process it is a proxy) is answered with an error: without a command there is no agent.

The conductor ends the chain as a whole: the end of its input is the end of the client, and the successor ends
with it once the relay asks it to (``AgentPort.end``, which also stops the reader when the proxy is stopped while
the conductor is still writing); a successor that fails alone is the conductor's to report (it ends the chain).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import re
import threading
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET, UnsetType

from registry.acp.jsonrpc import Invalid, OverlongLine, RequestId
from registry.errors import INVALID_PARAMS, INVALID_REQUEST, RpcError
from registry.proxy.client import deliver
from registry.proxy.lines import LineReader, LineWriter
from registry.proxy.ports import AgentEnd, FromAgent, FromClient, Line
from registry.proxy.wire import CANCEL, AgentLine, encode_error, peek_agent

__all__ = ["ENDED", "NOT_A_PROXY", "THINKWELL", "Chain", "Form"]

log = logging.getLogger("acp_registry.proxy")


class Form(NamedTuple):
    """One published way for a proxy to reach its successor: the envelope methods it sends."""

    told_by: str
    """What told the proxy it is one: how the logs name the form."""
    request: str
    notification: str


THINKWELL: Final = Form("initialize with _meta.proxy", "_proxy/successor/request", "_proxy/successor/notification")
_RFD_FORMS: Final = {
    "proxy/initialize": Form("proxy/initialize", "proxy/successor", "proxy/successor"),
    "_proxy/initialize": Form("_proxy/initialize", "_proxy/successor", "_proxy/successor"),
}
_ENVELOPES: Final = frozenset(
    {"proxy/successor", "_proxy/successor", "_proxy/successor/request", "_proxy/successor/notification"}
)
NOT_A_PROXY: Final = (
    "acp-registry proxy without a command runs as a proxy in a conductor's chain, but this initialize did not "
    "say it is one (no _meta.proxy, not proxy/initialize); to put it in front of an agent itself, give the "
    "agent's command: acp-registry proxy -- COMMAND [ARGS...]"
)
ENDED: Final = "ended with the conductor"
"""How the successor ended, as the relay says it: always with the conductor, when the relay let it go."""


class _Wrapped(msgspec.Struct):
    """An envelope's params: the inner message (its ``_meta`` / ``meta`` belong to the envelope, not to it)."""

    method: str
    params: msgspec.Raw = msgspec.Raw()


class _Inner(msgspec.Struct):
    method: str
    params: msgspec.Raw | UnsetType = UNSET


class _Request(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: Any
    method: str
    params: Any = UNSET


class _Notification(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: Any = UNSET


class _Answer(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: Any
    result: msgspec.Raw | UnsetType = UNSET
    error: msgspec.Raw | UnsetType = UNSET


class _InitializeParams(msgspec.Struct):
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


_encode: Final = msgspec.json.Encoder().encode
_decode_wrapped: Final = msgspec.json.Decoder(_Wrapped).decode
_decode_initialize: Final = msgspec.json.Decoder(_InitializeParams).decode
_decode: Final = msgspec.json.Decoder().decode
_END: Final = None
# An envelope too long or too deep to decode is still known by its method near the start of the line.
_ENVELOPE_HEAD: Final = re.compile(rb'"method"\s*:\s*"_?proxy/successor')


def _head(line: Line) -> bytes:
    return line.head if isinstance(line, OverlongLine) else line[:65536]


def _raw(raw: msgspec.Raw) -> msgspec.Raw | UnsetType:
    return raw if len(raw) else UNSET


def _answer(request_id: RequestId, line: AgentLine) -> bytes:
    return _encode(_Answer(id=request_id, result=_raw(line.result), error=_raw(line.error)))


def _cancelled(params: msgspec.Raw | UnsetType, ids: dict[Any, Any]) -> msgspec.Raw | dict[str, Any] | None:
    """A ``$/cancel_request``'s params naming, in place of its ``requestId``, the id ``ids`` maps it to (a mapping
    from the id the next hop knows to the one the sender used); None when that request is not waiting there."""
    try:
        params_value = _decode(params) if not isinstance(params, UnsetType) and len(params) else None
    except msgspec.DecodeError:
        return None
    if not isinstance(params_value, dict) or "requestId" not in params_value:
        return None
    named = params_value["requestId"]
    for theirs, ours in ids.items():
        if ours == named and type(ours) is type(named):
            return {**params_value, "requestId": theirs}
    return None


class Chain:
    """The conductor's stdio (``read_from``, ``write_to``) as the relay's two ports: ``client`` and ``agent``.

    ``Proxy(registry, [], client=chain.client)`` then ``proxy.start(chain.agent)``. The conductor is read on the
    agent port's thread from its ``start``. ``form`` is the form the conductor spoke (None before its initialize);
    ``refused`` says why the chain ended itself (a plain ``initialize``: no successor)."""

    def __init__(self, read_from: int = 0, write_to: int = 1) -> None:
        self._read_from = read_from
        self._out = LineWriter(write_to)
        self.form: Form | None = None
        self.refused: str | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._wrapped: dict[int, RequestId] = {}  # an envelope the chain sent -> the relay's id of its request
        self._asked: dict[int, RequestId] = {}  # a request the chain sent the client -> the id the relay gave it
        self._successor_asks: set[RequestId] = set()  # the successor's requests the client has not answered
        self._initialize_id: RequestId | UnsetType = UNSET  # the earlier form's initialize, whose answer is marked
        self._client_lines: queue.SimpleQueue[list[Line] | None] = queue.SimpleQueue()
        self.client = _Client(self)
        self.agent = _Successor(self)

    # -- from the conductor ---------------------------------------------------------------------------

    def _read(self, relay: FromAgent, wake: int) -> None:
        """The conductor's lines, read on the agent port's thread: the successor's are delivered from here, the
        client's queued for the client port's thread. At the end (EOF, a refused initialize, or ``end``), the
        client's end is queued, and the successor's end is said once the relay has asked for it."""
        try:
            for batch in LineReader(self._read_from, wake=wake).batches():
                to_client: list[Line] = []
                to_agent: list[Line] = []
                for line in batch:
                    self._route(line, to_client, to_agent)
                if to_client:
                    self._client_lines.put(to_client)
                if to_agent:
                    relay.from_agent(to_agent)
                if self.refused is not None:
                    break
        except Exception:
            log.exception("reading the conductor's messages failed")
        self._client_lines.put(_END)  # the client has gone; the successor goes when the relay lets it go
        self.agent.asked.wait()
        relay.agent_ended(AgentEnd(ENDED, asked=True))

    def _route(self, line: Line, to_client: list[Line], to_agent: list[Line]) -> None:
        """Where one of the conductor's lines goes: to the relay's agent side, its client side, or answered here."""
        if self.refused is not None:
            return
        message = peek_agent(line)
        if isinstance(message, AgentLine) and message.method in _ENVELOPES:
            self._unwrap(message, to_agent)
            return
        if isinstance(message, Invalid) and _ENVELOPE_HEAD.search(_head(line)):
            self._refuse_envelope(line, message)
            return
        if isinstance(message, AgentLine) and message.method is UNSET:
            self._answered(message, to_client, to_agent)
            return
        if isinstance(message, AgentLine) and self.form is None:
            line = self._initialize(message, line)
            if not line:
                return
        to_client.append(line)  # the client's, as it wrote it (what is not JSON-RPC is the relay's to refuse)

    def _initialize(self, message: AgentLine, line: Line) -> Line:
        """The conductor's first request tells the form; the line to hand on (``b""``: answered here)."""
        has_id = message.id is not UNSET
        if message.method in _RFD_FORMS and has_id:
            self.form = _RFD_FORMS[message.method]
            log.debug("a link of a conductor's chain, told by %s", self.form.told_by)
            # The relay forwards it, in an envelope, as what it is inside: initialize.
            return _encode(_Request(id=message.id, method="initialize", params=_raw(message.params)))
        if message.method == "initialize" and has_id:
            try:
                meta = _decode_initialize(message.params or b"{}").meta
            except msgspec.DecodeError:
                meta = None
            if meta is not None and meta.get("proxy") is True:
                self.form = THINKWELL
                log.debug("a link of a conductor's chain, told by %s", THINKWELL.told_by)
                self._initialize_id = message.id
                return line
            self.refused = NOT_A_PROXY
            log.error("%s", NOT_A_PROXY)
            self._out.write([encode_error(message.id, RpcError(INVALID_REQUEST, NOT_A_PROXY))])
            return b""
        if has_id:
            error = RpcError(INVALID_REQUEST, f"{message.method!r} before initialize: the chain is not set up yet")
            self._out.write([encode_error(message.id, error)])
        else:
            log.warning("the conductor's %r notification before initialize was dropped", message.method)
        return b""

    def _refuse_envelope(self, line: Line, refusal: Invalid) -> None:
        """The successor's message that cannot be relayed (too long, too deep): as standalone, its request is
        answered with the error ``serve`` would give, so the successor is not left waiting; the rest is logged."""
        size = line.size if isinstance(line, OverlongLine) else len(line)
        log.warning("a line of %d bytes from the successor was not relayed: %s", size, refusal.error.message)
        if refusal.id is not None:
            self._out.write([encode_error(refusal.id, refusal.error)])

    def _unwrap(self, envelope: AgentLine, to_agent: list[Line]) -> None:
        """The successor's request or notification, as the successor wrote it, for the relay's agent side."""
        try:
            inner = _decode_wrapped(envelope.params)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if envelope.id is UNSET:
                log.warning("a %s envelope without a message was dropped: %s", envelope.method, exc)
                return
            reason = f"the {envelope.method} envelope holds no message: {exc}"
            self._out.write([encode_error(envelope.id, RpcError(INVALID_PARAMS, reason, {"field": "params"}))])
            return
        if envelope.id is UNSET:
            params: Any = _raw(inner.params)
            if inner.method == CANCEL:  # the successor's cancel of its request: under the chain's id for it
                with self._lock:
                    params = _cancelled(params, self._asked)
                if params is None:
                    log.debug("the successor's $/cancel_request names no request waiting at the client; dropped")
                    return
            to_agent.append(_encode(_Notification(method=inner.method, params=params)))
            return
        with self._lock:
            self._successor_asks.add(envelope.id)
        to_agent.append(_encode(_Request(id=envelope.id, method=inner.method, params=_raw(inner.params))))

    def _answered(self, answer: AgentLine, to_client: list[Line], to_agent: list[Line]) -> None:
        """An answer to a request the chain sent: the successor's (to an envelope) or the client's."""
        with self._lock:
            if answer.id in self._wrapped:
                side, request_id = to_agent, self._wrapped.pop(answer.id)
            elif answer.id in self._asked:
                side, request_id = to_client, self._asked.pop(answer.id)
            else:
                log.warning("the conductor answered a request the proxy never sent (id %r); dropped", answer.id)
                return
        side.append(_answer(request_id, answer))

    # -- to the conductor -----------------------------------------------------------------------------

    def _to_successor(self, lines: Sequence[bytes]) -> bool:
        form = self.form or THINKWELL
        out: list[bytes] = []
        for line in lines:
            message = peek_agent(line)
            if not isinstance(message, AgentLine):  # the relay writes JSON-RPC: a bug if not
                log.error("a line for the successor was not JSON-RPC (%s); dropped", message.error.message)
                continue
            if message.method is UNSET:  # the client's answer to the successor's request: under the envelope's id
                with self._lock:
                    known = message.id in self._successor_asks
                    self._successor_asks.discard(message.id)
                if known:
                    out.append(line)
                else:
                    log.warning("an answer to no request of the successor (id %r); dropped", message.id)
                continue
            params: Any = _raw(message.params)
            if message.method == CANCEL and message.id is UNSET:
                with self._lock:
                    params = _cancelled(params, self._wrapped)
                if params is None:
                    continue  # the request it names is not waiting at the successor: nothing to cancel there
            inner = _Inner(message.method, params)
            if message.id is UNSET:
                out.append(_encode(_Notification(method=form.notification, params=inner)))
            else:
                chain_id = next(self._ids)
                with self._lock:
                    self._wrapped[chain_id] = message.id
                out.append(_encode(_Request(id=chain_id, method=form.request, params=inner)))
        return self._out.write(out)

    def _to_client(self, lines: Sequence[bytes]) -> bool:
        out: list[bytes] = []
        for line in lines:
            # Most lines are the successor's notifications: one without an "id" anywhere is neither a request
            # nor initialize's answer (every line here was encoded by this package: an id is spelt "id").
            if b'"id"' not in line:
                out.append(line)
                continue
            message = peek_agent(line)
            if not isinstance(message, AgentLine):
                out.append(line)
            elif message.method is not UNSET and message.id is not UNSET:
                chain_id = next(self._ids)  # a request (the successor's, relayed): under the chain's own id
                with self._lock:
                    self._asked[chain_id] = message.id
                out.append(_encode(_Request(id=chain_id, method=message.method, params=_raw(message.params))))
            elif (
                self._initialize_id is not UNSET
                and message.method is UNSET
                and message.id == self._initialize_id
                and len(message.result)
            ):
                self._initialize_id = UNSET
                out.append(_accepting_proxy(message))
            else:
                out.append(line)
        return self._out.write(out)


def _accepting_proxy(answer: AgentLine) -> bytes:
    """The answer to the earlier form's initialize with ``_meta.proxy: true``: the conductor checks for it."""
    result = _decode(answer.result)
    if isinstance(result, dict):
        meta = result.get("_meta")
        result["_meta"] = {**meta, "proxy": True} if isinstance(meta, dict) else {"proxy": True}
    return _encode({"jsonrpc": "2.0", "id": answer.id, "result": result})


class _Client:
    """The client as the relay sees it through the conductor (a ``ClientPort``): what the relay sends goes out as
    it is (the successor's requests under the chain's ids); what the client sent is delivered on this port's
    thread, in order, from the queue the reader fills."""

    def __init__(self, chain: Chain) -> None:
        self._chain = chain
        self._thread: threading.Thread | None = None

    def start(self, relay: FromClient) -> None:
        self._thread = threading.Thread(target=self._deliver, args=(relay,), name="acp-registry-proxy-client")
        self._thread.start()

    def _deliver(self, relay: FromClient) -> None:
        deliver(iter(self._chain._client_lines.get, _END), relay)

    def send(self, lines: Sequence[bytes]) -> bool:
        return self._chain._to_client(lines)

    def join(self, timeout: float) -> None:
        """Stop delivering (as if the client had gone, whether or not the conductor did) and wait for the thread."""
        self._chain._client_lines.put(_END)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)


class _Successor:
    """The successor (the next proxy or the agent) as the relay sees it (an ``AgentPort``): what the relay sends is
    wrapped in the form's envelopes; the one reader of the conductor is this port's thread. Its end is the
    conductor's: said once the relay has asked it to end (``end``), which also stops the reader."""

    def __init__(self, chain: Chain) -> None:
        self._chain = chain
        self.asked = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake_read, self._wake_write = os.pipe()

    def start(self, relay: FromAgent) -> None:
        self._thread = threading.Thread(
            target=self._chain._read, args=(relay, self._wake_read), name="acp-registry-proxy-conductor"
        )
        self._thread.start()

    def send(self, lines: Sequence[bytes]) -> bool:
        return self._chain._to_successor(lines)

    def end(self) -> None:
        """Let the successor go: the reader stops (at once, if the conductor is still writing) and says its end."""
        self.asked.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")

    def join(self, timeout: float) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
