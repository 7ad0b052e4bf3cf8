"""The SQLite store's format, read through SQLite once its file is open: a file is recognised as a store by its
application id and schema version (anything else - not SQLite, another application's database, a newer schema, an
empty file nobody asked to make a store of - is refused and left untouched), an empty one made a store, and an
older one upgraded in place, in one transaction (``sqlite_file`` checks the file before SQLite opens it;
``sqlite.py`` opens it)."""

from __future__ import annotations

import os
import sqlite3
from typing import Final

from events.chain import GENESIS, links
from events.errors import StoreFormatError
from events.logger import Logger
from events.schema import (
    CHAIN_SINCE,
    CONTENT_SINCE,
    RECORD_COLUMNS,
    SCHEMA_VERSION,
    new_meta,
    sqlite_ddl,
    sqlite_fence,
    table,
)

__all__ = ["APPLICATION_ID", "check_format", "create_or_upgrade"]

log = Logger("events.sqlite")

APPLICATION_ID: Final = 0x41435052  # "ACPR" in the file header: marks the file as a registry store
_FORMAT: Final = (
    "SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version),"
    " (SELECT count(*) FROM sqlite_master)"
)


def check_format(db: sqlite3.Connection, path: str, initialise: bool, read_only: str | None) -> int:
    """The file's schema version (0: an empty database, to initialise); raises for anything not ours. The three
    values are read by one statement, so in one snapshot: another process creating the store meanwhile is seen
    whole or not at all (read one by one, a first start beside another could see no application id and its
    tables, and refuse the file as another application's)."""
    try:
        app_id, version, objects = db.execute(_FORMAT).fetchone()
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_CORRUPT:  # SQLite checks the size against the header
            raise StoreFormatError(
                path,
                f"is damaged or truncated ({exc}; the file has {os.path.getsize(path):,} bytes); left untouched",
            ) from exc
        raise StoreFormatError(path, f"not an SQLite database ({exc}); left untouched") from exc
    if app_id == 0 and objects == 0:
        if not initialise:
            raise StoreFormatError(
                path,
                "is empty, not a registry store; left untouched (only an opener that asks to create a store, "
                "create=True, makes one of an empty file)",
            )
        if read_only is not None:
            raise StoreFormatError(path, f"is empty and cannot become a store: {read_only}")
        return 0
    if app_id != APPLICATION_ID:
        raise StoreFormatError(
            path,
            f"not an acp-session-registry store (application_id {app_id:#x}, {objects} schema objects); left untouched",
        )
    if version > SCHEMA_VERSION:
        raise StoreFormatError(
            path,
            f"written by a newer schema (version {version}); this version of acp-session-registry "
            f"reads up to version {SCHEMA_VERSION}. Upgrade it; the file was left untouched",
        )
    return int(version)


def create_or_upgrade(db: sqlite3.Connection, path: str) -> None:
    """Create the tables in an empty file, or upgrade an older schema in place, in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            for statement in sqlite_ddl():
                db.execute(statement)
            db.executemany("INSERT INTO registry_meta (key, value) VALUES (?, ?)", new_meta())
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        else:
            if version < CHAIN_SINCE:
                _add_chain(db, path)
            if version < CONTENT_SINCE:
                log.warning("%s: upgrading the log to schema version %d (conversations kept beside it)", path, 3)
                db.execute("ALTER TABLE events ADD COLUMN writer INTEGER")
                for statement in sqlite_ddl((table("messages"),)):
                    db.execute(statement)
        if version < SCHEMA_VERSION:
            for statement in sqlite_fence(SCHEMA_VERSION):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _add_chain(db: sqlite3.Connection, path: str) -> None:
    """Version 1 to 2: every record gets its link, computed in position order (inside the caller's
    transaction: an interrupted upgrade leaves a version-1 store)."""
    log.warning("%s: upgrading the log to schema version %d (computing its integrity chain)", path, 2)
    db.execute("ALTER TABLE events ADD COLUMN chain BLOB")
    previous, after = GENESIS, 0
    while True:
        rows = db.execute(
            f"SELECT {RECORD_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT 10000", (after,)
        ).fetchall()
        if not rows:
            return
        chain = links(previous, rows)
        db.executemany("UPDATE events SET chain = ? WHERE position = ?", zip(chain, (r[0] for r in rows), strict=True))
        previous, after = chain[-1], rows[-1][0]
