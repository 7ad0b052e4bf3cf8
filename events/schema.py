"""The log's tables, defined once for both SQL backends, and what ``registry_meta`` holds.

Each table is written down once with portable column kinds; ``sqlite_ddl`` and ``postgres_ddl`` render it in
each dialect. Version 2 adds ``events.chain`` (see ``events.chain``): a version-1 store is upgraded in place on
its first writable open (the chain is computed then); a store of a newer version is refused untouched. PostgreSQL's
version 3 links new records by a function the server computes (``events.chain.sql_link``); upgrading to it only
records where that starts.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Final, Literal, NamedTuple

from events.errors import StoreFormatError
from events.store import StoreIdentity

__all__ = [
    "CHAIN_SINCE",
    "POSTGRES_SCHEMA_VERSION",
    "RECORD_COLUMNS",
    "SCHEMA_VERSION",
    "SQL_LINK_SINCE",
    "TABLES",
    "Table",
    "chain_query",
    "count_query",
    "entries_query",
    "head_query",
    "identity_from_meta",
    "new_meta",
    "postgres_ddl",
    "sqlite_ddl",
]

SCHEMA_VERSION: Final = 2
"""The log's schema version (SQLite: ``PRAGMA user_version``; PostgreSQL: ``registry_meta.schema_version``):
1 = the first release; 2 = every record carries its link of the integrity chain."""
CHAIN_SINCE: Final = 2
POSTGRES_SCHEMA_VERSION: Final = 3
"""PostgreSQL's schema version: 3 = records are linked by ``events.chain.sql_link`` (which the server computes)
from the position ``registry_meta.sql_link_from`` names on; the links before it are version 2's, kept."""
SQL_LINK_SINCE: Final = 3

Kind = Literal["text", "blob", "int", "int32", "uuid"]
# Column kinds in each dialect: SQLite's INTEGER is 64-bit already; PostgreSQL has a native uuid.
_TYPES: Final[dict[Kind, tuple[str, str]]] = {
    "text": ("TEXT", "text"),
    "blob": ("BLOB", "bytea"),
    "int": ("INTEGER", "bigint"),
    "int32": ("INTEGER", "integer"),
    "uuid": ("BLOB", "uuid"),
}


class Table(NamedTuple):
    name: str
    columns: tuple[tuple[str, Kind, bool], ...]  # (name, kind, NOT NULL)
    primary_key: tuple[str, ...]
    unique: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (constraint name, columns)
    clustered: bool = False  # SQLite: WITHOUT ROWID (the primary key is the table)


TABLES: Final = (
    Table("registry_meta", (("key", "text", True), ("value", "blob", True)), ("key",), clustered=True),
    Table(
        "streams",
        (("session_id", "text", True), ("stream", "int", True), ("version", "int32", True)),
        ("session_id",),
        (("streams_stream", ("stream",)),),
        clustered=True,
    ),
    Table(
        "events",
        (
            ("position", "int", True),
            ("stream", "int", True),
            ("version", "int32", True),
            ("event_id", "uuid", True),
            ("recorded_at", "int", True),
            ("session_id", "text", True),
            ("data", "blob", True),
            ("chain", "blob", False),  # NULL only in a version-1 store being upgraded
        ),
        ("position",),
        (("events_event_id", ("event_id",)), ("events_stream_version", ("stream", "version"))),
    ),
)
RECORD_COLUMNS: Final = "position, session_id, version, event_id, recorded_at, data"
"""A ``RecordedEvent``'s columns, in its order."""


def _ddl(table: Table, dialect: int, prefix: str) -> str:
    columns = [
        f"{name} {_TYPES[kind][dialect]}{' NOT NULL' if required else ''}" for name, kind, required in table.columns
    ]
    columns.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")  # an INTEGER key is SQLite's rowid alias
    columns += [f"CONSTRAINT {name} UNIQUE ({', '.join(cols)})" for name, cols in table.unique]
    rowid = " WITHOUT ROWID" if table.clustered and dialect == 0 else ""
    return f"CREATE TABLE IF NOT EXISTS {prefix}{table.name} ({', '.join(columns)}){rowid}"


def sqlite_ddl() -> list[str]:
    return [_ddl(table, 0, "") for table in TABLES]


def postgres_ddl(quoted_schema: str) -> list[str]:
    """The statements for one schema (``quoted_schema`` is already a quoted identifier)."""
    return [_ddl(table, 1, f"{quoted_schema}.") for table in TABLES]


def new_meta() -> list[tuple[str, bytes]]:
    """A new store's ``registry_meta``: a stable id and the secret cursors are signed with."""
    return [("store_id", str(uuid.uuid4()).encode()), ("secret", os.urandom(32))]


def identity_from_meta(meta: Mapping[str, bytes | memoryview], location: str) -> StoreIdentity:
    """The identity ``registry_meta`` holds; a damaged table is a ``StoreFormatError`` naming the store."""
    try:
        return StoreIdentity(bytes(meta["store_id"]).decode(), bytes(meta["secret"]))
    except (KeyError, UnicodeDecodeError) as exc:
        raise StoreFormatError(location, f"registry_meta is damaged ({exc!r})") from exc


# -- what the read side embeds in its own statements ---------------------------------------------------------
# The registry's read model lives beside the log (the same SQLite file or PostgreSQL schema) and reads a few facts
# of the log inside its own statements and transactions; the log's table and columns are named here, never there.
# ``prefix`` is "" (SQLite) or a schema followed by a dot; ``mark`` a parameter placeholder of the driver.


def head_query(prefix: str = "") -> str:
    """The log's head (0 when it is empty), as a scalar subquery."""
    return f"(SELECT coalesce(max(position), 0) FROM {prefix}events)"


def chain_query(prefix: str = "", mark: str = "?") -> str:
    """The chain link at the position ``mark`` (no row: no record there)."""
    return f"SELECT chain FROM {prefix}events WHERE position = {mark}"


def count_query(prefix: str = "", mark: str = "?") -> str:
    """How many records the log holds at positions up to ``mark``."""
    return f"SELECT count(*) FROM {prefix}events WHERE position <= {mark}"


def entries_query(prefix: str = "", after: str = "?", until: str = "?") -> str:
    """The lean read path's rows (position, session id, version, encoded event) after ``after`` up to ``until``, in
    position order."""
    return (
        f"SELECT position, session_id, version, data FROM {prefix}events"
        f" WHERE position > {after} AND position <= {until} ORDER BY position"
    )
