"""The importer's own state between passes: per source and root, where each file was read up to.

It is a cache, never the truth. Losing it, or finding one made for another store, costs one full re-read and
writes nothing twice: every write is compared with the registry first and carries an id derived from the source.
What it alone knows is which sessions this host imported (``imported``): only those are marked gone when their
source disappears, so a host never marks sessions another host imported into a shared store; and, per session,
what was read of its conversation (``threads``), so a pass that continues a file adds its new turns only.

It names every file and title the agents keep, so it is private: the state file and its lock are created
0600 (a folder made for them 0700), whatever the umask, and the state stays 0600 when it is replaced. The state
is msgpack, written to a temporary file made with ``tempfile.mkstemp`` in the same folder (``O_CREAT|O_EXCL``,
an unpredictable name: a link planted in a shared folder cannot be followed) and renamed over the old one, so a
crash leaves the old state or the new one. The advisory lock beside it (``.lock``) keeps two importers on one
host from overwriting each other's progress; it is opened with ``O_NOFOLLOW``. A state or lock path that is a
symlink, or a folder, is refused with ``ImportStateError`` - never followed, never replaced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import msgspec

from events.errors import RegistryError
from registry.importers.turns import Thread

__all__ = [
    "ImportState",
    "ImportStateError",
    "SourceRecord",
    "load_state",
    "lock_path",
    "locked",
    "save_state",
]

log = logging.getLogger(__name__)

FORMAT: Final = 4
"""4: how many messages the import added to each session's turn under way (``Thread.tail``; a state of format 3 is read
afresh, as below); 3: what was read of each session's conversation (``threads``; a state of format 2 was made before
conversations were read: it is read afresh, so every file's conversation is imported); 2: line counts in each file's
tail (1 had none)."""
_MAX_STATE: Final = 1 << 30


class ImportStateError(RegistryError, ValueError):
    """The import state (or its lock) cannot be used: a folder or a symlink is where it belongs. A
    ``RegistryError`` like every error the library raises (and a ``ValueError``, as it always was)."""


class SourceRecord(msgspec.Struct, kw_only=True):
    """One (agent, root): the source's opaque state, the sessions imported from it, writes still owed."""

    data: bytes | None = None
    imported: set[str] = msgspec.field(default_factory=set)
    pending: set[str] = msgspec.field(default_factory=set)
    threads: dict[str, Thread] = msgspec.field(default_factory=dict)
    """What was read of each imported session's conversation (``registry.importers.turns.Thread``)."""


class ImportState(msgspec.Struct, kw_only=True):
    format: int = FORMAT
    store_id: str = ""
    sources: dict[str, SourceRecord] = msgspec.field(default_factory=dict)


_decoder = msgspec.msgpack.Decoder(ImportState)
_encoder = msgspec.msgpack.Encoder()


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _check(path: Path, what: str) -> None:
    """Refuse a symlink or a folder at ``path`` (a missing file is fine: it will be created)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise ImportStateError(
            f"{path}: the {what} is a symbolic link; refusing to follow it (remove it or use --state)"
        )
    if stat.S_ISDIR(st.st_mode):
        raise ImportStateError(f"{path}: a folder is where the {what} belongs (remove it or use --state)")
    if not stat.S_ISREG(st.st_mode):
        raise ImportStateError(f"{path}: the {what} is not a regular file (remove it or use --state)")


def _private_folder(folder: Path) -> None:
    """Create the state's folder (and missing parents) 0700; an existing folder is left as it is."""
    missing = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    for item in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(item, 0o700)
            os.chmod(item, 0o700)  # mkdir applies the umask; the folder is private whatever it is


def load_state(path: Path | None, store_id: str) -> ImportState:
    """The state at ``path``; a fresh one when missing, unreadable, of another format or of another store.

    ``ImportStateError`` when the path is a symlink or a folder.
    """
    fresh = ImportState(store_id=store_id)
    if path is None:
        return fresh
    _check(path, "import state")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return fresh
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a link since the check
            raise ImportStateError(f"{path}: the import state is a symbolic link; refusing to follow it") from None
        log.warning("ignoring the import state %s (%s): the next pass re-reads every source", path, exc.strerror)
        return fresh
    try:
        with os.fdopen(fd, "rb") as f:
            state = _decoder.decode(f.read(_MAX_STATE))
    except (OSError, msgspec.DecodeError) as exc:
        log.warning("ignoring the import state %s (%s): the next pass re-reads every source", path, exc)
        return fresh
    if state.format != FORMAT or state.store_id != store_id:
        log.warning("the import state %s belongs to another store or format: starting afresh", path)
        return fresh
    return state


def save_state(path: Path | None, state: ImportState) -> None:
    """Replace the state file atomically (a crash leaves the old one or the new one, never half of one), 0600."""
    if path is None:
        return
    _check(path, "import state")
    _private_folder(path.parent)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_encoder.encode(state))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)  # replaces a name: a link planted at ``path`` meanwhile is replaced, not followed
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


@contextlib.contextmanager
def locked(path: Path | None) -> Iterator[None]:
    """Hold the advisory lock beside the state file for one pass (waits for another importer's pass)."""
    if path is None:
        yield
        return
    lock = lock_path(path)
    _check(path, "import state")
    _check(lock, "import state's lock")
    _private_folder(path.parent)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR):
            raise ImportStateError(f"{lock}: the import state's lock is not a plain file; refusing it") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ImportStateError(f"{lock}: the import state's lock is not a regular file; refusing it")
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != 0o600:
            os.fchmod(fd, 0o600)  # a lock left by an older version, created under the umask
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
