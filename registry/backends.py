"""The backend factory: which ``Backend`` a store has - the one place that knows the store classes.

* ``SqliteBackend``: the read model's tables in the store's own file, the key their rows are sealed with in
  ``<file>.seal-key``, snapshots in ``<file>.snapshots/``, the import state in ``<file>.import-state``, integrity
  evidence in a table of the file, the log's size the file and its ``-wal``;
* ``PostgresBackend``: the tables and the evidence in the store's schema, snapshots and import state in the user's
  cache and state directories under the store's id, positions that may have gaps (events are counted by the
  server); loaded only when such a store is open (psycopg stays out otherwise);
* ``MemoryBackend``: ``memory://`` keeps nothing beside its log, folds in memory;
* ``Backend`` itself (``registry.backend``): any other ``EventStore``.

A new store means one module in ``events/`` held to ``events.testing.StoreContract`` and one ``Backend`` here held
to ``registry.testing.ReadModelContract``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from events.errors import StoreFormatError
from events.logger import Logger
from events.schema import count_query
from events.sqlite import SqliteStore
from events.sqlite_file import FOREIGN_STORE
from events.store import EventStore
from registry.backend import Backend
from registry.evidence import IntegrityEvent
from registry.readmodel import ReadModel, ReadModelFault
from registry.readmodel.sqlite import SqliteReadModel

if TYPE_CHECKING:
    from pathlib import Path

    import psycopg
    from psycopg.rows import TupleRow

    from events.postgres import PostgresStore
    from registry.search.index import SearchIndex

__all__ = ["MemoryBackend", "PostgresBackend", "SqliteBackend", "backend_for"]

log = Logger("registry.readmodel")

_T = TypeVar("_T")
_KEY_BYTES: Final = 32
_PRIVATE: Final = 0o600
_EVIDENCE: Final = "acp_integrity"
_COLUMNS: Final = "found_at, seen_by, position, chain, head, acknowledged"


def _evidence_table(prefix: str, kinds: tuple[str, str, str]) -> str:
    """The evidence table's ``CREATE`` (``kinds``: the dialect's integer, text and boolean types)."""
    integer, text, boolean = kinds
    false = "false" if boolean == "boolean" else "0"
    return (
        f"CREATE TABLE IF NOT EXISTS {prefix}{_EVIDENCE} (found_at {integer} NOT NULL, seen_by {text} NOT NULL,"
        f" position {integer} NOT NULL, chain {text} NOT NULL, head {integer} NOT NULL,"
        f" acknowledged {boolean} NOT NULL DEFAULT {false}, UNIQUE (seen_by, position, chain, head))"
    )


_REMOVE_IT: Final = "remove it: a new key is made and the read model rebuilt from the log"


def _refused(path: str, why: str, remedy: str = _REMOVE_IT) -> StoreFormatError:
    """A key file refused, left as it is: the store cannot be opened (exit 2 on the command line, as for a store file
    refused)."""
    return StoreFormatError(path, f"the read model's seal key {why}; refused ({remedy})")


def _read_key(path: str) -> bytes | None:
    """The key in ``path``, a private regular file of this user (opened without following a link); None when there
    is none. A key of ours that others may read is made private (0600), as git fixes a file's mode; one that is not
    a regular file, or another user's, is refused (``StoreFormatError``), as ssh refuses such a key - unless
    ``ACP_REGISTRY_FOREIGN_STORE=allow`` (a store shared on purpose); b"" for a file of ours that is no key
    (damaged: replaced by whoever can write the store)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise _refused(path, f"is a symbolic link (to {os.readlink(path)})") from None
        raise _refused(path, f"cannot be read ({exc.strerror})", "let its owner read it, or remove it") from None
    try:
        info = os.fstat(fd)
        shared = os.environ.get(FOREIGN_STORE) == "allow"
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise _refused(path, f"is {kind}")
        if info.st_uid != os.geteuid() and not shared:
            raise _refused(
                path,
                f"belongs to another user (uid {info.st_uid}), who could seal rows the read model serves",
                f"remove it, or set {FOREIGN_STORE}=allow for a store shared on purpose",
            )
        if info.st_mode & 0o077 and not shared:
            try:
                os.fchmod(fd, _PRIVATE)
                log.warning("%s: other users could read the read model's seal key (mode %04o); it is 0600 now",
                            path, info.st_mode & 0o777)  # fmt: skip
            except OSError as exc:
                log.warning("%s: other users can read the read model's seal key (mode %04o), and it cannot be made"
                            " private (%s)", path, info.st_mode & 0o777, exc.strerror)  # fmt: skip
        key = os.read(fd, _KEY_BYTES + 1)
    finally:
        os.close(fd)
    return key if len(key) == _KEY_BYTES else b""


