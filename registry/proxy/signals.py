"""SIGTERM and Ctrl-C for a process that runs a ``Proxy`` (``acp-registry proxy``): each stops the proxy, naming itself.

Python runs a signal's handler on the main thread only, and only when that thread runs: a main thread asleep in a
wait the signal did not interrupt (the kernel may hand the signal to another thread) runs it late - after the
client's end, which the same Ctrl-C or the same group's SIGTERM often brings, has already had the waiting requests
answered as the agent's end. So the signal is taken where it lands: ``signal.set_wakeup_fd`` has Python's own
C-level handler write its number to a pipe at once, in whatever thread; a thread of ours waits on that pipe and
stops the proxy (``Proxy.stop(name, signal=True)``), and the relay asks ``received`` before it answers the waiting
requests with the agent's end. Installed from the start of the proxy's life (a signal before the proxy runs stops it
as soon as it does: no ``KeyboardInterrupt`` in the middle of its start) until ``Proxy.close`` has written what the
recorder holds.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from registry.proxy.proxy import Proxy

__all__ = ["STOPPING", "StopSignals"]

STOPPING: Final = (signal.SIGTERM, signal.SIGINT)
_WAKE: Final = b"\0"  # not a signal's number: ``restore`` waking the watcher to end


class StopSignals:
    """The stop signals as one process's own (install on the main thread; elsewhere it does nothing)."""

    def __init__(self) -> None:
        self.received: str | None = None
        """The first stop signal received (its name), whether or not the proxy was stopped for it yet."""
        self._lock = threading.RLock()
        self._proxy: Proxy | None = None
        self._installed = threading.current_thread() is threading.main_thread()
        self._previous: dict[int, Any] = {}
        self._thread: threading.Thread | None = None
        if not self._installed:
            return
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {signum: signal.signal(signum, self._handler) for signum in STOPPING}
        self._thread = threading.Thread(target=self._watch, name="acp-registry-proxy-signals", daemon=True)
        self._thread.start()

    def attach(self, proxy: Proxy) -> None:
        """Stop ``proxy`` on each stop signal from now on (at once for one already received); the relay asks
        ``received`` when the agent's end is reported."""
        proxy.relay.signalled = self.take
        with self._lock:
            self._proxy = proxy
        self._stop(self.take())

    def take(self) -> str | None:
        """The first stop signal received, reading what the handler wrote even if no thread has acted on it yet."""
        self._drain()
        return self.received

    def _drain(self) -> list[str]:
        """The stop signals the handler wrote since the last look (the first is kept in ``received``)."""
        if not self._installed:
            return []
        with self._lock:
            try:
                data = os.read(self._read, 64)
            except OSError:  # nothing there (BlockingIOError), or closed by ``restore``
                return []
            names = [signal.Signals(n).name for n in data if n in STOPPING]
            if names and self.received is None:
                self.received = names[0]
            return names

    def _stop(self, name: str | None) -> None:
        with self._lock:
            proxy = self._proxy
        if name is not None and proxy is not None:
            proxy.stop(name, signal=True)  # returns at once; said on stderr once

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        """Python's handler, on the main thread whenever it runs: the watcher stops the proxy (the main thread may
        hold the relay's lock when this runs, so it takes none)."""
        if self.received is None:
            self.received = signal.Signals(signum).name

    def _watch(self) -> None:
        poll = select.poll()
        poll.register(self._read, select.POLLIN)
        while self._thread is not None:
            poll.poll()
            for name in self._drain():
                self._stop(name)

    def restore(self) -> None:
        """Give the signals back as they were (after ``Proxy.close``), and end the watcher."""
        if not self._installed:
            return
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._previous_fd)
        thread, self._thread = self._thread, None
        with contextlib.suppress(OSError):
            os.write(self._write, _WAKE)
        if thread is not None:
            thread.join(5.0)
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._installed = False
