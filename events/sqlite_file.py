"""Finding, creating and checking a SQLite store's file before SQLite opens it: safe on a shared machine.

- A new store file is created here, ``O_CREAT|O_EXCL|O_NOFOLLOW`` with mode 0600 whatever the umask: prompts
  and titles are private to its owner. SQLite gives the ``-wal`` and ``-shm`` files the database's mode; they
  are created here too when they are missing, the same way, so a link planted at their names is never followed.
- A store path that is a symbolic link is refused unless the caller allows it (``follow_symlinks``); a link at
  a ``-wal``, ``-shm`` or ``-journal`` name is always refused.
- Nothing is created or initialised unless the opener asks for it (``create``); an empty file is not a store
  until then (``SqliteStore`` checks the rest of the format through SQLite itself).
- The database file itself is never opened here: closing any descriptor of a file drops every POSIX lock this
  process holds on it, the locks of SQLite connections to the same store included (the -wal and -shm files
  are created here only when they did not exist, so no connection can hold locks on them).
- A store file (or its -wal or -shm) that belongs to another user, or that others can write, is refused with one
  line: its owner could read and change every event and the cursor secret. ``ACP_REGISTRY_FOREIGN_STORE=allow``
  accepts it (a store shared on purpose).
- A file (or directory, or file system) that cannot be written is opened read-only, and said so.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from typing import Final

import msgspec

from events.errors import StoreError, StoreFormatError
from events.logger import Logger

__all__ = ["FOREIGN_STORE", "StoreFile", "find_store_file", "say_how_opened"]

log = Logger("events.sqlite")

_SIDE_FILES: Final = ("-wal", "-shm", "-journal")
_NEW_FILE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_PRIVATE: Final = 0o600
FOREIGN_STORE: Final = "ACP_REGISTRY_FOREIGN_STORE"
"""Set to ``allow`` to open a store file of another user, or one others can write (refused otherwise)."""


class StoreFile(msgspec.Struct, frozen=True):
    """What was found at a store path."""

    path: str  # the file SQLite is to open (a link's target when links are allowed)
    empty: bool  # zero bytes: new, or made empty by someone else (a store only with ``create``)
    read_only: str | None  # why the store must be opened read-only; None when it can be written
    immutable: bool  # read-only with no -shm to be had: SQLite must treat the file as unchanging
    shared_mode: int | None  # the mode of a file of ours that others may read (made before files were 0600)
    created: tuple[str, ...]  # the files made here: removed again (while empty) when the open fails

    @contextlib.contextmanager
    def made_alone(self) -> Iterator[None]:
        """While an empty file becomes a store, no other process makes it one at the same time: two that do (two
        proxies started at once on a new store) would have SQLite refuse one's switch to WAL at once ("database is
        locked"), or take away files the other uses (``remove_created``). An advisory lock (``flock``) on the
        store's folder holds the second until the first is done; it then finds a store. The folder, not the file:
        closing any descriptor of the file would drop the locks SQLite holds on it in this process."""
        if not self.empty or self.read_only is not None:
            yield
            return
        try:
            fd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:  # a folder this user may enter but not read: made without the lock, as before
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def remove_created(self) -> None:
        """Take back the files made here that are still empty: a refused open leaves the directory as it was."""
        for path in reversed(self.created):
            with contextlib.suppress(OSError):
                if os.lstat(path).st_size == 0:
                    os.unlink(path)


def find_store_file(path: str, *, create: bool, follow_symlinks: bool) -> StoreFile:
    """Check ``path`` (absolute) and create it when asked; raises ``StoreError``/``StoreFormatError`` saying what
    is wrong and leaves any existing file untouched."""
    if os.path.islink(path):
        if not follow_symlinks:
            raise StoreError(
                f"{path}: is a symbolic link (to {os.readlink(path)}); a store path that is a link is refused, "
                "since in a shared directory it may have been planted (pass follow_symlinks=True to allow it)"
            )
        path = os.path.realpath(path)
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise StoreError(f"{path}: the directory {parent} does not exist")
    if os.path.isdir(path):
        raise StoreFormatError(path, "is a directory, not a registry store")
    for suffix in _SIDE_FILES:
        if os.path.islink(path + suffix):
            raise StoreError(
                f"{path}{suffix}: is a symbolic link where SQLite keeps the store's {suffix[1:]} file; refused "
                "(it may have been planted to make the store write elsewhere): remove it"
            )
    created = []
    if not os.path.lexists(path):
        if not create:
            raise StoreError(f"{path}: no store there (it is created only by a command that writes)")
        if _create_private(path, "store"):
            created.append(path)
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise StoreFormatError(path, "is not a regular file; left untouched")
    for checked in (path, *(path + suffix for suffix in ("-wal", "-shm"))):
        _refuse_foreign(checked, info if checked == path else None)
    read_only = _why_read_only(path)
    immutable = False
    if read_only is None:
        for suffix in ("-wal", "-shm"):
            if not os.path.lexists(path + suffix) and _create_private(path + suffix, suffix[1:]):
                created.append(path + suffix)
    elif not os.path.exists(path + "-shm") and not os.access(parent, os.W_OK):
        # SQLite cannot make the -shm it coordinates readers with: it can read the file only as unchanging, which
        # is exact as long as no -wal holds commits not yet copied into the file.
        if os.path.exists(path + "-wal") and os.path.getsize(path + "-wal") > 0:
            raise StoreError(
                f"{path}: read-only ({read_only}), and its -wal holds commits that cannot be read without a -shm "
                "file beside it; open it once where it can be written, or copy all three files"
            )
        immutable = True
    shared = info.st_mode & 0o777 if info.st_mode & 0o077 and info.st_uid == os.geteuid() else None
    return StoreFile(path, info.st_size == 0, read_only, immutable, shared, tuple(created))


def _refuse_foreign(path: str, info: os.stat_result | None) -> None:
    """A store file (or its -wal, -shm) of another user, or one others can write, is refused: whoever owns or can
    write it reads and changes every event and the cursor secret (in a shared sticky directory, a file planted
    there would otherwise become this user's store). ``ACP_REGISTRY_FOREIGN_STORE=allow`` accepts it."""
    if info is None:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
    if os.environ.get(FOREIGN_STORE) == "allow":
        return
    if info.st_uid != os.geteuid():
        raise StoreError(
            f"{path}: belongs to another user (uid {info.st_uid}), who can read and change everything in it; "
            f"refused (set {FOREIGN_STORE}=allow to use it anyway)"
        )
    if info.st_mode & 0o022:
        raise StoreError(
            f"{path}: other users can write it (mode {info.st_mode & 0o777:04o}); refused (run chmod 600 on it, or set "
            f"{FOREIGN_STORE}=allow to use it anyway)"
        )


def say_how_opened(found: StoreFile) -> None:
    """Once the file is known to be a store: what its owner should know (a mode from before files were private,
    a read-only open)."""
    if found.shared_mode is not None:
        log.warning(
            "%s: other users can read this store (mode %04o); run chmod 600 on it to keep its prompts private",
            found.path,
            found.shared_mode,
        )
    if found.read_only is not None:
        log.warning("%s: opened read-only (%s): reading works, appends are refused", found.path, found.read_only)


def _create_private(path: str, what: str) -> bool:
    """Create an empty file only its owner can read and write; False when another opener created it first."""
    try:
        fd = os.open(path, _NEW_FILE, _PRIVATE)
    except FileExistsError as exc:
        if os.path.islink(path):  # planted between our look and our open
            raise StoreError(
                f"{path}: a symbolic link appeared where the {what} file was to be created; refused"
            ) from exc
        return False
    except OSError as exc:
        raise StoreError(f"{path}: cannot create the {what} file ({exc.strerror})") from exc
    try:
        os.fchmod(fd, _PRIVATE)  # the exact mode, whatever the umask took away
    finally:
        os.close(fd)
    return True


def _why_read_only(path: str) -> str | None:
    parent = os.path.dirname(path)
    if os.statvfs(parent).f_flag & os.ST_RDONLY:
        return "the file system is mounted read-only"
    if not os.access(path, os.W_OK):
        return "the file is not writable"
    sides = [path + suffix for suffix in ("-wal", "-shm")]
    if not os.access(parent, os.W_OK) and not all(os.path.exists(p) and os.access(p, os.W_OK) for p in sides):
        return "its directory is not writable, and SQLite creates its -wal and -shm files there"
    return None
