"""Reading and writing the proxy's two pipes: whole lines, bounded, batched, in order.

``LineReader`` reads a file descriptor in chunks (``os.read``) and hands out every complete line a chunk holds at
once, so a flood of small messages costs one read and (downstream) one write per chunk rather than per line,
while a single line is handed out as soon as its newline arrives - nothing waits for more input. A line longer
than the limit (``registry.limits.MAX_MESSAGE_BYTES``, the same as ``serve``'s) is never held: its first bytes
are kept (to find an id in) and the rest is skipped up to its newline, so memory stays bounded whatever a side
sends. ``LineWriter`` writes batches of lines to a descriptor under a lock, whole lines only.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Iterator, Sequence
from typing import Final

from registry.acp.jsonrpc import OverlongLine
from registry.limits import MAX_MESSAGE_BYTES

__all__ = ["LineReader", "LineWriter"]

_READ: Final = 256 * 1024  # bytes asked of one os.read
_HEAD: Final = 64 * 1024  # bytes of an over-long line kept to find its id in


class LineReader:
    """The lines of a file descriptor, without their newlines, batch by batch until EOF - or until ``wake`` (the
    read end of a pipe) becomes readable: then the reader stops as at EOF, so that a thread reading a pipe that
    something else holds open (an agent's child that kept its stdout) can still be ended and joined."""

    def __init__(self, fd: int, limit: int = MAX_MESSAGE_BYTES, *, wake: int | None = None) -> None:
        self._fd = fd
        self._limit = limit
        self._poll: select.poll | None = None
        self._wake = wake
        if wake is not None:
            self._poll = select.poll()
            self._poll.register(fd, select.POLLIN)
            self._poll.register(wake, select.POLLIN)

    def _read(self) -> bytes:
        if self._poll is not None:
            while True:
                ready = self._poll.poll()
                if any(fd == self._wake for fd, _ in ready):
                    return b""
                if ready:
                    break
        return os.read(self._fd, _READ)

    def batches(self) -> Iterator[list[bytes | OverlongLine]]:
        """Every complete line each read brings (a batch is never empty); the last line without a newline
        before EOF is a line too."""
        limit = self._limit
        pending = bytearray()
        skipping: OverlongLine | None = None  # the over-long line being skipped: its head and size so far
        while True:
            try:
                chunk = self._read()
            except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for odd platforms
                continue
            except OSError:
                chunk = b""
            if not chunk:
                if skipping is not None:
                    yield [OverlongLine(skipping.head, skipping.size + len(pending))]
                elif pending:
                    yield [
                        bytes(pending) if len(pending) <= limit else OverlongLine(bytes(pending[:_HEAD]), len(pending))
                    ]
                return
            batch: list[bytes | OverlongLine] = []
            start = 0
            if skipping is not None:
                end = chunk.find(b"\n")
                if end < 0:
                    skipping = OverlongLine(skipping.head, skipping.size + len(chunk))
                    continue
                batch.append(OverlongLine(skipping.head, skipping.size + end))
                skipping = None
                start = end + 1
            end = chunk.find(b"\n", start)
            if end >= 0 and pending:  # the line begun in an earlier read ends here
                pending += chunk[start:end]
                batch.append(
                    bytes(pending) if len(pending) <= limit else OverlongLine(bytes(pending[:_HEAD]), len(pending))
                )
                pending.clear()
                start = end + 1
                end = chunk.find(b"\n", start)
            while end >= 0:
                if end - start <= limit:
                    batch.append(chunk[start:end])
                else:
                    batch.append(OverlongLine(chunk[start : start + _HEAD], end - start))
                start = end + 1
                end = chunk.find(b"\n", start)
            pending += chunk[start:]
            if len(pending) > limit:  # no newline yet and already too long: stop holding it
                skipping = OverlongLine(bytes(pending[:_HEAD]), len(pending))
                pending.clear()
            if batch:
                yield batch


class LineWriter:
    """Whole lines to a file descriptor, one batch at a time (one ``write`` call per batch when it fits)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self.broken = False

    def write(self, lines: Sequence[bytes]) -> bool:
        """Write ``lines`` (each without its newline); False when the reader has gone away."""
        if not lines:
            return True
        data = b"\n".join(lines) + b"\n"
        with self._lock:
            if self.broken:
                return False
            view = memoryview(data)
            try:
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
            except (BrokenPipeError, ValueError, OSError):
                self.broken = True
                return False
        return True

    def close(self) -> None:
        with self._lock:
            self.broken = True
            with contextlib.suppress(OSError):
                os.close(self._fd)
