"""The backend factory: which ``Backend`` a store has - the one place that knows the store classes.

* ``SqliteBackend``: the read model's tables in the store's own file, snapshots in ``<file>.snapshots/``, the
  import state in ``<file>.import-state``, integrity evidence in a table of the file, the log's size the file and
  its ``-wal``;
* ``PostgresBackend``: the tables and the evidence in the store's schema, snapshots and import state in the user's
  cache and state directories under the store's id, positions that may have gaps (events are counted by the
  server); loaded only when such a store is open (psycopg stays out otherwise);
* ``MemoryBackend``: ``memory://`` keeps nothing beside its log, folds in memory;
* ``Backend`` itself (``registry.backend``): any other ``EventStore``.

A new store means one module in ``events/`` held to ``events.testing.StoreContract`` and one ``Backend`` here held
to ``registry.testing.ReadModelContract``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from events.memory import MemoryStore
from events.schema import count_query
from events.sqlite import SqliteStore
from events.store import EventStore
from registry.backend import Backend
from registry.evidence import IntegrityEvent
from registry.readmodel import ReadModel
from registry.readmodel.sqlite import SqliteReadModel

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

    from events.postgres import PostgresStore

__all__ = ["MemoryBackend", "PostgresBackend", "SqliteBackend", "backend_for"]

_T = TypeVar("_T")
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

    @property
    def location(self) -> str:
        return self._sqlite.path

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        return SqliteReadModel.open(self, self._sqlite, window=window, catch_up=catch_up)

    def snapshot_dir(self) -> Path | None:
        return Path(self._sqlite.path + ".snapshots")

    def import_state_path(self) -> Path | None:
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
    if isinstance(store, MemoryStore):
        return MemoryBackend(store)
    postgres = sys.modules.get("events.postgres")  # not loaded: no such store can be open (psycopg stays out)
    if postgres is not None and isinstance(store, postgres.PostgresStore):
        return PostgresBackend(store)
    return Backend(store)
