"""Kept snapshots: the whole projection at a few spaced log positions, so time travel folds only a short tail.

``session/list`` never needs them (the read model lives in the store); ``replay --at P`` does: it loads the
nearest kept snapshot at or before P and folds the log from there. They are derived data and a cache: a
missing, damaged, foreign or forged one only costs time - it is ignored (with a warning naming the file) and
the fold starts earlier. A snapshot file is opened ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` (a
regular file of this user) before anything is read: a FIFO, device, directory or link planted there is ignored,
never waited on. One beyond the log's head is evidence that records were cut from the log's end: it is recorded
in the store (``registry.evidence``) when it is met. Where snapshots live is the store's backend's answer: every
function here is handed the ``registry.backend.Backend`` of the store.

Where: beside a SQLite store in ``<file>.snapshots/`` (0700), elsewhere in the user's cache directory under the
store's id; each file ``<position>.snap`` (0600), written to a fresh temporary name in the same directory
(``O_EXCL | O_NOFOLLOW``), fsynced and renamed into place. Temporary files a killed writer left behind are
removed by the next writer once they are an hour old.

Which (``kept_positions``): an even grid of ``GRID`` positions over the whole log (any position is at most an
eighth of the log past one) and, nearer the head where debugging mostly looks, the newest multiple of ``every``
and those ``every``, ``2 * every`` and ``4 * every`` before it; for each, the nearest snapshot at or before it is
kept, the others are removed.

Layout: ``ACPRSNAP`` | format (1 byte) | body (a msgpack array of states) | header (msgpack) | header length
(4 bytes) | HMAC-SHA256 over everything before it, keyed with the store's secret. The body comes first so that a
snapshot streams to disk (and from the read model's rows without decoding them); the header at the end names the
store, the position, the log's anchor there (the hash chain value, or the event id where a store has no chain)
and the body's length, so a file is checked by its size and header before its body is read, and the MAC binds
the body to this store's log: nobody without the store's secret can make a snapshot it trusts.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hmac
import os
import stat
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final

import msgspec

from events.errors import RegistryError
from events.logger import Logger
from registry.backend import Backend
from registry.evidence import log_shorter
from registry.model import STATE_VERSION, SessionState, sort_key

if TYPE_CHECKING:
    from pathlib import Path

    from events.store import EventStore

__all__ = [
    "EVERY",
    "GRID",
    "KEEP",
    "Snapshot",
    "SnapshotError",
    "SnapshotHeader",
    "kept_positions",
    "load_snapshot",
    "oddities",
    "read_snapshot",
    "save_encoded_snapshot",
    "save_snapshot",
    "snapshots",
    "thin",
]

log = Logger(__name__)

EVERY: Final = 100_000
"""Log positions between the snapshots a store's writers leave behind (before thinning)."""
GRID: Final = 8
"""Evenly spaced snapshots kept over the whole log."""
KEEP: Final = GRID + 4
"""Kept snapshots at most, per store."""

_MAGIC: Final = b"ACPRSNAP"
_REVISION: Final = 2
"""Bumped whenever the file's layout changes (the states' shape is ``STATE_VERSION``'s)."""
_FORMAT: Final = _REVISION + STATE_VERSION
"""The states are stored encoded: the format grows with either (a sum of two numbers that only grow)."""
_START: Final = len(_MAGIC) + 1
_TRAILER: Final = 4 + 32  # header length, MAC
_MAC: Final = 32
_MAX_HEADER: Final = 4096
_STALE_TEMP: Final = 3600.0  # seconds after which a temporary file is a killed writer's leftover
_SUFFIX: Final = ".snap"


class SnapshotHeader(msgspec.Struct, frozen=True):
    store_id: str
    position: int
    anchor: bytes
    """What the log holds at ``position``: its hash chain value, or the event id there (b"" at position 0)."""
    events: int
    """Events folded into it (positions need not be contiguous)."""
    created_at: int
    body_length: int


class Snapshot(msgspec.Struct):
    header: SnapshotHeader
    sessions: list[SessionState]

    @property
    def position(self) -> int:
        return self.header.position


class SnapshotError(RegistryError, ValueError):
    """Why a snapshot cannot be used (it is then ignored, never trusted). A ``ValueError``: the file holds a wrong
    value."""


_encoder = msgspec.msgpack.Encoder()


@functools.cache
def _decoders() -> tuple[msgspec.msgpack.Decoder[SnapshotHeader], msgspec.msgpack.Decoder[list[SessionState]]]:
    """The header's and the body's decoders, built when a snapshot is first read (not by a process that reads none)."""
    return msgspec.msgpack.Decoder(SnapshotHeader), msgspec.msgpack.Decoder(list[SessionState])


# -- where ----------------------------------------------------------------------------------------------


def anchor(store: EventStore, position: int) -> bytes:
    """What binds a snapshot at ``position`` to this log: the store's chain value there, else the event id."""
    if position == 0:
        return b""
    value = store.chain_at(position)
    if value is not None:
        return bytes(value)
    found = store.read(position - 1, 1)
    if not found or found[0].position != position:
        return b"missing"
    return found[0].event_id.bytes


