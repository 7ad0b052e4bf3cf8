"""The relay: an ACP agent as a child process, spoken to on its stdio, relayed to a client on two descriptors.

Two threads move lines, one per direction, each in the order it reads them; neither waits on the registry
(observations go to ``Recorder``'s queue). Client -> agent: requests are forwarded under the proxy's own ids
(``itertools.count``, shared with the requests the proxy sends itself, so no two can collide) and the response
goes back under the client's id; notifications and the client's responses to the agent's requests pass as the
very bytes the client wrote. Agent -> client: requests (``session/request_permission``, ``fs/*``,
``terminal/*``, anything) and notifications pass as the agent's bytes, read in chunks and written in one
``write`` per chunk; only responses are re-encoded (the client's id around the agent's raw result). What the
proxy answers itself and what it adds to answers is ``registry.proxy.surface``.

Faults: the agent's stdout ends (it exited or crashed) while the client is there -> each pending client request
gets a -32603 error naming the agent and how it ended, one line goes to stderr and ``run`` returns 1. The
client's input ends -> the agent's stdin is closed, it gets ``grace`` seconds to exit, then its process group is
sent SIGTERM and, two seconds later, SIGKILL; ``run`` returns 0. The agent's stderr is the proxy's stderr.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from msgspec import UNSET

from registry.acp.jsonrpc import Incoming, Invalid, OverlongLine, encode_notification, incoming
from registry.errors import INTERNAL_ERROR, RpcError
from registry.proxy.lines import LineReader, LineWriter
from registry.proxy.names import agent_name
from registry.proxy.recorder import Recorder
from registry.proxy.spawn import Spawned, spawn
from registry.proxy.surface import Pending, Surface
from registry.proxy.wire import AgentLine, encode_error, encode_request, encode_response, peek_agent, title_update
from registry.service import SessionRegistry

__all__ = ["Proxy"]

log = logging.getLogger("acp_registry.proxy")

_KILL_AFTER: Final = 2.0  # seconds between SIGTERM and SIGKILL for an agent that does not end
_NOISE_SHOWN: Final = 10  # malformed agent lines reported one by one; after that, every 1000th


class Proxy:
    """Relays ACP between a client (``client_in`` / ``client_out``, file descriptors) and ``command``, recording
    into ``registry``. ``agent`` names the agent in the registry (default: its ``agentInfo.name``, else the
    command's basename, mapped by ``registry.proxy.names``). ``run()`` blocks until one side ends."""

    def __init__(
        self,
        registry: SessionRegistry,
        command: Sequence[str],
        *,
        agent: str | None = None,
        client_in: int = 0,
        client_out: int = 1,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        grace: float = 3.0,
        import_history: bool = True,
    ) -> None:
        if not command:
            raise ValueError("the agent's command is empty")
        self.registry = registry
        self.command = list(command)
        self.named = agent is not None
        self._client_in = client_in
        self._to_client = LineWriter(client_out)
        self._env = None if env is None else dict(env)
        self._cwd = cwd
        self._grace = grace
        self._ids = itertools.count(1)
        self._pending: dict[int, Pending] = {}
        self._lock = threading.Lock()
        self._titles = threading.Lock()
        self._agent_titled: set[str] = set()
        self._pushed_titles: dict[str, str | None] = {}  # the proxy's own titles sent, until the agent titles
        self._closing = threading.Event()
        self._ended = threading.Event()
        self._exit_code = 0
        self._noise = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_agent: LineWriter | None = None
        self.recorder = Recorder(registry, self._push_update)
        self.recorder.agent = agent_name(agent) if agent is not None else agent_name(os.path.basename(self.command[0]))
        self.surface = Surface(self, import_history=import_history)

    @property
    def agent(self) -> str:
        """The agent's name in the registry."""
        return self.recorder.agent

    # -- running --------------------------------------------------------------------------------------

    def start(self, spawned: Spawned | None = None) -> None:
        """Start the agent (``OSError`` when it cannot be started), or take over one ``spawn`` started with this
        proxy's command, and start the agent's reader thread."""
        if spawned is None:
            spawned = spawn(self.command, env=self._env, cwd=self._cwd)
        self._proc, to_agent, from_agent = spawned
        self._to_agent = LineWriter(to_agent)
        self._from_agent = from_agent
        threading.Thread(target=self._agent_loop, name="acp-registry-proxy-agent", daemon=True).start()
        threading.Thread(target=self._watch_exit, name="acp-registry-proxy-exit", daemon=True).start()

    def _watch_exit(self) -> None:
        """When the agent has exited but something it started still holds its stdout (its reader never sees EOF),
        end its process group, so that the exit is noticed and reported."""
        proc = self._proc
        assert proc is not None
        proc.wait()
        if not self._ended.wait(self._grace + 2 * _KILL_AFTER):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def run(self) -> int:
        """Start the agent (unless started), relay until one side ends; the exit code (0: the client ended)."""
        if self._proc is None:
            self.start()
        threading.Thread(target=self._client_loop, name="acp-registry-proxy-client", daemon=True).start()
        self._ended.wait()
        return self._exit_code

    def stop(self) -> None:
        """End as if the client had gone: the agent's stdin closes, it is given ``grace`` seconds, then ended."""
        threading.Thread(target=self._shutdown, name="acp-registry-proxy-stop", daemon=True).start()

    def close(self) -> None:
        """Write what the recorder holds and stop it (the registry stays open: it is the caller's)."""
        self.surface.close()
        self.recorder.close()

    # -- client -> agent ------------------------------------------------------------------------------

    def _client_loop(self) -> None:
        # Stopped by a failed send: the agent is gone, and its reader reports it and fails what is pending.
        if _relay(self._client_in, "client", self._from_client, self._send_agent):
            self._shutdown()  # the client's input ended

    def _from_client(self, line: bytes | OverlongLine, out: list[bytes]) -> None:
        message = incoming(line, self.send_client)  # an invalid message or a batch is refused there
        if message is None:
            return
        if message.is_response or not message.has_id:
            assert isinstance(line, bytes)
            out.append(line)  # a notification, or the client's answer to the agent: the client's own bytes
            return
        assert message.method is not None
        if out and self.surface.answers(message.method):  # what came before this request reaches the agent first
            self._send_agent(out)
            out.clear()
        answer = self.surface.answer(message)
        if answer is not None:
            if answer:
                self.send_client(answer)
            return
        out.append(self.forward(message, self.surface.observer(message)))

    def forward(self, message: Incoming | tuple[str, Any], pending: Pending) -> bytes:
        """The line that sends a request to the agent under a new proxy id, ``pending`` waiting for its answer."""
        proxy_id = next(self._ids)
        with self._lock:
            self._pending[proxy_id] = pending
        return encode_request(proxy_id, message)

    def request_agent(self, method: str, params: Any, on_answer: Callable[[AgentLine | None], None]) -> None:
        """Send the proxy's own request to the agent; ``on_answer`` gets the response (None: the agent ended),
        on the agent's reader thread."""
        line = self.forward((method, params), Pending(None, method, own=on_answer))
        self._send_agent([line])

    def _send_agent(self, lines: list[bytes]) -> bool:
        return self._to_agent is not None and self._to_agent.write(lines)

    # -- agent -> client ------------------------------------------------------------------------------

    def _agent_loop(self) -> None:
        try:
            _relay(self._from_agent, "agent", self._from_agent_line, self._to_the_client)
        finally:
            os.close(self._from_agent)
        self._agent_ended()

    def _to_the_client(self, lines: list[bytes]) -> bool:
        if not self._to_client.write(lines):
            self.stop()  # the client cannot be written to any more: as if it had gone
        return True  # the agent is still read to its end: that is what reports it and fails what is pending

    def _from_agent_line(self, line: bytes | OverlongLine, out: list[bytes]) -> None:
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
            if update is None:
                out.append(line)  # a request to the client or a notification: the agent's own bytes
                return
            native, title = update.session_id, update.title
            with self._titles:
                self._agent_titled.add(native)
                # The agent gives the very title the proxy already told the client (it titled the session from
                # the same prompt, after the turn): the client has it; nothing else in the update, nothing to say.
                pushed = self._pushed_titles.pop(native, _NOT_PUSHED)  # no push follows an agent's title
                repeated = update.alone and pushed == title
            if not repeated:
                out.append(line)
            self.recorder.put(lambda r: r.agent_title(native, title))
            return
        with self._lock:
            pending = self._pending.pop(message.id, None) if isinstance(message.id, int) else None
        if pending is None:
            self._report_noise(f"a response to no request of the proxy (id {message.id!r}); dropped")
            return
        if pending.own is not None:
            pending.own(message)
            return
        out.append(self.surface.response(pending, message) or encode_response(pending.client_id, message))

    def _refused(self, line: bytes | OverlongLine, refusal: Invalid, out: list[bytes]) -> None:
        """An agent's line that is not relayed. A request of the agent's (its id and a ``"method"`` member are
        readable) is answered with the error ``serve`` would give, so the agent is not left waiting; an answer to a
        pending request is replaced by an error naming the agent."""
        size = line.size if isinstance(line, OverlongLine) else len(line)
        self._report_noise(f"a line of {size} bytes from the agent was not relayed: {refusal.error.message}")
        head = line.head if isinstance(line, OverlongLine) else line[:65536]
        if refusal.id is not None and b'"method"' in head:
            self._send_agent([encode_error(refusal.id, refusal.error)])
            return
        pending = None
        if isinstance(refusal.id, int):
            with self._lock:
                pending = self._pending.pop(refusal.id, None)
        if pending is not None and pending.own is None:
            error = RpcError(INTERNAL_ERROR, f"the agent {self.agent}'s answer was refused: {refusal.error.message}")
            out.append(encode_error(pending.client_id, error))
        elif pending is not None and pending.own is not None:
            pending.own(None)

    def _report_noise(self, what: str) -> None:
        self._noise += 1
        if self._noise <= _NOISE_SHOWN or self._noise % 1000 == 0:
            more = f" ({self._noise} so far)" if self._noise > _NOISE_SHOWN else ""
            log.warning("%s%s", what, more)

    def send_client(self, line: bytes) -> None:
        self._to_client.write([line])

    def _push_update(self, native: str, update: dict[str, Any]) -> None:
        """The proxy's own title for a session, to the client (from the recorder's thread) - unless the agent has
        titled the session since: checked and written under the lock the agent's reader takes before relaying
        an agent's title, so the client never sees the proxy's title after the agent's. An agent's later update
        that repeats the title sent, and says nothing else, is then not relayed: the client has it."""
        with self._titles:
            if native not in self._agent_titled:
                self.send_client(_encode_update(native, update))
                if "title" in update:
                    self._pushed_titles[native] = update["title"]

    # -- ends ----------------------------------------------------------------------------------------

    def _agent_ended(self) -> None:
        proc = self._proc
        assert proc is not None
        try:
            code = proc.wait(timeout=self._grace + _KILL_AFTER + 1)
        except subprocess.TimeoutExpired:  # it closed its stdout but lives on: end it
            self._kill()
            code = proc.wait()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        with self._lock:
            pending, self._pending = self._pending, {}
        error = RpcError(INTERNAL_ERROR, f"the agent {self.agent} ({self.command[0]}) {how} before answering")
        for entry in pending.values():
            if entry.own is not None:
                entry.own(None)
            elif not self._closing.is_set():
                self.send_client(encode_error(entry.client_id, error))
        if not self._closing.is_set():
            self._exit_code = 1
            log.error("the agent %s (%s) %s", self.agent, self.command[0], how)
            self._closing.set()
        self._ended.set()

    def _shutdown(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        if self._to_agent is not None:
            self._to_agent.close()
        proc = self._proc
        if proc is None:
            self._ended.set()
            return
        try:
            proc.wait(timeout=self._grace)
        except subprocess.TimeoutExpired:
            self._kill()
        if not self._ended.wait(_KILL_AFTER):
            # The agent has ended, but something it started still holds its stdout: end its whole group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if not self._ended.wait(_KILL_AFTER):
                log.warning("the agent's stdout stays open after it ended; leaving it")
                self._ended.set()

    def _kill(self) -> None:
        proc = self._proc
        assert proc is not None
        for sig, wait in ((signal.SIGTERM, _KILL_AFTER), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


def _relay(
    source: int,
    side: str,
    handle: Callable[[bytes | OverlongLine, list[bytes]], None],
    deliver: Callable[[list[bytes]], bool],
) -> bool:
    """One direction: ``source`` read in chunks, each line handled (what goes on is appended to a list), and what
    a chunk made delivered in one write. True when ``source`` ended (or reading it failed: a bug, logged - the
    conversation cannot go on without this thread), False as soon as ``deliver`` says the other side is gone."""
    try:
        for batch in LineReader(source).batches():
            out: list[bytes] = []
            for line in batch:
                handle(line, out)
            if out and not deliver(out):
                return False
    except Exception:
        log.exception("relaying the %s's messages failed", side)
    return True


_NOT_PUSHED: Final = object()


def _encode_update(native: str, update: dict[str, Any]) -> bytes:
    return encode_notification("session/update", {"sessionId": native, "update": update})
