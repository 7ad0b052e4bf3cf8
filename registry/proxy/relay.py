"""The relay: the rules that move messages between a client port and an agent port (``registry.proxy.ports``).

Each direction is delivered by its port on one thread, in order; the relay never waits on the registry (what it
sees goes to the recorder's queue; what the proxy answers is the surface's, on the surface's thread). Client ->
agent: requests are forwarded under the proxy's own ids (``itertools.count``, shared with the requests the proxy
sends itself, so no two can collide) and the answer goes back under the client's id; notifications and the
client's answers to the agent's requests pass as the very bytes the client wrote, but for a ``$/cancel_request``,
which is made to name the proxy's id for the request (and dropped when that request is not waiting at the agent).
Agent -> client: requests (``session/request_permission``, ``fs/*``, ``terminal/*``, anything) and notifications
pass as the agent's bytes, written in one call per batch the port read; only responses are re-encoded (the
client's id around the agent's raw result), and a title update is what the title policy lets through
(``registry.proxy.titles``).

A client is never left waiting. When the agent ends before it answered, each pending request gets a -32603
error naming the agent and how it ended; when the proxy is stopped (SIGTERM, Ctrl-C, a host's ``stop``), each
gets one naming that; a request that arrives after the agent ended is answered so at once. The exit code does
not depend on timing: 1 when the agent ended without having been asked to (one line on stderr says how), else 0.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET

from registry.acp.jsonrpc import Incoming, Invalid, OverlongLine, encode_notification, incoming
from registry.errors import INTERNAL_ERROR, RpcError
from registry.proxy.identity import Identity
from registry.proxy.ports import AgentEnd, AgentPort, ClientPort, Line
from registry.proxy.surface import Pending, Surface
from registry.proxy.wire import (
    CANCEL,
    AgentLine,
    encode_error,
    encode_request,
    encode_response,
    peek_agent,
    title_update,
)

__all__ = ["Relay"]

log = logging.getLogger("acp_registry.proxy")

_NOISE_SHOWN: Final = 10  # malformed agent lines reported one by one; after that, every 1000th


class Relay:
    """The rules between ``client`` and ``agent``; ``surface`` is set before either port starts (``attach``)."""

    def __init__(self, agent: AgentPort, client: ClientPort, identity: Identity, command: str) -> None:
        """``command``: the agent's command as messages name it ("" for an agent reached through a port alone)."""
        self.agent = agent
        self.client = client
        self.identity = identity
        self.command = command
        self.surface: Surface | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, Pending] = {}
        self._lock = threading.Lock()
        self._noise = 0
        self._gone: RpcError | None = None  # set when the agent ended or the proxy stopped: why nothing is forwarded
        self._client_gone = False
        self._stopped = False
        self.ended = threading.Event()
        self._said: list[msgspec.Raw] = []  # the updates of the read being relayed, for the capture
        self.exit_code = 0
        self.signalled: Callable[[], str | None] = lambda: None
        """The stop signal the process received (its name), whether or not its handler has run yet: the host's
        (``acp-registry proxy`` sets it). Consulted when the agent's end is reported, so that a signal that came
        with the client's end (a terminal's Ctrl-C reaches both) is what the waiting requests are told."""

    def attach(self, surface: Surface) -> None:
        self.surface = surface

    # -- the surface's conversation -------------------------------------------------------------------

    def send_client(self, line: bytes) -> None:
        if not self.client.send([line]):
            self.stop(None)

    def request_agent(self, method: str, params: Any, on_answer: Callable[[AgentLine | None], None]) -> None:
        """Send the proxy's own request to the agent; ``on_answer`` gets the answer (None: the agent ended first),
        on the agent's thread (or at once, on the caller's, when the agent has already ended)."""
        line = self._forward((method, params), Pending(None, method, own=on_answer))
        if line is None:
            on_answer(None)
        else:
            self.agent.send([line])  # if the agent is gone, its end fails what is pending, this included

    # -- client -> agent ------------------------------------------------------------------------------

    def from_client(self, lines: Sequence[Line]) -> None:
        surface = self.surface
        assert surface is not None
        out: list[bytes] = []
        for line in lines:
            message = incoming(line, self.send_client)  # an invalid message or a batch is refused there
            if message is None:
                continue
            if message.is_response or not message.has_id:
                assert isinstance(line, bytes)
                if message.method == CANCEL:
                    cancel = self._cancel(message, line)
                    if cancel:
                        out.append(cancel)
                    continue
                out.append(line)  # a notification, or the client's answer to the agent: the client's own bytes
                continue
            routed = surface.route(message)
            if isinstance(routed, bytes):
                if routed:
                    self.send_client(routed)
                continue
            forwarded = self._forward(message, routed)
            if forwarded is None:
                gone = self._gone
                assert gone is not None
                self.send_client(encode_error(message.id, gone))
            else:
                out.append(forwarded)
        if out:
            self.agent.send(out)  # if the agent is gone, its port reports how, and what is pending is failed then

    def _forward(self, message: Incoming | tuple[str, Any], pending: Pending) -> bytes | None:
        """The line that sends a request to the agent under a new proxy id (None: the agent is gone)."""
        with self._lock:
            if self._gone is not None:
                return None
            proxy_id = next(self._ids)
            self._pending[proxy_id] = pending
        return encode_request(proxy_id, message)

    def _cancel(self, message: Incoming, line: bytes) -> bytes:
        """The client's ``$/cancel_request`` as the agent must get it: naming the proxy's id for the request
        (``b""``: that request is not waiting at the agent - answered, or the proxy's own to answer - so the agent
        has nothing to cancel, and a client's id could name another request of the agent's). One without a
        ``requestId`` passes as it is: the agent's to judge."""
        params = message.params
        if not isinstance(params, dict) or "requestId" not in params:
            return line
        named = params["requestId"]
        with self._lock:
            proxy_id = next(
                (
                    proxy_id
                    for proxy_id, pending in self._pending.items()
                    if pending.own is None and pending.client_id == named and type(pending.client_id) is type(named)
                ),
                None,
            )
        if proxy_id is None:
            log.debug("a $/cancel_request for no request waiting at the agent (%r); dropped", named)
            return b""
        return encode_notification(CANCEL, {**params, "requestId": proxy_id})

    def client_ended(self) -> None:
        """The client's input ended: the agent is asked to end (exit 0 unless it had already ended by itself); what
        it answers before it ends still reaches the client (a client may send its last request and close)."""
        self._client_gone = True
        self.agent.end()

    # -- agent -> client ------------------------------------------------------------------------------

    def from_agent(self, lines: Sequence[Line]) -> None:
        out: list[bytes] = []
        for line in lines:
            self._from_agent_line(line, out)
        self._hand_over()
        if out and not self.client.send(out):
            self.stop(None)  # the client cannot be written to any more: as if it had gone

    def _from_agent_line(self, line: Line, out: list[bytes]) -> None:
        if isinstance(line, bytes) and not line.strip():
            return
        message = peek_agent(line)
        if isinstance(message, Invalid):
            self._refused(line, message, out)
            return
        if message.method is not UNSET:
            assert isinstance(line, bytes)
            update = None
            if message.method == "session/update" and b"session_info_update" in line:
                update = title_update(message)
            elif message.method == "session/update":
                self._said.append(message.params)  # undecoded: the capture's to read, off the relay's path
            if update is None:
                out.append(line)  # a request to the client or a notification: the agent's own bytes
                return
            assert self.surface is not None
            relayed = self.surface.agent_title(line, update)
            if relayed is not None:
                out.append(relayed)
            return
        with self._lock:
            pending = self._pending.pop(message.id, None) if isinstance(message.id, int) else None
        if pending is None:
            self._report_noise(f"a response to no request of the proxy (id {message.id!r}); dropped")
            return
        if pending.own is not None:
            pending.own(message)
            return
        assert self.surface is not None
        self._hand_over()  # the updates before an answer are the capture's before the answer is
        out.append(self.surface.response(pending, message) or encode_response(pending.client_id, message))

    def _hand_over(self) -> None:
        """The updates relayed so far, to the capture (one call a read: ``Capture.updates``)."""
        if self._said and self.surface is not None:
            self.surface.capture.updates(self._said)
            self._said = []

    def _refused(self, line: Line, refusal: Invalid, out: list[bytes]) -> None:
        """An agent's line that is not relayed. A request of the agent's (its id and a ``"method"`` member are
        readable) is answered with the error ``serve`` would give, so the agent is not left waiting; an answer to a
        pending request is replaced by an error naming the agent."""
        size = line.size if isinstance(line, OverlongLine) else len(line)
        self._report_noise(f"a line of {size} bytes from the agent was not relayed: {refusal.error.message}")
        head = line.head if isinstance(line, OverlongLine) else line[:65536]
        if refusal.id is not None and b'"method"' in head:
            self.agent.send([encode_error(refusal.id, refusal.error)])
            return
        pending = None
        if isinstance(refusal.id, int):
            with self._lock:
                pending = self._pending.pop(refusal.id, None)
        if pending is not None and pending.own is None:
            error = RpcError(
                INTERNAL_ERROR, f"the agent {self.identity.name}'s answer was refused: {refusal.error.message}"
            )
            out.append(encode_error(pending.client_id, error))
        elif pending is not None and pending.own is not None:
            pending.own(None)

    def _report_noise(self, what: str) -> None:
        self._noise += 1
        if self._noise <= _NOISE_SHOWN or self._noise % 1000 == 0:
            more = f" ({self._noise} so far)" if self._noise > _NOISE_SHOWN else ""
            log.warning("%s%s", what, more)

    # -- ends -----------------------------------------------------------------------------------------

    def agent_ended(self, end: AgentEnd) -> None:
        """The agent ended: every pending request is answered with an error saying how - the signal that stopped
        the proxy, when one came first; the client's end, when that is why it was asked to end; exit 1 unless the
        proxy had asked it to end."""
        signalled = self.signalled() if end.asked else None
        if signalled is not None:
            self.stop(signalled, signal=True)  # came with the client's end, before its handler ran: the reason
        agent = f"the agent {self.identity.name}" + (f" ({self.command})" if self.command else "")
        why = f"{agent} {end.how} before answering"
        if end.asked and self._client_gone:
            why = f"the client's input ended; {why}"
        error = RpcError(INTERNAL_ERROR, why)
        with self._lock:
            self._gone = self._gone or error
            pending, self._pending = list(self._pending.values()), {}
        self._fail(pending, error)
        waiting = sum(p.own is None for p in pending)
        if not end.asked:
            self.exit_code = 1
            log.error("%s %s", agent, end.how)
        elif waiting:
            log.warning("%s; %d requests were waiting for it, each was answered with an error", why, waiting)
        self.ended.set()

    def stop(self, why: str | None, *, signal: bool = False) -> None:
        """End as if the client had gone; ``why`` (a signal's name, a host's reason): each pending request of the
        client is answered with an error saying so first, and one line on stderr says how many. A ``signal`` is said
        even when nothing was waiting, once - unless the conversation had already ended (then it is not news)."""
        if why is not None:
            error = RpcError(
                INTERNAL_ERROR, f"the proxy was stopped ({why}) before the agent {self.identity.name} answered"
            )
            with self._lock:
                said = self._stopped
                self._stopped = True
                if self.ended.is_set():
                    said = True
                self._gone = self._gone or error
                pending, self._pending = list(self._pending.values()), {}
            waiting = [p for p in pending if p.own is None]
            self._fail(pending, error)
            if waiting:
                log.warning(
                    "stopped (%s): %d requests were waiting for the agent; each was answered with an error",
                    why,
                    len(waiting),
                )
            elif signal and not said:
                log.warning("stopped (%s)", why)
        self.agent.end()

    def _fail(self, pending: list[Pending], error: RpcError | None) -> None:
        lines = []
        for entry in pending:
            if entry.own is not None:
                entry.own(None)
            elif error is not None:
                lines.append(encode_error(entry.client_id, error))
        if lines:
            self.client.send(lines)