def kept_positions(head: int, every: int = EVERY) -> list[int]:
    """The positions worth a snapshot at ``head``, newest first: a grid of ``GRID`` over the log (multiples of
    ``every``) and the newest multiples of ``every`` with ``every``, 2x and 4x that before them."""
    if head < every:
        return []
    spacing = -(-head // GRID // every) * every  # the grid's step, a multiple of ``every``
    wanted = {spacing * k for k in range(1, GRID + 1) if spacing * k <= head}
    newest = head - head % every
    wanted.update(p for p in (newest, newest - every, newest - 2 * every, newest - 4 * every) if p >= every)
    return sorted(wanted, reverse=True)


def thin(positions: Iterable[int], head: int, every: int = EVERY) -> set[int]:
    """Which of the existing ``positions`` to keep: for each wanted position, the nearest one at or before it."""
    have = sorted(set(positions), reverse=True)
    kept: set[int] = set()
    for target in kept_positions(head, every) or ([max(have)] if have else []):
        found = next((p for p in have if p <= target), None)
        if found is not None:
            kept.add(found)
    return kept


# -- writing --------------------------------------------------------------------------------------------


def _private_dir(folder: Path) -> None:
    """Create ``folder`` 0700 if missing; refuse one that is a symlink or not a directory."""
    try:
        folder.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    except FileNotFoundError:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SnapshotError(f"{folder} is not a directory (a symlink is refused)")


def save_snapshot(
    backend: Backend,
    position: int,
    sessions: Iterable[SessionState],
    *,
    events: int,
    every: int = EVERY,
    folder: Path | None = None,
) -> Path | None:
    """Write the states at ``position`` as a kept snapshot; returns its path (None where nothing is kept).

    The states are written in list order (live ones by sort key, then the deleted): a fold restored from the
    snapshot then sorts its indexes from nearly sorted input, in about linear time."""
    states = sorted(sessions, key=lambda state: (state.deleted, sort_key(state)))
    return save_encoded_snapshot(
        backend, position, map(_encoder.encode, states), len(states), events=events, every=every, folder=folder
    )


def save_encoded_snapshot(
    backend: Backend,
    position: int,
    encoded: Iterable[bytes],
    count: int,
    *,
    events: int,
    every: int = EVERY,
    folder: Path | None = None,
) -> Path | None:
    """``save_snapshot`` from ``count`` states already encoded as msgpack (the read model's rows), streamed."""
    folder = folder or backend.snapshot_dir()
    if folder is None:
        return None
    store = backend.store
    _private_dir(folder)
    target = folder / f"{position:020d}{_SUFFIX}"
    temp = folder / f".{target.name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            mac = hmac.new(store.identity.secret, digestmod="sha256")

            def write(data: bytes) -> None:
                out.write(data)
                mac.update(data)

            write(_MAGIC + bytes((_FORMAT,)))
            array = _array_header(count)
            write(array)
            length = len(array)
            written = 0
            for blob in encoded:
                write(blob)
                length += len(blob)
                written += 1
            if written != count:
                raise ValueError(f"{written} states were given for a snapshot of {count}")
            header = _encoder.encode(
                SnapshotHeader(
                    store.identity.store_id, position, anchor(store, position), events, time.time_ns(), length
                )
            )
            write(header + len(header).to_bytes(4, "big"))
            out.write(mac.digest())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _tidy(folder, store.head(), every)
    return target


def _array_header(count: int) -> bytes:
    """The msgpack header of an array of ``count`` items."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def _tidy(folder: Path, head: int, every: int) -> None:
    """Remove snapshots thinning no longer keeps, and temporary files killed writers left behind."""
    now = time.time()
    found: dict[int, Path] = {}
    for entry in os.scandir(folder):
        name = entry.name
        with contextlib.suppress(OSError):
            if name.endswith(".tmp") and name.startswith("."):
                if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TEMP:
                    os.unlink(entry.path)
            elif name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
                found[int(name[: -len(_SUFFIX)])] = folder / name
    keep = thin(found, head, every)
    for position, path in found.items():
        if position not in keep:
            with contextlib.suppress(OSError):
                path.unlink()


# -- reading --------------------------------------------------------------------------------------------


def snapshots(backend: Backend) -> Iterator[tuple[int, Path]]:
    """The kept snapshots' positions and paths, newest first (unchecked)."""
    folder = backend.snapshot_dir()
    if folder is None or not folder.is_dir() or folder.is_symlink():
        return iter(())
    found = []
    for entry in os.scandir(folder):
        name = entry.name
        if name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
            found.append((int(name[: -len(_SUFFIX)]), folder / name))
    return iter(sorted(found, reverse=True))


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return name
    return "a file"


def oddities(backend: Backend) -> list[str]:
    """What is where kept snapshots live that this registry never writes there, each named (for ``verify``): a
    folder that is not one, an entry with a snapshot's name that is not a regular file of this user, any other
    name than a snapshot's or a writer's temporary file's. Time travel ignores all of them."""
    folder = backend.snapshot_dir()
    if folder is None:
        return []
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"the snapshot folder {folder} cannot be looked at ({exc.strerror})"]
    if not stat.S_ISDIR(info.st_mode):
        return [f"the snapshot folder {folder} is {_kind(info.st_mode)}, not a directory: no snapshot is kept or read"]
    found = []
    for entry in os.scandir(folder):
        name = entry.name
        try:
            mode = entry.stat(follow_symlinks=False)
        except OSError:  # gone meanwhile
            continue
        snapshot = name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit()
        temporary = name.startswith(".") and name.endswith(".tmp")
        if (snapshot or temporary) and stat.S_ISREG(mode.st_mode):
            if mode.st_uid != os.geteuid():
                found.append(f"{entry.path} belongs to another user (uid {mode.st_uid}): never read")
        elif snapshot or temporary:
            found.append(f"{entry.path} is {_kind(mode.st_mode)}, not a snapshot file: never read")
        else:
            found.append(f"{entry.path} ({_kind(mode.st_mode)}) is not something this registry keeps there")
    return sorted(found)


