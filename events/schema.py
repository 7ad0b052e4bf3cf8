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
from typing import Final, Literal

import msgspec

from events.errors import StoreFormatError
from events.store import StoreIdentity

__all__ = [
    "CHAIN_SINCE",
    "CONTENT_SINCE",
    "FENCE_MESSAGE",
    "MESSAGE_BUCKETS",
    "POSTGRES_CONTENT_SINCE",
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
    "sqlite_fence",
    "table",
]

SCHEMA_VERSION: Final = 3
"""The log's schema version (SQLite: ``PRAGMA user_version``; PostgreSQL: ``registry_meta.schema_version``):
1 = the first release; 2 = every record carries its link of the integrity chain; 3 = conversations: the
``messages`` table beside the log, and every record names the format its writer knew (``writer``), so that a
process of an older version still running after an upgrade cannot write (the fence)."""
CHAIN_SINCE: Final = 2
CONTENT_SINCE: Final = 3
POSTGRES_SCHEMA_VERSION: Final = 4
"""PostgreSQL's schema version: 3 = records are linked by ``events.chain.sql_link`` (which the server computes)
from the position ``registry_meta.sql_link_from`` names on; the links before it are version 2's, kept; 4 =
conversations and the writer's fence, as SQLite's 3."""
SQL_LINK_SINCE: Final = 3
POSTGRES_CONTENT_SINCE: Final = 4
MESSAGE_BUCKETS: Final = 16
"""PostgreSQL keeps the ``messages`` table in this many partitions, by a hash of the session's stream: erasing a
conversation rewrites the one partition that held it (``VACUUM FULL``: a plain VACUUM leaves dead rows' bytes in
the pages' free space), not the whole table. SQLite needs none: ``secure_delete`` zeroes what it frees."""
FENCE_MESSAGE: Final = (
    "this store was upgraded by a newer acp-session-registry; this process runs an older version and may no longer"
    " write to it: restart it with the version that upgraded the store"
)
"""What an older writer is told when it tries to append to an upgraded store (the fence's refusal)."""

Kind = Literal["text", "blob", "int", "int32", "uuid"]
# Column kinds in each dialect: SQLite's INTEGER is 64-bit already; PostgreSQL has a native uuid.
_TYPES: Final[dict[Kind, tuple[str, str]]] = {
    "text": ("TEXT", "text"),
    "blob": ("BLOB", "bytea"),
    "int": ("INTEGER", "bigint"),
    "int32": ("INTEGER", "integer"),
    "uuid": ("BLOB", "uuid"),
}


class Table(msgspec.Struct, frozen=True):
    name: str
    columns: tuple[tuple[str, Kind, bool], ...]  # (name, kind, NOT NULL)
    primary_key: tuple[str, ...]
    unique: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (constraint name, columns)
    clustered: bool = False  # SQLite: WITHOUT ROWID (the primary key is the table)
    indexes: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (index name, columns)


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
            ("writer", "int32", False),  # the format its writer knew (NULL: written before version 3)
        ),
        ("position",),
        (("events_event_id", ("event_id",)), ("events_stream_version", ("stream", "version"))),
    ),
    # The messages an event's ContentRef refers to, keyed by the event's position and their place in it. The text
    # is here, not in the chained records: a user's delete erases these rows and leaves the chain whole.
    Table(
        "messages",
        (
            ("position", "int", True),
            ("seq", "int32", True),
            ("stream", "int", True),
            ("role", "text", True),
            ("at", "int", False),
            ("body", "blob", True),
        ),
        ("position", "seq"),
        clustered=True,
        indexes=(("messages_stream", ("stream", "position")),),
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


def _indexes(table: Table, prefix: str, on: str) -> list[str]:
    return [
        f"CREATE INDEX IF NOT EXISTS {prefix}{name} ON {on}{table.name} ({', '.join(cols)})"
        for name, cols in table.indexes
    ]


def sqlite_ddl(tables: tuple[Table, ...] = TABLES) -> list[str]:
    return [statement for t in tables for statement in [_ddl(t, 0, ""), *_indexes(t, "", "")]]


def postgres_ddl(quoted_schema: str, tables: tuple[Table, ...] = TABLES) -> list[str]:
    """The statements for one schema (``quoted_schema`` is already a quoted identifier). ``messages`` is
    partitioned by a hash of its stream (``MESSAGE_BUCKETS``)."""
    prefix = f"{quoted_schema}."
    statements = []
    for t in tables:
        if t.name != "messages":
            statements += [_ddl(t, 1, prefix), *_indexes(t, "", prefix)]
            continue
        # A partitioned table's keys must hold its partition key: (stream, position, seq), and (position, seq)
        # indexed apart, not unique (the position alone is, through the events it belongs to).
        keyed = msgspec.structs.replace(
            t, primary_key=("stream", *t.primary_key), indexes=(("messages_position", t.primary_key),)
        )
        statements.append(f"{_ddl(keyed, 1, prefix)} PARTITION BY HASH (stream)")
        statements += [
            f"CREATE TABLE IF NOT EXISTS {prefix}messages_{n} PARTITION OF {prefix}messages"
            f" FOR VALUES WITH (MODULUS {MESSAGE_BUCKETS}, REMAINDER {n})"
            for n in range(MESSAGE_BUCKETS)
        ]
        statements += _indexes(keyed, "", prefix)
    return statements


def table(name: str) -> Table:
    """The declared table called ``name``."""
    return next(t for t in TABLES if t.name == name)


def sqlite_fence(version: int) -> list[str]:
    """The trigger that refuses a record written by a process that knows an older format than ``version``."""
    message = FENCE_MESSAGE.replace("'", "''")
    return [
        "DROP TRIGGER IF EXISTS events_writer_fence",
        f"CREATE TRIGGER events_writer_fence BEFORE INSERT ON events"
        f" WHEN NEW.writer IS NULL OR NEW.writer < {version}"
        f" BEGIN SELECT RAISE(ABORT, '{message}'); END",
    ]


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
