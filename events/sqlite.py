"""The embedded default: one SQLite file in WAL mode, safe for several threads and OS processes.

The file is found, created (0600) and checked by ``events.sqlite_file`` before SQLite opens it; a file that
cannot be written is opened read-only (``read_only``). Its format is checked, made or upgraded through SQLite by
``events.sqlite_format``.

Writers take the database's single write lock (``BEGIN IMMEDIATE``) before they read the head, so
positions are assigned and committed in one order and are contiguous. Sessions get a small integer stream
key: a unique (stream, version) index keyed by random UUID text would scatter inserts across a large index.
Durable by default (``synchronous=FULL``: an acknowledged append survives power loss); ``synchronous="normal"``
trades the last commits on power loss (never on a process crash) for speed, and copies the WAL back into the
database file on a background thread instead of inside the append that fills its 1000th page (``Checkpointer``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Literal, cast, overload

import msgspec

from events import sqlite_content
from events.chain import GENESIS, StoredRecord
from events.codec import event_decoder
from events.content import KeptMessage, StoredMessage
from events.errors import StoreError, StoreFormatError
from events.group_commit import GroupCommit, GroupCommitStore
from events.model import LogEntry, RecordedEvent
from events.schema import CHAIN_SINCE, CONTENT_SINCE, RECORD_COLUMNS, SCHEMA_VERSION, identity_from_meta
from events.sqlite_checkpoint import BACKSTOP_PAGES, Checkpointer
from events.sqlite_file import find_store_file, say_how_opened
from events.sqlite_format import APPLICATION_ID, check_format, create_or_upgrade
from events.sqlite_write import TIP, CommitHook, EraseHook, Unit, run_hooks, write_unit
from events.store import (
    Clock,
    StoreIdentity,
    Tip,
    _check_position,
    added_hook,
    record_from_row,
)

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "CommitHook", "EraseHook", "SqliteStore", "ThreadReaders"]

Synchronous = Literal["full", "normal", "off"]

_COLUMNS = RECORD_COLUMNS
_uuid_decoder = msgspec.msgpack.Decoder(uuid.UUID)
_SCAN: Final = (
    "SELECT position, session_id, version, data FROM events WHERE position > ? AND position <= ? ORDER BY position"
    " LIMIT ?"
)
_READ: Final = f"SELECT {_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?"
_LAST_POSITION: Final = 2**63 - 1
_CHECKPOINT_PAGES: Final = 1000  # estimated WAL pages between background checkpoints (SQLite's default)


class _Translating:
    """``with``: a sqlite3 error raised inside becomes the store's own (``SqliteStore._store_error``). A class, not
    a generator-based context manager: it is entered around every statement a page or an append runs, and costs
    a fifth of one."""

    __slots__ = ("_store_error",)

    def __init__(self, store_error: Callable[[sqlite3.Error], StoreError]) -> None:
        self._store_error = store_error

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, sqlite3.Error):
            raise self._store_error(exc) from exc


class ThreadReaders:
    """One read connection per thread, made on its first read; ``close`` closes every one of them.

    A connection is used only by the thread that made it (a read transaction is a thread's own); ``close`` may
    run on another thread, which ``check_same_thread=False`` allows.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def get(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = self._connect()
            self._local.db = db
            with self._lock:
                self._all.append(db)
        return db

    def close(self) -> None:
        with self._lock:
            dbs, self._all = self._all, []
        for db in dbs:
            db.close()


class SqliteStore(GroupCommitStore):
    """An event store in one SQLite file. Several processes may open and append to the same file.

    ``create``: make the store when there is none (a missing or empty file); False for callers that only read.
    ``follow_symlinks``: allow a store path that is a symbolic link (refused by default: see ``sqlite_file``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "full",
        busy_timeout: float = 30.0,
        poll_interval: float = 0.02,
        create: bool = True,
        follow_symlinks: bool = False,
        clock: Clock | None = None,
        compress: bool = True,
    ) -> None:
        super().__init__(clock)
        self.compress = compress
        if synchronous not in ("full", "normal", "off"):
            raise ValueError(f"synchronous must be 'full', 'normal' or 'off', got {synchronous!r}")
        found = find_store_file(os.path.abspath(os.fspath(path)), create=create, follow_symlinks=follow_symlinks)
        self.path = found.path
        self.synchronous: Synchronous = synchronous
        self.poll_interval = poll_interval
        self._read_only = found.read_only
        self._uri: str | None = None
        if found.read_only is not None:
            import urllib.parse  # noqa: PLC0415 - only a store that cannot be written is opened by a URI

            self._uri = f"file:{urllib.parse.quote(self.path)}?mode=ro{'&immutable=1' if found.immutable else ''}"
        self._busy_timeout = busy_timeout
        self._write_lock = threading.Lock()
        self._readers = ThreadReaders(self._connect_reader)
        self._chained = True  # False only for a version-1 store opened read-only (not upgraded)
        self._kept = True  # False for a store older than version 3 opened read-only (no messages table)
        with found.made_alone():
            try:
                self._writer = self._open(create)
            except BaseException:
                found.remove_created()
                raise
        try:
            self._identity = self._load_identity()
        except BaseException:
            self._writer.close()
            raise
        say_how_opened(found)
        self._group: GroupCommit[Unit, list[list[int]]] = GroupCommit(self._commit_group)
        self._hooks: list[CommitHook] = []
        self._erase_hooks: list[EraseHook] = []
        self._wal_pages = 0  # estimated, since the last background checkpoint was requested
        self._checkpointer: Checkpointer | None = None
        if synchronous != "full" and self._read_only is None:
            self._checkpointer = Checkpointer(self.path, synchronous, busy_timeout)
            weakref.finalize(self, self._checkpointer.stop, wait=False)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r}, synchronous={self.synchronous!r})"

    @property
    def read_only(self) -> bool:
        return self._read_only is not None

    # -- opening --------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        with self._translate():
            if self._uri is not None:
                return sqlite3.connect(
                    self._uri, uri=True, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
                )
            db = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False)
            # Every connection that may write zeroes what it frees: a conversation erased (``erase``) or an index
            # rebuilt leaves no copy of its text in free space or free pages.
            db.execute("PRAGMA secure_delete=ON")
            return db

    def _open(self, initialise: bool) -> sqlite3.Connection:
        db = self._connect()
        try:
            # Look before writing anything: a foreign, empty (unless asked to create) or newer file must be left
            # exactly as it was.
            version = check_format(db, self.path, initialise, self._read_only)
            with self._translate():
                db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
                db.execute("PRAGMA cache_size=-65536")
                if self._read_only is not None:
                    self._chained = version >= CHAIN_SINCE
                    self._kept = version >= CONTENT_SINCE
                    return db
                db.execute("PRAGMA journal_mode=WAL")
                if self.synchronous != "full":
                    db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")  # see Checkpointer
                if version < SCHEMA_VERSION:  # a store of this version is never changed back: no write lock to open it
                    create_or_upgrade(db, self.path)
        except BaseException:
            db.close()
            raise
        return db

    def _load_identity(self) -> StoreIdentity:
        with self._translate():
            rows = dict(self._writer.execute("SELECT key, value FROM registry_meta").fetchall())
        return identity_from_meta(rows, self.path)

    # -- writing --------------------------------------------------------------------------------------

    def _commit_group(self, units: list[Unit]) -> list[list[list[int]] | BaseException]:
        """One transaction, one commit, for every unit the group commit queued (``events.group_commit``). Each
        unit (an append, or an ``append_batch``) is atomic on its own: it runs in a savepoint, and a unit that
        fails is rolled back to it and gets its error, while the others commit."""
        outcomes: list[list[list[int]] | BaseException] = []
        with self._write_lock, self._translate():
            db = self._writer
            db.execute("BEGIN IMMEDIATE")
            try:
                head, previous = db.execute(TIP).fetchone() or (0, GENESIS)
                tip = Tip(head, previous or GENESIS, None)
                for unit in units:
                    if len(units) == 1:  # its error rolls the whole transaction back (see the finally)
                        outcomes.append(write_unit(db, tip, unit, True, self._clock))
                        continue
                    try:
                        outcomes.append(write_unit(db, tip, unit, False, self._clock))
                    except (StoreError, ValueError) as exc:
                        outcomes.append(exc)
                    except sqlite3.Error as exc:
                        outcomes.append(self._store_error(exc))
                hooks = run_hooks(db, self._hooks, self.path) if self._hooks else ()
                db.execute("COMMIT")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        for hook in hooks:
            hook.committed()
        if self._checkpointer is not None:
            # A commit writes a page per table and index it touches (about 5), and about 16 events fill a page:
            # close enough (the pages a commit writes, counted: docs/benchmarks.md) to ask for a checkpoint about
            # every _CHECKPOINT_PAGES pages.
            self._wal_pages += 5 * len(units) + sum(len(r.events) for unit in units for r, _ in unit) // 16
            if self._wal_pages >= _CHECKPOINT_PAGES:
                self._wal_pages = 0
                self._checkpointer.request()
        return outcomes

    def add_commit_hook(self, hook: CommitHook) -> Callable[[], None]:
        """Run ``hook`` in every append transaction of this store, after the appends and before the commit, so
        that tables derived from the log (the registry's read model) are kept in the same transaction, with the
        same durability and without a second commit. ``hook.in_transaction(db, scan)`` gets the writer connection
        and ``scan(after)``, which reads the log on it (the transaction's own rows included); it runs in a
        savepoint, and a hook that fails is rolled back to it and logged while the appends still commit (derived
        data can always catch up later). ``hook.committed()`` follows a successful commit. Returns the remover."""
        return added_hook(self._hooks, self._write_lock, hook)

    def _reader(self) -> sqlite3.Connection:
        self._check_open()
        return self._readers.get()

    def _connect_reader(self) -> sqlite3.Connection:
        db = self._connect()
        with self._translate():
            db.execute("PRAGMA cache_size=-16384")
        return db

    def read(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        return self._records(_READ, (after, -1 if limit is None else limit))

    def read_stream(self, session_id: str, after_version: int = 0) -> list[RecordedEvent]:
        with self._translate():
            row = self._reader().execute("SELECT stream FROM streams WHERE session_id = ?", (session_id,)).fetchone()
        if row is None:
            return []
        return self._records(
            f"SELECT {_COLUMNS} FROM events WHERE stream = ? AND version > ? ORDER BY version", (row[0], after_version)
        )

    def _records(self, query: str, params: tuple[object, ...]) -> list[RecordedEvent]:
        # The hot loop of every replay: no call per row, and rows go from the cursor straight into envelopes
        # (a list of row tuples in between cost a share of a full read). Any bad row reads the rows again
        # through ``_record``, which names the row that is corrupt.
        uuid_of, event_of = _uuid_decoder.decode, event_decoder().decode
        with self._translate():
            cursor = self._reader().execute(query, params)
            try:
                return [RecordedEvent(p, s, v, uuid_of(b"\xc4\x10" + i), t, event_of(d)) for p, s, v, i, t, d in cursor]
            except (msgspec.DecodeError, TypeError, ValueError):
                cursor.close()  # ends its read transaction now
                return [record_from_row(r) for r in self._reader().execute(query, params)]

    def head(self) -> int:
        with self._translate():
            value = self._reader().execute("SELECT max(position) FROM events").fetchone()[0]
        return int(value or 0)

    def scan(self, after: int = 0, *, until: int | None = None, batch: int = 10_000) -> Iterator[LogEntry]:
        # The fold's read path: four columns, one prebuilt decoder, no envelope (``_batches``).
        return self._batches(after, until, batch, envelope=False)

    def iter_events(self, after: int = 0, *, batch: int = 10_000) -> Iterator[RecordedEvent]:
        # As ``scan``, with the whole envelope.
        return self._batches(after, None, batch, envelope=True)

    @overload
    def _batches(
        self, after: int, until: int | None, batch: int, *, envelope: Literal[False]
    ) -> Iterator[LogEntry]: ...

    @overload
    def _batches(
        self, after: int, until: int | None, batch: int, *, envelope: Literal[True]
    ) -> Iterator[RecordedEvent]: ...

    def _batches(
        self, after: int, until: int | None, batch: int, *, envelope: bool
    ) -> Iterator[LogEntry | RecordedEvent]:
        """The log after ``after`` (up to ``until``), as fold entries or with the whole envelope, read in keyset
        batches (``position > last``), so no read transaction stays open between them. Entries are yielded as the
        cursor gives rows rather than gathered into a list first: a batch of live objects made the cyclic GC run
        over and over (docs/benchmarks.md). Each kind has its own loop, picked
        once a batch: no call per row. A bad row is read again through ``_name_bad_row``, which names it."""
        _check_position("after", after)
        upper = _LAST_POSITION if until is None else _check_position("until", until)
        uuid_of, decode = _uuid_decoder.decode, event_decoder().decode
        reader = self._reader()
        while True:
            count = 0
            try:
                if envelope:
                    for p, s, v, i, t, d in reader.execute(_READ, (after, batch)):
                        record = RecordedEvent(p, s, v, uuid_of(b"\xc4\x10" + i), t, decode(d))
                        count += 1
                        after = p
                        yield record
                else:
                    for position, session_id, version, data in reader.execute(_SCAN, (after, upper, batch)):
                        entry = LogEntry(position, session_id, version, decode(data))
                        count += 1
                        after = position
                        yield entry
            except (msgspec.DecodeError, TypeError, ValueError):
                self._name_bad_row(after)
                raise
            except sqlite3.Error as exc:
                raise self._store_error(exc) from exc
            if count < batch:
                return

    def _name_bad_row(self, after: int) -> None:
        """Raise ``CorruptEventError`` for the first record after ``after`` when it does not decode."""
        with self._translate():
            row = self._reader().execute(
                f"SELECT {_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT 1", (after,)
            )
            for found in row:
                record_from_row(found)

    def chain_at(self, position: int) -> bytes | None:
        if position == 0:
            return GENESIS
        if not self._chained:
            return None
        with self._translate():
            row = self._reader().execute("SELECT chain FROM events WHERE position = ?", (position,)).fetchone()
        return None if row is None or not isinstance(row[0], bytes) else row[0]

    def stored_records(self, after: int = 0, limit: int = 10_000) -> list[StoredRecord]:
        chain = "chain" if self._chained else "NULL"
        with self._translate():
            rows = self._reader().execute(
                f"SELECT {_COLUMNS}, {chain} FROM events WHERE position > ? ORDER BY position LIMIT ?", (after, limit)
            )
            return [StoredRecord(*row) for row in rows]

    # -- the messages kept beside the log (``events.sqlite_content``) -----------------------------------

    def messages(self, session_id: str, *, until: int | None = None) -> list[KeptMessage]:
        if not self._kept:
            return []
        with self._translate():
            return sqlite_content.messages(self._reader(), session_id, until)

    def messages_at(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], KeptMessage]:
        if not self._kept:
            return {}
        with self._translate():
            return sqlite_content.messages_at(self._reader(), keys)

    def stored_messages(self, after: int = 0, limit: int = 10_000) -> list[tuple[int, str, StoredMessage]]:
        if not self._kept:
            return []
        with self._translate():
            return sqlite_content.stored_messages(self._reader(), after, limit)

    def add_erase_hook(self, hook: EraseHook) -> Callable[[], None]:
        """Run ``hook.erasing(db, session_id, messages)`` in every erasure's transaction, before the messages'
        rows go: indexes derived from them in this file take their text out in the same transaction. Returns the
        remover."""
        return added_hook(self._erase_hooks, self._write_lock, hook)

    def _erase(self, session_id: str) -> int:
        with self._write_lock, self._translate():
            return sqlite_content.erase(self._writer, session_id, self._erase_hooks, self.path, self._busy_timeout)

    # -- waiting for other processes' appends --------------------------------------------------------

    def _change_token(self) -> object:
        return self._doorbell.generation, self._data_version()

    def _wait_for_change(self, token: object, timeout: float | None) -> None:
        """Sleep on the doorbell (this process's appends), looking every ``poll_interval`` at ``PRAGMA
        data_version``, which moves when any other connection commits. A look is one cheap statement on this
        thread's connection, where a read of the log each time made an idle subscription cost CPU for nothing (its
        figure: docs/benchmarks.md)."""
        generation, version = cast(tuple[int, int], token)
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = self.poll_interval or 0.01
        doorbell, db = self._doorbell, self._reader()
        try:
            while not self._closed:
                step = interval if deadline is None else min(interval, deadline - time.monotonic())
                if step <= 0:
                    return
                doorbell.wait(generation, step)
                if doorbell.generation != generation or db.execute("PRAGMA data_version").fetchone()[0] != version:
                    return
        except sqlite3.Error:
            if self._closed:
                return  # closed under us: the subscription ends
            with self._translate():
                raise

    def _data_version(self) -> int:
        with self._translate():
            return int(self._reader().execute("PRAGMA data_version").fetchone()[0])

    # -- for derived tables in the same file (the registry's read model) --------------------------------

    def connect(self) -> sqlite3.Connection:
        """A new connection to the store's file (autocommit, the store's busy timeout), for tables derived from
        the log that live beside it. The caller owns and closes it; sqlite3 errors met on it should pass through
        ``translate_errors``. A read-only store gives a read-only connection (``read_only``)."""
        self._check_open()
        return self._connect()

    def translate_errors(self) -> contextlib.AbstractContextManager[None]:
        """The store's own translation of sqlite3 errors into ``StoreError`` (see ``_translate``)."""
        return self._translate()

    # -- closing and errors ---------------------------------------------------------------------------

    def _close(self) -> None:
        self._readers.close()
        with self._write_lock:
            if self._checkpointer is not None:
                self._checkpointer.stop()
            self._writer.close()

    def _translate(self) -> _Translating:
        """The one place sqlite3's errors become the library's."""
        return _Translating(self._store_error)

    def _store_error(self, exc: sqlite3.Error) -> StoreError:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return StoreError(
                f"{self.path}: another writer held the database for over {self._busy_timeout:g} s ({exc})"
            )
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return StoreFormatError(self.path, f"the file is damaged ({exc}); left untouched")
        return StoreError(f"{self.path}: {exc}")
