"""The SQLite read model's tables as made and as found: the ``CREATE`` statements, and what the schema check and
``verify`` read of the tables as they are (``sqlite.py`` serves from them).

The columns and indexes every backend keeps are declared in ``schema.py``; this backend adds its rowids and one
index of its own (``OWN_COLUMNS``, ``OWN_INDEXES``), and ``ReadModelContract`` checks that fresh tables made by
``SCHEMA`` are exactly that.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any, Final

from registry.readmodel.schema import TABLES, FoundSchema, schema_problems
from registry.readmodel.tables import CurrentRow, PastRow

__all__ = ["SCHEMA", "create", "describe", "problems", "storage_problems", "stored_meta", "stored_rows"]

_TABLES: Final = ("rm_meta", "rm_sessions", "rm_past")
SCHEMA: Final = (
    "CREATE TABLE rm_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    # A rowid table: the list indexes find a row by its integer rowid, cheaper than by a text key (measured
    # ~15% off a page against WITHOUT ROWID keyed by session id, for one more index to write per change).
    """CREATE TABLE rm_sessions (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL UNIQUE,
        cwd TEXT NOT NULL,
        rank INTEGER NOT NULL,
        live INTEGER NOT NULL,
        valid_from INTEGER NOT NULL,
        state BLOB NOT NULL,
        archived INTEGER NOT NULL,
        agent TEXT
    )""",
    "CREATE INDEX rm_sessions_order ON rm_sessions (archived, rank, session_id, valid_from) WHERE live",
    "CREATE INDEX rm_sessions_cwd ON rm_sessions (cwd, archived, rank, session_id, valid_from) WHERE live",
    "CREATE INDEX rm_sessions_agent ON rm_sessions (agent, archived, rank, session_id, valid_from)"
    " WHERE live AND agent IS NOT NULL",
    """CREATE TABLE rm_past (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        cwd TEXT NOT NULL,
        rank INTEGER NOT NULL,
        live INTEGER NOT NULL,
        valid_from INTEGER NOT NULL,
        valid_to INTEGER NOT NULL,
        state BLOB NOT NULL,
        archived INTEGER NOT NULL,
        agent TEXT
    )""",
    "CREATE INDEX rm_past_to ON rm_past (valid_to)",
    "CREATE INDEX rm_past_session ON rm_past (session_id, valid_from)",
)
_OWN_COLUMNS: Final = {"rm_sessions": ("id",), "rm_past": ("id",)}
"""Columns only this backend keeps beside the declared ones (``tables.TABLES``): the rowids."""
_OWN_INDEXES: Final = {"rm_past_session": ("rm_past", ("session_id", "valid_from"))}
"""Indexes only this backend keeps beside the declared ones (``tables.INDEXES``)."""


def problems(found: FoundSchema) -> list[str]:
    """How ``found`` departs from the declared schema and this backend's own additions."""
    return schema_problems(found, own_columns=_OWN_COLUMNS, own_indexes=_OWN_INDEXES)


_RM_OBJECTS: Final = "SELECT type, name, tbl_name FROM sqlite_master WHERE name LIKE 'rm\\_%' ESCAPE '\\'"


def describe(db: sqlite3.Connection) -> FoundSchema:
    """The ``rm_*`` tables, columns, indexes and ``rm_meta`` rows as they are in the file."""
    objects = db.execute(_RM_OBJECTS).fetchall()
    tables = {
        name: tuple(row[1] for row in db.execute(f'PRAGMA table_info("{name}")'))
        for kind, name, _ in objects
        if kind == "table"
    }
    indexes = {
        name: (table, tuple(row[2] for row in sorted(db.execute(f'PRAGMA index_info("{name}")'))))
        for kind, name, table in objects
        if kind == "index"
    }
    meta: dict[str, int] | None = None
    if "rm_meta" in tables:
        try:
            meta = stored_meta(db)
        except sqlite3.Error:
            meta = None
    return FoundSchema(tables, indexes, meta)


def create(db: sqlite3.Connection) -> None:
    """Replace whatever ``rm_*`` tables are there (stray, partial or damaged ones too) with empty ones."""
    found = [name for kind, name, _ in db.execute(_RM_OBJECTS).fetchall() if kind == "table"]
    for table in sorted({*_TABLES, *found}):
        db.execute(f'DROP TABLE IF EXISTS "{table}"')
    for statement in SCHEMA:
        db.execute(statement)


def stored_meta(db: sqlite3.Connection) -> dict[str, int]:
    """``rm_meta``'s integer rows as stored."""
    return {key: value for key, value in db.execute("SELECT key, value FROM rm_meta") if type(value) is int}


def stored_rows(db: sqlite3.Connection, table: str) -> Iterator[tuple[Any, ...]]:
    """Every row of ``rm_sessions`` or ``rm_past`` as stored, in the columns of the rows the fold writes."""
    columns = {"rm_sessions": CurrentRow._fields, "rm_past": PastRow._fields}[table]
    yield from db.execute(f"SELECT {', '.join(columns)} FROM {table}")


def storage_problems(db: sqlite3.Connection) -> list[str]:
    """What SQLite's own integrity check finds wrong with the ``rm_*`` tables and their indexes."""
    found = []
    for table in TABLES:
        for (line,) in db.execute(f'PRAGMA integrity_check("{table}")'):
            if line != "ok":
                found.append(f"{table}: {line}")
    return found
