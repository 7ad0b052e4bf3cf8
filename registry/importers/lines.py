"""Reading JSON-lines files incrementally: complete lines past a remembered offset, never a torn last line.

A ``Tail`` remembers a file's identity (device, inode), its size and mtime when last read, the offset just after
the last newline consumed (and how many lines lie before it), and a fingerprint of its first 4 KiB and of the 256
bytes before the offset. The next read continues at the offset only when the file is the same one, no shorter
than the offset, and has the same bytes there; otherwise it was rewritten, truncated or replaced, and the caller
re-reads it from the start (``restart``). A last line without its newline is not consumed: the offset stays
before it, so a later pass reads it again whole. It is offered apart (``TailRead.pending``): when it is complete
JSON it is a record (copies of transcripts often lose the final newline), and the caller folds it into a view
of the file it can drop when the file grows; a writer's torn line is not JSON and waits for the next pass.

One bad line costs one line: a line that is not JSON, nests deeper than the decoder goes, or is longer than the
cap is skipped and remembered with its line number and reason (``LineStats``), and the lines after it are read.

Every file an importer reads is opened here (``open_regular``): ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat`` on the
descriptor - a regular file of this user (or root) - so a FIFO, device, directory or link swapped in after the
discovery looked is refused without being read and without blocking. A zstd file decompresses under the same
limits: the decompressor is fed a few hundred bytes at a time (a block expands to at most 128 KiB, so one feed
yields a bounded amount, whatever the ratio), a line over the cap streams by and is skipped and named like any
other, and a file whose output passes ``MAX_DECOMPRESSED`` is given up with ``ValueError``.

Two records glued onto one line (``}{``, no newline between them) are both read, and the line is named too
(``GLUED``): the file is damaged even where nothing was lost.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from typing import IO, Final, Generic, Protocol, Self, TypeVar

import msgspec
import zstandard

__all__ = [
    "GLUED",
    "LineStats",
    "Tail",
    "TailRead",
    "compressed_lines",
    "decode_lines",
    "open_regular",
    "same_file",
    "signature",
]

HEAD_BYTES: Final = 4096
TAIL_BYTES: Final = 256
_GLUE_ATTEMPTS: Final = 64  # each attempt decodes a prefix: a hostile line full of "}{" must stay linear
_CHUNK: Final = 1 << 20
_EXAMPLES: Final = 5
GLUED: Final = "records glued on one line (no newline between them): each read"

_FEED: Final = 256
"""Compressed bytes given to the zstd decompressor at once: at most 64 blocks of 128 KiB (8 MiB) come out."""
MAX_DECOMPRESSED: Final = 4 << 30
"""Decompressed bytes read from one file at most (a bomb is given up, not followed to its end)."""

T = TypeVar("T")


def open_regular(path: str) -> IO[bytes]:
    """``path`` opened for reading, if it is a regular file of this user (or root), else ``OSError`` saying why.

    ``O_NOFOLLOW | O_NONBLOCK``: neither a symbolic link nor a FIFO swapped in after the caller looked is followed
    or waited on; the checks are made with ``fstat`` on the descriptor, so they hold for what is read."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link (not followed)", path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or directory is never read)", path)
        if st.st_uid not in (os.geteuid(), 0):
            raise OSError(errno.EPERM, f"belongs to another user (uid {st.st_uid}); not read", path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Tail(msgspec.Struct, array_like=True, frozen=True):
    """Where a file was read up to, and how to recognise it as the same file next time."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    offset: int
    fingerprint: bytes
    lines: int = 0
    """Complete lines before ``offset`` (so a bad line is named by its line number on a later pass too)."""


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a file changed without reading it (the trigger only: times never become activity)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_file(st: os.stat_result, tail: Tail | None) -> bool:
    """True when nothing can have changed since ``tail`` was taken: same file, same size, same mtime."""
    return tail is not None and signature(st) == (tail.dev, tail.ino, tail.size, tail.mtime_ns)


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()[:16]


class LineStats:
    """Lines a read could not use, by reason: how many, and the line numbers of the first few."""

    def __init__(self, cap: int = 16 << 20) -> None:
        self.cap = cap
        self.counts: dict[str, int] = {}
        self.lines: dict[str, list[int]] = {}

    def problem(self, line: int, reason: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        examples = self.lines.setdefault(reason, [])
        if len(examples) < _EXAMPLES:
            examples.append(line)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class TailRead:
    """One pass over the new complete lines of a file. Use as a context manager; ``tail`` after ``lines()``."""

    def __init__(self, path: str, previous: Tail | None, *, cap: int) -> None:
        self.path = path
        self._file: IO[bytes] = open_regular(path)  # closed by __exit__
        try:
            st = os.fstat(self._file.fileno())
            self._stat = st
            self.cap = cap
            self.restart = True
            start = 0
            lines = 0
            if (
                previous is not None
                and (previous.dev, previous.ino) == (st.st_dev, st.st_ino)
                and st.st_size >= previous.offset
                and self._fingerprint(previous.offset) == previous.fingerprint
            ):
                start, lines = previous.offset, previous.lines
                self.restart = previous.offset == 0
            self.start = start
            self.offset = start
            self.first_line = lines + 1
            self.line_count = lines
            self.stats = LineStats(cap)
            self.bytes_read = 0
            self.pending: bytes | None = None
            """After ``lines()``: the last line when it has no newline yet (not consumed; None when over the cap)."""
        except BaseException:
            self._file.close()
            raise

    def _fingerprint(self, offset: int) -> bytes:
        fd = self._file.fileno()
        before = min(TAIL_BYTES, offset)
        return _digest(os.pread(fd, min(HEAD_BYTES, offset), 0) + b"\0" + os.pread(fd, before, offset - before))

    def lines(self) -> Iterator[bytes | None]:
        """Each complete line in [offset, size at open); None for a line over the cap (skipped, counted)."""
        self._file.seek(self.start)
        yield from split_lines(self._file, self, self._stat.st_size)

    @property
    def tail(self) -> Tail:
        st = self._stat
        return Tail(
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            self.offset,
            self._fingerprint(self.offset),
            self.line_count,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


class _Reading(Protocol):
    offset: int
    line_count: int
    bytes_read: int
    cap: int
    pending: bytes | None


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


def split_lines(stream: _Readable, into: _Reading, end: int | None) -> Iterator[bytes | None]:
    """Complete lines of ``stream`` (positioned at ``into.offset``) up to byte ``end`` (None: to EOF), moving
    ``into.offset`` past each newline and counting ``into.line_count``. Memory stays under ``cap`` per line: a
    longer line is dropped as it streams by (and yields None)."""
    pos = into.offset
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
        for i, line in enumerate(parts):
            into.line_count += 1
            if i == 0 and (dropping or partial_len + len(line) > cap):
                yield None
            elif i == 0 and partial:
                partial.append(line)
                yield b"".join(partial)
            elif len(line) > cap:
                yield None
            else:
                yield line
        if parts:
            partial, partial_len, dropping = [], 0, False
            into.offset = pos - len(rest)
        partial_len += len(rest)
        if not dropping and rest:
            if partial_len > cap:
                partial, dropping = [], True
            else:
                partial.append(rest)
    if end is None and (partial or dropping):
        into.line_count += 1  # a whole stream: its last line is complete without a newline
        yield None if dropping else b"".join(partial)
    elif partial and not dropping:
        into.pending = b"".join(partial)  # offered apart, not consumed: the file may still grow


class _StreamReading:
    def __init__(self, cap: int) -> None:
        self.offset = 0
        self.line_count = 0
        self.bytes_read = 0
        self.cap = cap
        self.pending: bytes | None = None


class _Zstd:
    """A readable stream of a zstd file's decompressed bytes that raises ``ValueError`` at the end of a file cut
    short (``zstandard``'s own stream reader returns a truncated frame silently). Frames follow each other."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._started = False
        self._total = 0

    def read(self, size: int, /) -> bytes:
        out: list[bytes] = []
        length = 0
        while length < size:  # fed a few bytes at a time: one feed yields a bounded amount, whatever the ratio
            chunk = self._raw.read(_FEED)
            if not chunk:
                if self._started and not self._frame.eof:
                    raise ValueError("the zstd stream ends in the middle of a frame (a file cut short)")
                break
            while chunk:
                if self._frame.eof:  # the next frame of a multi-frame file
                    self._frame = zstandard.ZstdDecompressor().decompressobj()
                self._started = True
                try:
                    data = self._frame.decompress(chunk)
                except zstandard.ZstdError as exc:
                    raise ValueError(f"not zstd data: {exc}") from exc
                out.append(data)
                length += len(data)
                chunk = self._frame.unused_data if self._frame.eof else b""
        self._total += length
        if self._total > MAX_DECOMPRESSED:
            raise ValueError(f"decompresses to more than {MAX_DECOMPRESSED >> 30} GiB; given up")
        return b"".join(out)


def compressed_lines(path: str, *, cap: int) -> Iterator[bytes | None]:
    """The lines of a zstd-compressed file, decompressed as a stream with ``zstandard`` (memory stays per line).

    Compressed files are written whole, so they are read whole (and their last line needs no newline). A file
    that is not zstd, or is cut short, raises ``ValueError`` once that is known, so the caller drops what it
    folded.
    """
    with open_regular(path) as raw:
        yield from split_lines(_Zstd(raw), _StreamReading(cap), None)


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
            except (msgspec.DecodeError, RecursionError):
                pass
            cut = rest.find(b"}{")
            while cut >= 0 and attempts < _GLUE_ATTEMPTS:
                attempts += 1
                try:
                    out.append(self._decoder.decode(rest[: cut + 1]))
                except (msgspec.DecodeError, RecursionError):
                    cut = rest.find(b"}{", cut + 1)
                    continue
                rest = rest[cut + 1 :]
                break
            else:
                return None
        return out


def decode_lines(
    lines: Iterable[bytes | None], decoder: msgspec.json.Decoder[T], stats: LineStats, *, first_line: int = 1
) -> Iterator[tuple[int, T]]:
    """(line number, record) for each JSON line: blank lines ignored, glued records split, and a line that
    cannot be read skipped with its reason in ``stats`` (the next line is read as usual)."""
    glued: _Glued[T] | None = None
    for number, line in enumerate(lines, first_line):
        if line is None:
            stats.problem(number, f"line over {stats.cap} bytes skipped")
            continue
        try:
            yield number, decoder.decode(line)
            continue
        except RecursionError:
            stats.problem(number, "line nests too deep to read, skipped")
            continue
        except msgspec.DecodeError:
            if not line.strip():
                continue
        if glued is None:
            glued = _Glued(decoder)
        records = glued.split(line) if b"}{" in line else None
        if records is None:
            stats.problem(number, "line is not a JSON record, skipped")
        else:
            stats.problem(number, GLUED)
            for record in records:
                yield number, record
