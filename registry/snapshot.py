"""Kept snapshots: the whole projection at a few spaced log positions, so time travel folds only a short tail.

``session/list`` never needs them (the read model lives in the store); ``replay --at P`` does: it loads the
nearest kept snapshot at or before P and folds the log from there. They are derived data and a cache: a
missing, damaged, foreign or forged one only costs time - it is ignored (with a warning naming the file) and
the fold starts earlier.

Where: beside a SQLite store in ``<file>.snapshots/`` (0700), elsewhere in the user's cache directory under the
store's id; each file ``<position>.snap`` (0600), written to a fresh temporary name in the same directory
(``O_EXCL | O_NOFOLLOW``), fsynced and renamed into place. Temporary files a killed writer left behind are
removed by the next writer once they are an hour old.

Which: one per ``every`` positions, thinned so that the distances from the head grow logarithmically (the
newest, and the newest at or before ``head - every * 2**k`` for each k), at most ``KEEP`` of them.

Layout: ``ACPRSNAP`` | format (1 byte) | header length (4 bytes) | header (msgpack) | body (msgpack list of
states) | HMAC-SHA256 over everything before it, keyed with the store's secret. The header names the store, the
position, the log's anchor there (the hash chain value, or the event id where a store has no chain) and the
body's length, so a file is checked by its size and header before its body is read; the MAC binds the body to
this store's log, so nobody without the store's secret can make a snapshot it trusts.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import stat
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from registry.model import SessionState

if TYPE_CHECKING:
    from events.store import EventStore

__all__ = [
    "EVERY",
    "KEEP",
    "Snapshot",
    "SnapshotError",
    "SnapshotHeader",
    "kept_positions",
    "load_snapshot",
    "read_snapshot",
    "save_snapshot",
    "snapshot_dir",
    "snapshots",
    "thin",
]

log = logging.getLogger(__name__)

EVERY: Final = 100_000
"""Log positions between kept snapshots (before thinning)."""
KEEP: Final = 8
"""Kept snapshots at most, per store."""

_MAGIC: Final = b"ACPRSNAP"
_FORMAT: Final = 2
_FIXED: Final = len(_MAGIC) + 1 + 4
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


class SnapshotError(Exception):
    """Why a snapshot cannot be used (it is then ignored, never trusted)."""


_encoder = msgspec.msgpack.Encoder()
_header_decoder = msgspec.msgpack.Decoder(SnapshotHeader)
_body_decoder = msgspec.msgpack.Decoder(list[SessionState])


# -- where ----------------------------------------------------------------------------------------------


def snapshot_dir(store: EventStore) -> Path | None:
    """Where ``store``'s snapshots are kept (None: a store that keeps nothing, ``memory://``)."""
    from events.memory import MemoryStore  # noqa: PLC0415
    from events.sqlite import SqliteStore  # noqa: PLC0415

    if isinstance(store, MemoryStore):
        return None
    if isinstance(store, SqliteStore):
        return Path(store.path + ".snapshots")
    import platformdirs  # noqa: PLC0415

    return Path(platformdirs.user_cache_dir("acp-registry")) / "snapshots" / store.identity.store_id


def anchor(store: EventStore, position: int) -> bytes:
    """What binds a snapshot at ``position`` to this log: the store's chain value there, else the event id."""
    if position == 0:
        return b""
    chain_at = getattr(store, "chain_at", None)
    if chain_at is not None:
        value = chain_at(position)
        if value is not None:
            return bytes(value)
    found = store.read(position - 1, 1)
    if not found or found[0].position != position:
        return b"missing"
    return found[0].event_id.bytes


def kept_positions(head: int, every: int = EVERY, keep: int = KEEP) -> list[int]:
    """The multiples of ``every`` worth keeping at ``head``, newest first: the newest, then the newest at or
    before ``head - every * 2**k`` for k = 0, 1, 2 ... (at most ``keep``)."""
    if head < every:
        return []
    newest = head - head % every
    wanted = [newest]
    k = 0
    while len(wanted) < keep:
        target = head - every * (1 << k)
        k += 1
        if target < every:
            break
        position = target - target % every
        if position < wanted[-1]:
            wanted.append(position)
    return wanted


