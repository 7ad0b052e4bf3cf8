"""The client on two file descriptors (the proxy's stdin and stdout, or a host's pipe or socket pair): one
implementation of ``ClientPort``. One thread reads the client's lines and hands them to the relay batch by batch
(and is woken to stop by ``join``, whether or not the client's input ended); writes are whole lines under a lock
(``LineWriter``)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Sequence

from registry.proxy.lines import LineReader, LineWriter
from registry.proxy.ports import FromClient, Line

__all__ = ["StdioClient", "deliver"]

log = logging.getLogger("acp_registry.proxy")


class StdioClient:
    def __init__(self, client_in: int, client_out: int) -> None:
        self._in = client_in
        self._out = LineWriter(client_out)
        self._thread: threading.Thread | None = None
        self._wake_read, self._wake_write = os.pipe()

    def start(self, relay: FromClient) -> None:
        self._thread = threading.Thread(target=self._read, args=(relay,), name="acp-registry-proxy-client")
        self._thread.start()

    def _read(self, relay: FromClient) -> None:
        deliver(LineReader(self._in, wake=self._wake_read).batches(), relay)

    def send(self, lines: Sequence[bytes]) -> bool:
        return self._out.write(lines)

    def join(self, timeout: float) -> None:
        """Stop reading the client (its input may stay open: a host's pipe) and wait for the reader."""
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


def deliver(batches: Iterable[Sequence[Line]], relay: FromClient) -> None:
    """The client's lines to ``relay``, batch by batch, then its end (also when reading them failed: a bug, logged;
    the conversation cannot go on without them)."""
    try:
        for batch in batches:
            relay.from_client(batch)
    except Exception:
        log.exception("relaying the client's messages failed")
    relay.client_ended()
