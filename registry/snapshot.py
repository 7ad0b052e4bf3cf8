"""Projection snapshots: the sessions and the log position they reflect, so a restart skips most of the replay.

A snapshot is derived data: it is checked before it is trusted and thrown away (with a warning) when it is
missing, damaged, or from another log; the projection is then rebuilt from the log. It names the store and
the id of the event at its position, so a snapshot of another store, or of a log that was replaced, never
makes an answer wrong. Files are written to a temporary name, fsynced, and renamed into place.

Layout: ``ACPRSNAP`` | format (1 byte) | SHA-256 of the body | body (msgpack).
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from pathlib import Path
from typing import Final

import msgspec

from events.store import EventStore
from registry.model import SessionState

__all__ = ["Snapshot", "SnapshotError", "load_snapshot", "save_snapshot"]

log = logging.getLogger(__name__)

_MAGIC: Final = b"ACPRSNAP"
_FORMAT: Final = 1


class Snapshot(msgspec.Struct):
    store_id: str
    position: int
    event_id: uuid.UUID | None
    """The id of the event at ``position`` (None at position 0): proves the log is the same one."""
    created_at: int
    sessions: list[SessionState]


class SnapshotError(Exception):
    """Why a snapshot cannot be used (it is then discarded, never trusted)."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Snapshot)


def save_snapshot(path: str | os.PathLike[str], snapshot: Snapshot) -> int:
    """Write ``snapshot`` atomically; returns the file's size in bytes."""
    import tempfile  # noqa: PLC0415 - only writers need it

    body = _encoder.encode(snapshot)
    target = Path(path)
    fd, temp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC + bytes((_FORMAT,)) + hashlib.sha256(body).digest())
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return len(body) + len(_MAGIC) + 33


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read and check a snapshot file's own integrity; ``SnapshotError`` says what is wrong."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise SnapshotError("there is no snapshot yet") from None
    except OSError as exc:
        raise SnapshotError(f"cannot be read ({exc.strerror})") from exc
    header = len(_MAGIC) + 1 + 32
    if len(data) < header or not data.startswith(_MAGIC):
        raise SnapshotError("is not a registry snapshot")
    if data[len(_MAGIC)] != _FORMAT:
        raise SnapshotError(f"has format {data[len(_MAGIC)]}, this version reads {_FORMAT}")
    body = memoryview(data)[header:]
    if hashlib.sha256(body).digest() != data[len(_MAGIC) + 1 : header]:
        raise SnapshotError("is damaged (checksum mismatch)")
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise SnapshotError(f"does not decode ({exc})") from exc


def load_snapshot(path: str | os.PathLike[str], store: EventStore) -> Snapshot | None:
    """A snapshot that belongs to ``store``'s log, or None (with a warning saying why) when there is none."""
    try:
        snapshot = read_snapshot(path)
        if snapshot.store_id != store.identity.store_id:
            raise SnapshotError("belongs to another store")
        if snapshot.position > 0:
            at = store.read(snapshot.position - 1, 1)
            if not at or at[0].position != snapshot.position or at[0].event_id != snapshot.event_id:
                raise SnapshotError(f"does not match the log at position {snapshot.position}")
    except SnapshotError as exc:
        if os.path.exists(path):
            log.warning("snapshot %s %s; rebuilding from the log", path, exc)
        return None
    return snapshot
