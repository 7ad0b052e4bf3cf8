"""The shared machinery of SQLite-based sources (goose, opencode): read-only, WAL-aware, schema-probing.

A database is opened read-only through a URI (``file:...?mode=ro``) and never with ``immutable=1``: these files
are in WAL mode and the newest rows live in ``-wal`` while the main file's mtime stands still. The signature of
the database *and* its ``-wal`` file decides whether to query at all. Each row is reduced to a digest of what the
registry derives from it; only rows whose digest moved become snapshots (or skips), and every id seen is present
(hard deletes leave no trace, so the full id set is compared). The columns a source needs are probed first
(``pragma_table_info``): a schema that lacks them - a newer agent, another program's file - is skipped with the
reason, as is a locked or unreadable file, and nothing is taken for deleted then.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, NamedTuple

import msgspec

from registry.importers.base import ScanContext, ScanResult, SessionSnapshot

__all__ = ["DatabaseSource", "Row", "SchemaError", "columns", "open_read_only"]


class SchemaError(Exception):
    """The database is not laid out as the source expects (the message says what is missing)."""


class Row(NamedTuple):
    """One session row: its snapshot, or why it is not listed."""

    native_id: str
    snapshot: SessionSnapshot | None
    skip: str | None = None


class _Database(msgspec.Struct, kw_only=True):
    signature: list[int]
    rows: dict[str, str] = msgspec.field(default_factory=dict)
    """Native id -> digest of what was derived from the row."""


class _State(msgspec.Struct, kw_only=True):
    databases: dict[str, _Database] = msgspec.field(default_factory=dict)


_decoder = msgspec.msgpack.Decoder(_State)


def open_read_only(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection that still sees the WAL; waits ``timeout`` seconds for a lock."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
    db.execute("PRAGMA query_only = ON")
    return db


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM pragma_table_info(?)", (table,))}


def _signature(path: Path) -> list[int]:
    values: list[int] = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{path}{suffix}")
        except FileNotFoundError:
            values += [0, 0, 0]
            continue
        values += [st.st_ino, st.st_size, st.st_mtime_ns]
    return values


class DatabaseSource(abc.ABC):
    """A source whose sessions are rows of SQLite databases under its root."""

    agent: ClassVar[str]

    @abc.abstractmethod
    def default_root(self, environ: Mapping[str, str]) -> Path: ...

    @abc.abstractmethod
    def databases(self, root: Path) -> list[Path]:
        """The database files under the root (existing ones)."""

    @abc.abstractmethod
    def rows(self, db: sqlite3.Connection, path: Path) -> list[Row]:
        """Every session row; ``SchemaError`` when the schema is not understood."""

    def unavailable(self, root: Path) -> str:
        """Why there is no database to read (no deletes follow)."""
        return "no database found"

    def scan(self, root: Path, state: bytes | None, ctx: ScanContext) -> ScanResult:
        previous = _State()
        if state:
            with contextlib.suppress(msgspec.DecodeError):  # an older layout: query everything again
                previous = _decoder.decode(state)
        paths = self.databases(root)
        if not paths:
            ctx.skip(str(root), self.unavailable(root))
            return ScanResult(msgspec.msgpack.encode(previous), [], None)
        fresh = _State()
        snapshots: list[SessionSnapshot] = []
        present: set[str] = set()
        complete = True
        for path in paths:
            rel = os.path.relpath(path, root)
            old = previous.databases.get(rel)
            signature = _signature(path)
            if old is not None and old.signature == signature and not ctx.want.intersection(old.rows):
                fresh.databases[rel] = old
                present.update(old.rows)
                continue
            ctx.reading(1)
            try:
                db = open_read_only(path, ctx.sqlite_timeout)
                try:
                    rows = self.rows(db, path)
                finally:
                    db.close()
            except (sqlite3.Error, SchemaError) as exc:
                reason = str(exc) or type(exc).__name__
                ctx.skip(str(path), f"skipped: {reason}")
                complete = False
                if old is not None:
                    fresh.databases[rel] = old
                continue
            finally:
                ctx.advance()
            ctx.files_read += 1
            ctx.bytes_read += signature[1] + signature[4]
            digests: dict[str, str] = {}
            for row in rows:
                digest = hashlib.sha256(msgspec.msgpack.encode([row.snapshot, row.skip])).hexdigest()[:24]
                digests[row.native_id] = digest
                if old is not None and old.rows.get(row.native_id) == digest and row.native_id not in ctx.want:
                    continue
                if row.snapshot is not None:
                    snapshots.append(msgspec.structs.replace(row.snapshot, locator=f"{rel}:{digest}"))
                elif row.skip is not None:
                    ctx.skip(f"{path}#{row.native_id}", row.skip)
            fresh.databases[rel] = _Database(signature=signature, rows=digests)
            present.update(digests)
        return ScanResult(msgspec.msgpack.encode(fresh), snapshots, frozenset(present) if complete else None)

    def present(self, root: Path, state: bytes) -> frozenset[str] | None:
        # The rows were just read in this pass; a row gone from a table is gone (no move between tables).
        return frozenset()
