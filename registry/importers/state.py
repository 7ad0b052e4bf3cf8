"""The importer's own state between passes: per source and root, where each file was read up to.

It is a cache, never the truth. Losing it, or finding one made for another store, costs one full re-read and
writes nothing twice: every write is compared with the registry first and carries an id derived from the source.
What it alone knows is which sessions this host imported (``imported``): only those are tombstoned when their
source disappears, so a host never deletes sessions another host imported into a shared store.

The file is msgpack, replaced atomically (write beside, then rename); an advisory lock beside it keeps two
importers on one host from overwriting each other's progress.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import msgspec

__all__ = ["ImportState", "SourceRecord", "load_state", "locked", "save_state"]

log = logging.getLogger(__name__)

FORMAT: Final = 1


class SourceRecord(msgspec.Struct, kw_only=True):
    """One (agent, root): the source's opaque state, the sessions imported from it, writes still owed."""

    data: bytes | None = None
    imported: set[str] = msgspec.field(default_factory=set)
    pending: set[str] = msgspec.field(default_factory=set)


class ImportState(msgspec.Struct, kw_only=True):
    format: int = FORMAT
    store_id: str = ""
    sources: dict[str, SourceRecord] = msgspec.field(default_factory=dict)


_decoder = msgspec.msgpack.Decoder(ImportState)
_encoder = msgspec.msgpack.Encoder()


def load_state(path: Path | None, store_id: str) -> ImportState:
    """The state at ``path``; a fresh one when missing, unreadable, of another format or of another store."""
    fresh = ImportState(store_id=store_id)
    if path is None:
        return fresh
    try:
        state = _decoder.decode(path.read_bytes())
    except FileNotFoundError:
        return fresh
    except (OSError, msgspec.DecodeError) as exc:
        log.warning("ignoring the import state %s (%s): the next pass re-reads every source", path, exc)
        return fresh
    if state.format != FORMAT or state.store_id != store_id:
        log.warning("the import state %s belongs to another store or format: starting afresh", path)
        return fresh
    return state


def save_state(path: Path | None, state: ImportState) -> None:
    """Replace the state file atomically (a crash leaves the old one or the new one, never half of one)."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_bytes(_encoder.encode(state))
        os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


@contextlib.contextmanager
def locked(path: Path | None) -> Iterator[None]:
    """Hold the advisory lock beside the state file for one pass (waits for another importer's pass)."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