def _key_file(path: str, *, create: bool, held: bytes | None = None) -> bytes:
    """The key in ``path`` (``_read_key``). When there is none and ``create``: ``held`` (the key this process had
    read, put back: tables sealed with it stay valid) else a new one; never over a key another process made
    meanwhile (that one is used). A read-only store without one: ``ReadModelFault``."""
    key = _read_key(path)
    if key:
        return key
    why = "is missing" if key is None else "is not a key (damaged)"
    if not create:
        raise ReadModelFault(f"the read model's seal key {path} {why}, and the store is read-only")
    import secrets  # noqa: PLC0415 - only to make a key

    if key is not None:
        log.warning("%s %s; a new one is made (the read model is rebuilt from the log)", path, why)
    new = held if held is not None and key is None else secrets.token_bytes(_KEY_BYTES)
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(new)
            file.flush()
            os.fsync(file.fileno())
        if key is None:
            try:
                os.link(temp, path)  # never over a key another process made meanwhile: that one is used
            except FileExistsError:
                return _key_file(path, create=False)
        else:
            os.replace(temp, path)
    except OSError as exc:
        raise ReadModelFault(f"the read model's seal key {path} cannot be made ({exc.strerror})") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return new


class MemoryBackend(Backend):
    """``memory://``: nothing is kept beside the log (it lives and dies with the process)."""

    name = "memory"
    contiguous = True

    def snapshot_dir(self) -> Path | None:
        return None

    def import_state_path(self) -> Path | None:
        return None


