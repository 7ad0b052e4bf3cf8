"""The agent as a child process (``registry.proxy.spawn``): one implementation of ``AgentPort``.

Two threads: the reader hands the agent's stdout to the relay batch by batch; the watcher waits for the process
to exit and then says once how it ended - after the reader has reached the end of the agent's stdout, or, when
something the agent started still holds that stdout open (a ``setsid`` child), after ``DRAIN`` seconds: the
reader is then woken and stops, so that a dead agent's pending requests are answered at once, not when its last
child ends. An agent that closes its stdout but lives on is ended after its grace period. ``end`` closes the
agent's stdin, gives it ``grace`` seconds, then sends its process group SIGTERM and, ``KILL_AFTER`` seconds later,
SIGKILL. Every thread is joined by ``join``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from typing import Final

from registry.proxy.lines import LineReader, LineWriter
from registry.proxy.ports import AgentEnd, FromAgent
from registry.proxy.spawn import Spawned

__all__ = ["DRAIN", "KILL_AFTER", "ChildAgent"]

KILL_AFTER: Final = 2.0  # seconds between SIGTERM and SIGKILL for an agent that does not end
DRAIN: Final = 1.0
"""Seconds the agent's stdout is still read after the agent exited, when something else holds it open."""


class ChildAgent:
    """An ACP agent on the other end of a pipe pair, started by ``spawn``."""

    def __init__(self, spawned: Spawned, *, grace: float = 3.0) -> None:
        self.process, to_agent, self._from_agent = spawned
        self._to_agent = LineWriter(to_agent)
        self._grace = grace
        self._wake_read, self._wake_write = os.pipe()
        self._eof = threading.Event()
        self._asked = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._relay: FromAgent | None = None
        self._ending = False

    def start(self, relay: FromAgent) -> None:
        self._relay = relay
        self._spawn_thread(self._read, "acp-registry-proxy-agent")
        self._spawn_thread(self._watch, "acp-registry-proxy-exit")

    def _spawn_thread(self, target: object, name: str) -> None:
        thread = threading.Thread(target=target, name=name)  # type: ignore[arg-type]
        with self._lock:  # started before it is listed: ``join`` (any thread, any time) never meets one unstarted
            thread.start()
            self._threads.append(thread)

    def send(self, lines: Sequence[bytes]) -> bool:
        return self._to_agent.write(lines)

    # -- the threads ------------------------------------------------------------------------------------

    def _read(self) -> None:
        relay = self._relay
        assert relay is not None
        try:
            for batch in LineReader(self._from_agent, wake=self._wake_read).batches():
                relay.from_agent(batch)
        except Exception:
            import logging  # noqa: PLC0415 - only for a bug

            logging.getLogger("acp_registry.proxy").exception("relaying the agent's messages failed")
        finally:
            self._eof.set()
        try:  # an agent that closed its stdout but lives on is ended
            self.process.wait(timeout=self._grace + KILL_AFTER)
        except subprocess.TimeoutExpired:
            self._kill()

    def _watch(self) -> None:
        relay = self._relay
        assert relay is not None
        code = self.process.wait()
        if not self._eof.wait(DRAIN):
            os.write(self._wake_write, b"x")  # a child of the agent holds its stdout: stop reading it
            self._eof.wait()
        with self._lock:
            reader = self._threads[0]
        reader.join()
        os.close(self._from_agent)
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        relay.agent_ended(AgentEnd(how, self._asked.is_set()))

    # -- ending ---------------------------------------------------------------------------------------

    def end(self) -> None:
        """Ask the agent to end (returns at once). An agent that had already exited by itself is not counted as
        asked: its end is reported as its own, however soon after it the client went."""
        with self._lock:
            if self._ending:
                return
            self._ending = True
            if not self._exited():
                self._asked.set()
        self._spawn_thread(self._shut_down, "acp-registry-proxy-stop")

    def _exited(self) -> bool:
        """Whether the agent's process has exited (without reaping it: the watcher does)."""
        if self.process.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped by the watcher just now
            return True

    def _shut_down(self) -> None:
        self._to_agent.close()
        try:
            self.process.wait(timeout=self._grace)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        for sig, wait in ((signal.SIGTERM, KILL_AFTER), (signal.SIGKILL, None)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            except PermissionError:  # pragma: no cover - not ours any more
                return
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def kill(self) -> None:
        """End the agent at once (nothing to relay any more)."""
        self._asked.set()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def join(self, timeout: float) -> None:
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
