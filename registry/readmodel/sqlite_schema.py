"""The SQLite read model's tables as made and as found: made by the statements ``schema.py`` renders, found by one
query of ``sqlite_master`` - the text every object on an ``rm_*`` table was made by, which is exactly the rendered
statement when the object is this version's - and what ``verify`` reads of them as they are
(``SqliteStoredTables``; ``sqlite.py`` serves from them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, Final

from events.sqlite import SqliteStore
from registry.readmodel import StoredTables
from registry.readmodel import sqlite_sql as sql
from registry.readmodel.keys import HeldKey
from registry.readmodel.schema import STORED_COLUMNS, TABLES, FoundObject, FoundSchema, schema_problems, sqlite_ddl
from registry.readmodel.tables import matches_log

__all__ = [
    "SCHEMA",
    "SqliteStoredTables",
    "create",
    "describe",
    "problems",
    "storage_problems",
    "stored_meta",
    "stored_rows",
]

SCHEMA: Final = tuple(sqlite_ddl())
_ON_RM: Final = "(name LIKE 'rm\\_%' ESCAPE '\\' OR tbl_name LIKE 'rm\\_%' ESCAPE '\\')"
# Every object on an rm_* table (a trigger or a view too), with a table's columns; the indexes SQLite makes for a
# table's UNIQUE constraint have no text of their own (the table's text says them).
_OBJECTS: Final = (
    "SELECT type, name, tbl_name, sql, (SELECT group_concat(name, ' ') FROM pragma_table_info(m.name))"
    f" FROM sqlite_master AS m WHERE {_ON_RM} AND sql IS NOT NULL"
)


def problems(found: FoundSchema, key_id: int) -> list[str]:
    """How ``found`` departs from the declared schema (its rows sealed with the key ``key_id`` names)."""
    return schema_problems(found, "sqlite", key_id)


def describe(db: sqlite3.Connection) -> FoundSchema:
    """The objects on ``rm_*`` tables and ``rm_meta``'s rows as they are in the file."""
    objects = {
        name: FoundObject(kind, table, sql, tuple((columns or "").split()) if kind == "table" else ())
        for kind, name, table, sql, columns in db.execute(_OBJECTS).fetchall()
    }
    meta: dict[str, int] | None = None
    if objects.get("rm_meta", FoundObject("", "", "")).kind == "table":
        try:
            meta = stored_meta(db)
        except sqlite3.Error:
            meta = None
    return FoundSchema(objects, meta)


def create(db: sqlite3.Connection) -> None:
    """Replace whatever is on ``rm_*`` tables (stray, partial or damaged objects too) with empty tables."""
    found = db.execute(f"SELECT type, name FROM sqlite_master WHERE {_ON_RM} AND sql IS NOT NULL").fetchall()
    for kind, name in sorted(found, key=lambda row: row[0] == "table"):  # a table's own indexes go with it
        db.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
    for table in TABLES:
        db.execute(f'DROP TABLE IF EXISTS "{table.name}"')
    for statement in SCHEMA:
        db.execute(statement)


def stored_meta(db: sqlite3.Connection) -> dict[str, int]:
    """``rm_meta``'s integer rows as stored."""
    return {key: value for key, value in db.execute("SELECT key, value FROM rm_meta") if type(value) is int}


def stored_rows(db: sqlite3.Connection, table: str) -> Iterator[tuple[Any, ...]]:
    """Every row of ``rm_sessions`` or ``rm_past`` as stored, in the columns of the rows the fold writes."""
    columns = STORED_COLUMNS[table]
    yield from db.execute(f"SELECT {', '.join(columns)} FROM {table}")


def storage_problems(db: sqlite3.Connection) -> list[str]:
    """What SQLite's own integrity check finds wrong with the ``rm_*`` tables and their indexes."""
    found = []
    for table in TABLES:
        for (line,) in db.execute(f'PRAGMA integrity_check("{table.name}")'):
            if line != "ok":
                found.append(f"{table.name}: {line}")
    return found


class SqliteStoredTables(StoredTables):
    """The tables in a SQLite store's file as they are stored (``StoredTables``): read, never repaired."""

    def __init__(self, store: SqliteStore, reader: Callable[[], sqlite3.Connection], key: HeldKey) -> None:
        self._store = store
        self._reader = reader
        self._key = key

    def describe(self, db: sqlite3.Connection) -> FoundSchema:
        with self._store.translate_errors():
            return describe(db)

    def problems(self, found: FoundSchema) -> list[str]:
        return problems(found, self._key.seal.key_id)

    def schema_problems(self) -> list[str]:
        return self.problems(self.describe(self._reader()))

    def matches_log(self, db: sqlite3.Connection) -> bool:
        """Whether the tables' checkpoint is a position of this log with the chain link they recorded."""
        return matches_log(dict(db.execute(sql.META).fetchall()), lambda at: db.execute(sql.CHAIN, (at,)).fetchone())

    def stored(self, table: str) -> Iterator[tuple[Any, ...]]:
        db = self._store.connect()
        try:
            with self._store.translate_errors():
                yield from stored_rows(db, table)
        finally:
            db.close()

    def stored_meta(self) -> dict[str, int]:
        with self._store.translate_errors():
            return stored_meta(self._reader())

    def checkpoint_matches_log(self) -> bool:
        """Whether the checkpoint is a position of this log with the chain link the tables recorded there."""
        with self._store.translate_errors():
            return self.matches_log(self._reader())

    def storage_problems(self) -> list[str]:
        with self._store.translate_errors():
            return storage_problems(self._reader())
