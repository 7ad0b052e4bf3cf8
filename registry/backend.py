"""The read side's backend seam: every question whose answer depends on the kind of store, asked in one place.

The registry keeps derived data beside each log - the read model, kept snapshots, the importers' state - and a
few facts about the log itself (its size on disk, how many events lie up to a position). Where and how differs
per backend; ``backend_for(store)`` is the only function that knows the store classes, and everything else in
``registry/`` asks the ``Backend`` it returns:

* ``SqliteBackend``: the read model's tables in the store's own file, snapshots in ``<file>.snapshots/``, the
  import state in ``<file>.import-state``, the log's size the file and its ``-wal``;
* ``PostgresBackend``: the tables in the store's schema, snapshots and import state in the user's cache and
  state directories under the store's id, positions that may have gaps (events are counted by the server);
* ``MemoryBackend``: ``memory://`` keeps nothing beside its log, folds in memory;
* ``OtherBackend``: any other ``EventStore``: folded in memory, files under the store's id.

A new store means one module in ``events/`` held to ``events.testing.StoreContract`` and one ``Backend`` here held
to ``registry.testing.ReadModelContract``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import msgspec

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

    from events.store import EventStore
    from registry.readmodel import ReadModel

from registry.evidence import IntegrityEvent

_KEPT: weakref.WeakKeyDictionary[EventStore, list[IntegrityEvent]] = weakref.WeakKeyDictionary()
"""Integrity events of stores that keep nothing beside their log, for as long as the store object lives."""
_T = TypeVar("_T")
_TABLE: Final = "acp_integrity"
_COLUMNS: Final = "found_at, seen_by, position, chain, head, acknowledged"

__all__ = ["Backend", "MemoryBackend", "OtherBackend", "PostgresBackend", "SqliteBackend", "backend_for"]


class Backend(Protocol):
    """What the registry keeps beside one store's log, and where."""

    @property
    def store(self) -> EventStore: ...

    @property
    def name(self) -> str:
        """``sqlite``, ``postgresql``, ``memory`` or ``other``, for people and tests."""
        ...

    @property
    def location(self) -> str:
        """The store as messages name it (a file's path, a server's schema, a URL)."""
        ...

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        """The read model kept as tables in the store (created or rebuilt as needed), or None: fold in memory
        (a store that keeps no tables, or a read-only file whose tables cannot serve)."""
        ...

    def snapshot_dir(self) -> Path | None:
        """Where kept snapshots live (None: nowhere, they are not kept)."""
        ...

    def import_state_path(self) -> Path | None:
        """Where the importers keep their state between passes (None: in memory only)."""
        ...

    def log_bytes(self) -> int | None:
        """The log's size on disk (None: not known from here)."""
        ...

    def events_up_to(self, position: int) -> int:
        """How many events the log holds at positions ``<= position``."""
        ...

    def record_integrity(self, event: IntegrityEvent) -> None:
        """Keep ``event`` in the store (once: the same finding again is not added); raises where it cannot."""
        ...

    def integrity_events(self) -> list[IntegrityEvent]:
        """The integrity events recorded in the store, oldest first (acknowledged ones included)."""
        ...

    def acknowledge(self) -> int:
        """Mark every integrity event acknowledged; returns how many were not yet."""
        ...


def _user_dir(kind: str) -> Path:
    import platformdirs  # noqa: PLC0415 - only when such a store is open

    if kind == "cache":
        return Path(platformdirs.user_cache_dir("acp-registry"))
    return Path(platformdirs.user_state_dir("acp-registry"))


class OtherBackend:
    """Any store this module does not know: the in-memory fold, files under the store's id."""

    name = "other"

    def __init__(self, store: EventStore) -> None:
        self._store = store

    @property
    def store(self) -> EventStore:
        return self._store

    @property
    def location(self) -> str:
        return repr(self._store)

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        return None

    def snapshot_dir(self) -> Path | None:
        return _user_dir("cache") / "snapshots" / self._store.identity.store_id

    def import_state_path(self) -> Path | None:
        return _user_dir("state") / f"import-state-{self._store.identity.store_id}.msgpack"

    def log_bytes(self) -> int | None:
        return None

    def events_up_to(self, position: int) -> int:
        return sum(1 for _ in self._store.scan(0, until=position))

    def record_integrity(self, event: IntegrityEvent) -> None:
        kept = _KEPT.setdefault(self._store, [])
        if not any(_same(event, known) for known in kept):
            kept.append(event)

    def integrity_events(self) -> list[IntegrityEvent]:
        return list(_KEPT.get(self._store, []))

    def acknowledge(self) -> int:
        kept = _KEPT.get(self._store, [])
        fresh = sum(not event.acknowledged for event in kept)
        kept[:] = [msgspec.structs.replace(event, acknowledged=True) for event in kept]
        return fresh


def _same(a: IntegrityEvent, b: IntegrityEvent) -> bool:
    return (a.seen_by, a.position, a.chain, a.head) == (b.seen_by, b.position, b.chain, b.head)


class MemoryBackend(OtherBackend):
    """``memory://``: nothing is kept beside the log (it lives and dies with the process)."""

    name = "memory"

    def snapshot_dir(self) -> Path | None:
        return None

    def import_state_path(self) -> Path | None:
        return None

    def events_up_to(self, position: int) -> int:
        return min(position, self._store.head())  # positions are contiguous from 1


