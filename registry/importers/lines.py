"""Reading JSON-lines files incrementally: complete lines past a remembered offset, never a torn last line.

A ``Tail`` remembers a file's identity (device, inode), its size and mtime when last read, the offset just after
the last newline consumed, and a fingerprint of its first 4 KiB and of the 256 bytes before the offset. The next
read continues at the offset only when the file is the same one, no shorter than the offset, and has the same
bytes there; otherwise it was rewritten, truncated or replaced, and the caller re-reads it from the start
(``restart``). A last line without its newline
is left for a later pass: a writer may be in the middle of it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from typing import IO, Final, Generic, Protocol, Self, TypeVar

import msgspec

__all__ = ["LineStats", "Tail", "TailRead", "compressed_lines", "decode_lines", "same_file", "signature"]

HEAD_BYTES: Final = 4096
TAIL_BYTES: Final = 256
_GLUE_ATTEMPTS: Final = 64  # each attempt decodes a prefix: a hostile line full of "}{" must stay linear
_CHUNK: Final = 1 << 20

T = TypeVar("T")


class Tail(msgspec.Struct, array_like=True, frozen=True):
    """Where a file was read up to, and how to recognise it as the same file next time."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    offset: int
    fingerprint: bytes


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a file changed without reading it (the trigger only: times never become activity)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_file(st: os.stat_result, tail: Tail | None) -> bool:
    """True when nothing can have changed since ``tail`` was taken: same file, same size, same mtime."""
    return tail is not None and signature(st) == (tail.dev, tail.ino, tail.size, tail.mtime_ns)


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()[:16]


class LineStats:
    """Lines a read could not use, for the summary."""

    def __init__(self) -> None:
        self.oversized = 0
        self.unreadable = 0


class TailRead:
    """One pass over the new complete lines of a file. Use as a context manager; ``tail`` after ``lines()``."""

    def __init__(self, path: str, previous: Tail | None, *, cap: int) -> None:
        self.path = path
        self._file: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by __exit__
        try:
            st = os.fstat(self._file.fileno())
            self._stat = st
            self.cap = cap
            self.restart = True
            start = 0
            if (
                previous is not None
                and (previous.dev, previous.ino) == (st.st_dev, st.st_ino)
                and st.st_size >= previous.offset
                and self._fingerprint(previous.offset) == previous.fingerprint
            ):
                start = previous.offset
                self.restart = previous.offset == 0
            self.start = start
            self.offset = start
            self.stats = LineStats()
            self.bytes_read = 0
        except BaseException:
            self._file.close()
            raise

    def _fingerprint(self, offset: int) -> bytes:
        fd = self._file.fileno()
        before = min(TAIL_BYTES, offset)
        return _digest(os.pread(fd, min(HEAD_BYTES, offset), 0) + b"\0" + os.pread(fd, before, offset - before))

    def lines(self) -> Iterator[bytes | None]:
        """Each complete line in [offset, size at open); None for a line over the cap (skipped, counted)."""
        yield from split_lines(self._file, self, self.start, self._stat.st_size)

    @property
    def tail(self) -> Tail:
        st = self._stat
        return Tail(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, self.offset, self._fingerprint(self.offset))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


class _Reading(Protocol):
    offset: int
    bytes_read: int
    cap: int
    stats: LineStats


def split_lines(stream: IO[bytes], into: _Reading, start: int, end: int | None) -> Iterator[bytes | None]:
    """Complete lines of ``stream`` from ``start`` up to ``end`` (None: to EOF), moving ``into.offset`` past
    each newline. Memory stays under ``cap`` per line: a longer line is dropped as it streams by."""
    if end is not None:
        stream.seek(start)
    pos = start
    cap = into.cap
    partial: list[bytes] = []
    partial_len = 0
    dropping = False
    while end is None or pos < end:
        chunk = stream.read(_CHUNK if end is None else min(_CHUNK, end - pos))
        if not chunk:
            if end is not None:
                raise OSError("the file shrank while it was read")
            break
        pos += len(chunk)
        into.bytes_read += len(chunk)
        parts = chunk.split(b"\n")
        rest = parts.pop()
        if parts:
            first = parts[0]
            if dropping or partial_len + len(first) > cap:
                into.stats.oversized += 1
                yield None
            elif partial:
                partial.append(first)
                yield b"".join(partial)
            else:
                yield first
            for line in parts[1:]:
                if len(line) > cap:
                    into.stats.oversized += 1
                    yield None
                else:
                    yield line
            partial, partial_len, dropping = [], 0, False
            into.offset = pos - len(rest)
        partial_len += len(rest)
        if not dropping and rest:
            if partial_len > cap:
                partial, dropping = [], True
            else:
                partial.append(rest)
    if end is None and partial:
        yield b"".join(partial)  # a whole stream: its last line is complete without a newline


class _StreamReading:
    def __init__(self, cap: int, stats: LineStats) -> None:
        self.offset = 0
        self.bytes_read = 0
        self.cap = cap
        self.stats = stats


def compressed_lines(path: str, stats: LineStats, *, cap: int) -> Iterator[bytes | None]:
    """The lines of a zstd-compressed file, streamed through the ``zstd`` binary (FileNotFoundError without one).

    Compressed files are written whole, so they are read whole (and their last line needs no newline). A file
    zstd cannot decompress raises OSError once the stream ends, so the caller drops what it folded.
    """
    binary = shutil.which("zstd")
    if binary is None:
        raise FileNotFoundError("zstd is not installed (needed for .zst files)")
    reading = _StreamReading(cap, stats)
    with subprocess.Popen([binary, "-dcq", "--", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        try:
            yield from split_lines(proc.stdout, reading, 0, None)
        except BaseException:
            proc.kill()
            raise
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise OSError(f"zstd failed: {err.decode(errors='replace').strip() or proc.returncode}")


class _Glued(Generic[T]):
    """Recovery of records written without a newline between them (``}{``, seen in Qwen Code files)."""

    def __init__(self, decoder: msgspec.json.Decoder[T]) -> None:
        self._decoder = decoder

    def split(self, line: bytes) -> list[T] | None:
        out: list[T] = []
        rest = line
        attempts = 0
        while rest:
            try:
                out.append(self._decoder.decode(rest))
                return out
            except msgspec.DecodeError:
                pass
            cut = rest.find(b"}{")
            while cut >= 0 and attempts < _GLUE_ATTEMPTS:
                attempts += 1
                try:
                    out.append(self._decoder.decode(rest[: cut + 1]))
                except msgspec.DecodeError:
                    cut = rest.find(b"}{", cut + 1)
                    continue
                rest = rest[cut + 1 :]
                break
            else:
                return None
        return out


def decode_lines(lines: Iterable[bytes | None], decoder: msgspec.json.Decoder[T], stats: LineStats) -> Iterator[T]:
    """Records of JSON lines: blank lines ignored, glued records split, unreadable lines counted and skipped."""
    glued: _Glued[T] | None = None
    for line in lines:
        if line is None:
            continue
        try:
            yield decoder.decode(line)
            continue
        except msgspec.DecodeError:
            if not line.strip():
                continue
        if glued is None:
            glued = _Glued(decoder)
        records = glued.split(line) if b"}{" in line else None
        if records is None:
            stats.unreadable += 1
        else:
            yield from records