def read_snapshot(path: Path, store: EventStore) -> Snapshot:
    """Read and check one snapshot against ``store``; ``SnapshotError`` says what is wrong.

    The size and the header are checked before the body is read; the body's MAC is checked in chunks before it is
    decoded, so a huge or hostile file costs neither memory nor a decode.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SnapshotError("is gone") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SnapshotError("is a symlink (refused)") from None
        raise SnapshotError(f"cannot be read ({exc.strerror})") from exc
    info = os.fstat(fd)  # O_NONBLOCK: a FIFO is never waited on; fstat says what was opened
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SnapshotError("is not a regular file (a FIFO, device or directory is never read)")
        raise SnapshotError(f"belongs to another user (uid {info.st_uid}); not read")
    with os.fdopen(fd, "rb") as file:
        start = file.read(_START)
        if len(start) < _START or not start.startswith(_MAGIC):
            raise SnapshotError("is not a registry snapshot")
        if start[len(_MAGIC)] != _FORMAT:
            raise SnapshotError(f"has format {start[len(_MAGIC)]}, this version reads {_FORMAT}")
        if info.st_size < _START + _TRAILER:
            raise SnapshotError("is cut short")
        file.seek(info.st_size - _TRAILER)
        trailer = file.read(_TRAILER)
        size = int.from_bytes(trailer[:4], "big")
        if size > min(_MAX_HEADER, info.st_size - _START - _TRAILER):
            raise SnapshotError("has a damaged header")
        file.seek(info.st_size - _TRAILER - size)
        raw_header = file.read(size)
        try:
            header = _decoders()[0].decode(raw_header)
        except msgspec.DecodeError:
            raise SnapshotError("has a damaged header") from None
        expected = _START + header.body_length + size + _TRAILER
        if info.st_size != expected:
            raise SnapshotError(f"is {info.st_size} bytes long, not the {expected} its header says")
        if header.store_id != store.identity.store_id:
            raise SnapshotError("belongs to another store")
        if header.position > store.head():
            raise SnapshotError(f"reflects position {header.position}, beyond the log's head")
        if not hmac.compare_digest(header.anchor, anchor(store, header.position)):
            raise SnapshotError(f"does not match the log at position {header.position} (a restored backup?)")
        mac = hmac.new(store.identity.secret, start, "sha256")
        file.seek(_START)
        remaining = header.body_length
        while remaining:  # the MAC first, in chunks: nothing is kept in memory before the file is trusted
            chunk = file.read(min(remaining, 1 << 20))
            if not chunk:  # pragma: no cover - the size was checked
                raise SnapshotError("is cut short")
            mac.update(chunk)
            remaining -= len(chunk)
        mac.update(raw_header + trailer[:4])
        if not hmac.compare_digest(trailer[4:], mac.digest()):
            raise SnapshotError("is damaged or was not written by this store (its MAC does not match)")
        file.seek(_START)
        body = file.read(header.body_length)
    try:
        return Snapshot(header, _decoders()[1].decode(body))
    except msgspec.DecodeError as exc:  # pragma: no cover - a matching MAC over bytes we wrote
        raise SnapshotError(f"does not decode ({exc})") from exc


def load_snapshot(backend: Backend, at_most: int) -> Snapshot | None:
    """The newest kept snapshot at or before position ``at_most`` that checks out (bad ones: a warning each)."""
    head: int | None = None
    store = backend.store
    for position, path in snapshots(backend):
        if position > at_most:
            head = store.head() if head is None else head
            if position > head:  # it saw the log reach further than it does now: keep the evidence
                backend.record(log_shorter("kept snapshot", position, head))
            continue
        try:
            return read_snapshot(path, store)
        except SnapshotError as exc:
            log.warning("snapshot %s %s; ignoring it", path, exc)
    return None