class SqliteBackend(OtherBackend):
    """A SQLite file: everything derived lives in it or beside it."""

    name = "sqlite"

    def __init__(self, store: EventStore) -> None:
        from events.sqlite import SqliteStore  # noqa: PLC0415

        assert isinstance(store, SqliteStore)
        super().__init__(store)
        self._sqlite = store

    @property
    def location(self) -> str:
        return self._sqlite.path

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        from registry.readmodel.sqlite import SqliteReadModel  # noqa: PLC0415 - each backend loads only when used

        return SqliteReadModel.open(self._sqlite, window=window, catch_up=catch_up)

    def snapshot_dir(self) -> Path | None:
        return Path(self._sqlite.path + ".snapshots")

    def import_state_path(self) -> Path | None:
        return Path(self._sqlite.path + ".import-state")

    def _evidence(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        db = self._sqlite.connect()
        try:
            with self._sqlite.translate_errors():
                db.execute(
                    f"CREATE TABLE IF NOT EXISTS {_TABLE} (found_at INTEGER NOT NULL, seen_by TEXT NOT NULL,"
                    " position INTEGER NOT NULL, chain TEXT NOT NULL, head INTEGER NOT NULL,"
                    " acknowledged INTEGER NOT NULL DEFAULT 0, UNIQUE (seen_by, position, chain, head))"
                )
                return work(db)
        finally:
            db.close()

    def record_integrity(self, event: IntegrityEvent) -> None:
        self._evidence(
            lambda db: db.execute(
                f"INSERT OR IGNORE INTO {_TABLE} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (event.found_at, event.seen_by, event.position, event.chain, event.head, event.acknowledged),
            )
        )

    def integrity_events(self) -> list[IntegrityEvent]:
        db = self._sqlite.connect()  # a read: the table is made only by the first record
        try:
            rows = db.execute(f"SELECT {_COLUMNS} FROM {_TABLE} ORDER BY found_at").fetchall()
        except sqlite3.OperationalError:
            return []  # nothing was ever recorded
        finally:
            db.close()
        return [IntegrityEvent(a, b, c, d, e, bool(f)) for a, b, c, d, e, f in rows]

    def acknowledge(self) -> int:
        return self._evidence(
            lambda db: db.execute(f"UPDATE {_TABLE} SET acknowledged = 1 WHERE NOT acknowledged").rowcount
        )

    def log_bytes(self) -> int | None:
        path = self._sqlite.path
        return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))

    def events_up_to(self, position: int) -> int:
        return min(position, self._store.head())  # positions are contiguous from 1


class PostgresBackend(OtherBackend):
    """A PostgreSQL schema: the tables beside the log, files under the store's id; positions may have gaps."""

    name = "postgresql"

    def __init__(self, store: EventStore) -> None:
        from events.postgres import PostgresStore  # noqa: PLC0415 - psycopg loads only with such a store open

        assert isinstance(store, PostgresStore)
        super().__init__(store)
        self._postgres = store

    @property
    def location(self) -> str:
        return self._postgres.location

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        from registry.readmodel.postgres import PostgresReadModel  # noqa: PLC0415

        return PostgresReadModel(self._postgres, window=window, catch_up=catch_up)

    def _evidence(
        self, statement: str, params: tuple[object, ...] = (), *, create: bool = True
    ) -> list[tuple[Any, ...]]:
        from psycopg import sql  # noqa: PLC0415

        schema = sql.Identifier(self._postgres.schema)
        create_table = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.acp_integrity (found_at bigint NOT NULL, seen_by text NOT NULL,"
            " position bigint NOT NULL, chain text NOT NULL, head bigint NOT NULL,"
            " acknowledged boolean NOT NULL DEFAULT false, UNIQUE (seen_by, position, chain, head))"
        ).format(schema)
        query = sql.SQL(statement).format(schema)

        def work(conn: psycopg.Connection[TupleRow]) -> list[tuple[Any, ...]]:
            if create:
                conn.execute(create_table)
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else [(cursor.rowcount,)]

        return self._postgres.run(work)

    def record_integrity(self, event: IntegrityEvent) -> None:
        self._evidence(
            f"INSERT INTO {{}}.acp_integrity ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (event.found_at, event.seen_by, event.position, event.chain, event.head, event.acknowledged),
        )

    def integrity_events(self) -> list[IntegrityEvent]:
        from psycopg import sql  # noqa: PLC0415

        exists = sql.SQL("SELECT to_regclass({})").format(sql.Literal(f'"{self._postgres.schema}".acp_integrity'))
        if self._postgres.run(lambda conn: conn.execute(exists).fetchone()) in (None, (None,)):
            return []  # nothing was ever recorded
        rows = self._evidence(f"SELECT {_COLUMNS} FROM {{}}.acp_integrity ORDER BY found_at", create=False)
        return [IntegrityEvent(int(a), b, int(c), d, int(e), bool(f)) for a, b, c, d, e, f in rows]

    def acknowledge(self) -> int:
        return int(self._evidence("UPDATE {}.acp_integrity SET acknowledged = true WHERE NOT acknowledged")[0][0])

    def events_up_to(self, position: int) -> int:
        from psycopg import sql  # noqa: PLC0415

        query = sql.SQL("SELECT count(*) FROM {}.events WHERE position <= %s").format(
            sql.Identifier(self._postgres.schema)
        )

        def count(conn: psycopg.Connection[TupleRow]) -> int:
            row = conn.execute(query, (position,)).fetchone()
            return 0 if row is None else int(row[0])

        return self._postgres.run(count)


def backend_for(store: EventStore) -> Backend:
    """The backend of ``store``: the one place that knows the store classes."""
    from events.memory import MemoryStore  # noqa: PLC0415
    from events.sqlite import SqliteStore  # noqa: PLC0415

    if isinstance(store, SqliteStore):
        return SqliteBackend(store)
    if isinstance(store, MemoryStore):
        return MemoryBackend(store)
    postgres = sys.modules.get("events.postgres")  # not loaded: no such store can be open (psycopg stays out)
    if postgres is not None and isinstance(store, postgres.PostgresStore):
        return PostgresBackend(store)
    return OtherBackend(store)