class SqliteBackend(Backend):
    """A SQLite file: everything derived lives in it or beside it."""

    name = "sqlite"
    contiguous = True  # one writer at a time: gap-free, commit-ordered rowids

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store)
        self._sqlite = store
        self._seal: bytes | None = None

    @property
    def location(self) -> str:
        return self._sqlite.path

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        return SqliteReadModel.open(self, self._sqlite, window=window, catch_up=catch_up)

    def search_index(self) -> SearchIndex:
        """FTS5 tables in the store's own file, beside the log they are derived from."""
        from registry.search.index import SqliteSearchIndex  # noqa: PLC0415 - search loads only where it is used

        return SqliteSearchIndex(self._sqlite, self._sqlite.connect)

    def seal_key(self) -> bytes:
        """A key in a file of its own beside the store's (``<file>.seal-key``, 0600): whoever can edit the store's
        file but not read this one cannot seal a row the read model will serve. Made by the first writer (a new
        key for a damaged file: the tables are then rebuilt, they are derived); a read-only store without one has
        no tables it can trust (``ReadModelFault``: the log is folded in memory)."""
        if self._seal is None:
            self._seal = _key_file(self._sqlite.path + ".seal-key", create=not self._sqlite.read_only)
        return self._seal

    def current_seal_key(self) -> bytes:
        """The key file read again: another process may have made a new key where this one's was lost (this
        process then takes it up, and a rebuild by one process is the last), and a lost key this process holds
        is put back (tables sealed with it stay valid)."""
        self._seal = _key_file(self._sqlite.path + ".seal-key", create=not self._sqlite.read_only, held=self._seal)
        return self._seal

    def snapshot_dir(self) -> Path | None:
        from pathlib import Path  # noqa: PLC0415 - pathlib stays out of a process that only reads

        return Path(self._sqlite.path + ".snapshots")

    def import_state_path(self) -> Path | None:
        from pathlib import Path  # noqa: PLC0415

        return Path(self._sqlite.path + ".import-state")

    def log_bytes(self) -> int | None:
        path = self._sqlite.path
        return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))

    def _evidence(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        db = self._sqlite.connect()
        try:
            with self._sqlite.translate_errors():
                db.execute(_evidence_table("", ("INTEGER", "TEXT", "INTEGER")))
                return work(db)
        finally:
            db.close()

    def record_integrity(self, event: IntegrityEvent) -> None:
        self._evidence(
            lambda db: db.execute(
                f"INSERT OR IGNORE INTO {_EVIDENCE} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (event.found_at, event.seen_by, event.position, event.chain, event.head, event.acknowledged),
            )
        )

    def integrity_events(self) -> list[IntegrityEvent]:
        db = self._sqlite.connect()  # a read: the table is made only by the first record
        try:
            rows = db.execute(f"SELECT {_COLUMNS} FROM {_EVIDENCE} ORDER BY found_at").fetchall()
        except sqlite3.OperationalError:
            return []  # nothing was ever recorded
        finally:
            db.close()
        return [IntegrityEvent(a, b, c, d, e, bool(f)) for a, b, c, d, e, f in rows]

    def acknowledge(self) -> int:
        return self._evidence(
            lambda db: db.execute(f"UPDATE {_EVIDENCE} SET acknowledged = 1 WHERE NOT acknowledged").rowcount
        )


class PostgresBackend(Backend):
    """A PostgreSQL schema: the tables beside the log, files under the store's id; positions may have gaps."""

    name = "postgresql"

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store)
        self._postgres = store

    @property
    def location(self) -> str:
        return self._postgres.location

    def search_index(self) -> SearchIndex:
        """A ``tsvector`` table with GIN indexes in the store's schema (``registry.search.postgres``)."""
        from registry.search.postgres import PostgresSearchIndex  # noqa: PLC0415 - psycopg only with such a store

        return PostgresSearchIndex(self._postgres)

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        from registry.readmodel.postgres import PostgresReadModel  # noqa: PLC0415 - psycopg only with such a store

        return PostgresReadModel(self, self._postgres, window=window, catch_up=catch_up)

    def _run(self, statement: str, params: tuple[object, ...] = (), *, create: bool = True) -> list[tuple[Any, ...]]:
        """One statement on the evidence table (``{}``: the schema), made first unless ``create`` is False."""
        from psycopg import sql  # noqa: PLC0415 - psycopg only with such a store

        schema = sql.Identifier(self._postgres.schema)
        create_table = sql.SQL(_evidence_table("{}.", ("bigint", "text", "boolean"))).format(schema)
        query = sql.SQL(statement).format(schema)

        def work(conn: psycopg.Connection[TupleRow]) -> list[tuple[Any, ...]]:
            if create:
                conn.execute(create_table)
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else [(cursor.rowcount,)]

        return self._postgres.run(work)

    def record_integrity(self, event: IntegrityEvent) -> None:
        self._run(
            f"INSERT INTO {{}}.{_EVIDENCE} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (event.found_at, event.seen_by, event.position, event.chain, event.head, event.acknowledged),
        )

    def integrity_events(self) -> list[IntegrityEvent]:
        exists = self._run("SELECT to_regclass(%s)", (f'"{self._postgres.schema}".{_EVIDENCE}',), create=False)
        if exists in ([], [(None,)]):
            return []  # nothing was ever recorded
        rows = self._run(f"SELECT {_COLUMNS} FROM {{}}.{_EVIDENCE} ORDER BY found_at", create=False)
        return [IntegrityEvent(int(a), b, int(c), d, int(e), bool(f)) for a, b, c, d, e, f in rows]

    def acknowledge(self) -> int:
        return int(self._run(f"UPDATE {{}}.{_EVIDENCE} SET acknowledged = true WHERE NOT acknowledged")[0][0])

    def events_up_to(self, position: int) -> int:
        return int(self._run(count_query("{}.", "%s"), (position,), create=False)[0][0])


def backend_for(store: EventStore) -> Backend:
    """The backend of ``store``, made once where the store is opened and handed to what works on its derived
    data: the one place that knows the store classes."""
    if isinstance(store, SqliteStore):
        return SqliteBackend(store)
    memory = sys.modules.get("events.memory")  # modules not loaded: no such store can be open
    if memory is not None and isinstance(store, memory.MemoryStore):
        return MemoryBackend(store)
    postgres = sys.modules.get("events.postgres")  # (psycopg stays out)
    if postgres is not None and isinstance(store, postgres.PostgresStore):
        return PostgresBackend(store)
    return Backend(store)
