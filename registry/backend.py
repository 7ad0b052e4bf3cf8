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
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

    from events.store import EventStore
    from registry.readmodel import ReadModel

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