def thin(positions: Iterable[int], head: int, every: int = EVERY, keep: int = KEEP) -> set[int]:
    """Which of the existing ``positions`` to keep: for each wanted position, the nearest one at or before it."""
    have = sorted(set(positions), reverse=True)
    kept: set[int] = set()
    for target in kept_positions(head, every, keep) or ([max(have)] if have else []):
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
    store: EventStore, position: int, sessions: Iterable[SessionState], *, events: int, folder: Path | None = None
) -> Path | None:
    """Write the states at ``position`` as a kept snapshot; returns its path (None where nothing is kept)."""
    folder = folder or snapshot_dir(store)
    if folder is None:
        return None
    _private_dir(folder)
    body = _encoder.encode(list(sessions))
    header = _encoder.encode(
        SnapshotHeader(store.identity.store_id, position, anchor(store, position), events, time.time_ns(), len(body))
    )
    data = _MAGIC + bytes((_FORMAT,)) + len(header).to_bytes(4, "big") + header
    mac = hmac.new(store.identity.secret, data, "sha256")
    mac.update(body)
    target = folder / f"{position:020d}{_SUFFIX}"
    temp = folder / f".{target.name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.write(body)
            out.write(mac.digest())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _tidy(folder, store.head())
    return target


def _tidy(folder: Path, head: int) -> None:
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
                found[int(name[: -len(_SUFFIX)])] = Path(entry.path)
    keep = thin(found, head)
    for position, path in found.items():
        if position not in keep:
            with contextlib.suppress(OSError):
                path.unlink()


# -- reading --------------------------------------------------------------------------------------------


def snapshots(store: EventStore) -> Iterator[tuple[int, Path]]:
    """The kept snapshots' positions and paths, newest first (unchecked)."""
    folder = snapshot_dir(store)
    if folder is None or not folder.is_dir() or folder.is_symlink():
        return iter(())
    found = []
    for entry in os.scandir(folder):
        name = entry.name
        if name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
            found.append((int(name[: -len(_SUFFIX)]), Path(entry.path)))
    return iter(sorted(found, reverse=True))


def read_snapshot(path: Path, store: EventStore) -> Snapshot:
    """Read and check one snapshot against ``store``; ``SnapshotError`` says what is wrong.

    The size and the header are checked before the body is read; the body's MAC is checked in chunks before it is
    decoded, so a huge or hostile file costs neither memory nor a decode.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SnapshotError("is gone") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SnapshotError("is a symlink (refused)") from None
        raise SnapshotError(f"cannot be read ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SnapshotError("is not a regular file")
        fixed = file.read(_FIXED)
        if len(fixed) < _FIXED or not fixed.startswith(_MAGIC):
            raise SnapshotError("is not a registry snapshot")
        if fixed[len(_MAGIC)] != _FORMAT:
            raise SnapshotError(f"has format {fixed[len(_MAGIC)]}, this version reads {_FORMAT}")
        size = int.from_bytes(fixed[len(_MAGIC) + 1 :], "big")
        if size > _MAX_HEADER:
            raise SnapshotError("has a damaged header")
        raw_header = file.read(size)
        try:
            header = _header_decoder.decode(raw_header)
        except msgspec.DecodeError:
            raise SnapshotError("has a damaged header") from None
        if info.st_size != _FIXED + size + header.body_length + _MAC:
            expected = _FIXED + size + header.body_length + _MAC
            raise SnapshotError(f"is {info.st_size} bytes long, not the {expected} its header says")
        if header.store_id != store.identity.store_id:
            raise SnapshotError("belongs to another store")
        if header.position > store.head():
            raise SnapshotError(f"reflects position {header.position}, beyond the log's head")
        if not hmac.compare_digest(header.anchor, anchor(store, header.position)):
            raise SnapshotError(f"does not match the log at position {header.position} (a restored backup?)")
        mac = hmac.new(store.identity.secret, fixed + raw_header, "sha256")
        remaining = header.body_length
        while remaining:  # the MAC first, in chunks: nothing is kept in memory before the file is trusted
            chunk = file.read(min(remaining, 1 << 20))
            if not chunk:
                raise SnapshotError("is cut short")
            mac.update(chunk)
            remaining -= len(chunk)
        if not hmac.compare_digest(file.read(_MAC), mac.digest()):
            raise SnapshotError("is damaged or was not written by this store (its MAC does not match)")
        file.seek(_FIXED + size)
        body = file.read(header.body_length)
    try:
        return Snapshot(header, _body_decoder.decode(body))
    except msgspec.DecodeError as exc:  # pragma: no cover - a matching MAC over bytes we wrote
        raise SnapshotError(f"does not decode ({exc})") from exc


def load_snapshot(store: EventStore, at_most: int) -> Snapshot | None:
    """The newest kept snapshot at or before position ``at_most`` that checks out (bad ones: a warning each)."""
    for position, path in snapshots(store):
        if position > at_most:
            continue
        try:
            return read_snapshot(path, store)
        except SnapshotError as exc:
            log.warning("snapshot %s %s; ignoring it", path, exc)
    return None
