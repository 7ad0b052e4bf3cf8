"""The shared machinery of SQLite-based sources (goose, opencode): read-only, WAL-aware, schema-probing.

**Nothing is written beside another program's database.** Opening a WAL database even with ``mode=ro`` makes
SQLite create empty ``-wal`` and ``-shm`` files next to it when they are missing - in the agent's folder, and
changing the signature the next pass compares, which then reads the database again. So ``open_read_only``
picks the way that creates nothing:

- a database in rollback-journal mode (the header says so): ``mode=ro``, which creates nothing there and
  waits for a writer's lock;
- a WAL database without a ``-wal`` file (the agent is not running, or checkpointed on close):
  ``immutable=1`` - SQLite takes no locks and looks for no WAL. A writer that starts in the middle of the read
  can at worst make it fail or see a moment's state (it is read again when the -wal appears, since the
  signature then changes), never change the agent's files;
- ``-wal`` and ``-shm`` present (the agent is running): ``mode=ro`` through the WAL index, so the newest rows,
  which live in ``-wal`` while the main file's mtime stands still, are seen;
- ``-wal`` without ``-shm`` (left by a crash): a private copy of the database and its WAL, taken in a temporary
  folder of our own and read there.

The signature of the database *and* its ``-wal`` file decides whether to query at all. Each row becomes a
parser's ``Draft``; its digest decides whether the row changed, and only changed rows become facts (or skips);
every id seen is present (hard deletes leave no trace, so the full id set is compared). The columns a parser
needs are probed first (``pragma_table_info``): a schema that lacks them - a newer agent, another program's
file - is skipped with the reason, as is a locked or unreadable file, and nothing is taken for deleted then.

A changed session's conversation is read on the same connection (``conversation``): what it said after the
parser's mark for it (the last message read, its token totals...), kept per session; a session whose last write
failed is read again from its start (``fresh``).
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import msgspec

from events.errors import RegistryError
from registry.importers.base import Draft, ScanContext, ScanResult, SessionFacts
from registry.importers.lines import open_regular
from registry.importers.said import Said

__all__ = ["DatabaseSource", "Row", "SchemaError", "columns", "open_read_only"]


class SchemaError(RegistryError, ValueError):
    """The database is not laid out as the parser expects (the message says what is missing). A
    ``RegistryError`` like every error the library raises; a ``ValueError``: the input is not what it should be."""


class Row(NamedTuple):
    """One session row, as the parser reads it."""

    native_id: str
    draft: Draft
    tokens: Any = None
    """What else the row says that moves (its token totals): a change of it is a change of the row."""


class _Database(msgspec.Struct, kw_only=True):
    signature: list[int]
    rows: dict[str, str] = msgspec.field(default_factory=dict)
    """Native id -> digest of what was read from the row."""
    marks: dict[str, Any] = msgspec.field(default_factory=dict)
    """Native id -> how far its conversation was read (the parser's mark)."""


class _State(msgspec.Struct, kw_only=True):
    databases: dict[str, _Database] = msgspec.field(default_factory=dict)


_decoder = msgspec.msgpack.Decoder(_State)


@contextlib.contextmanager
def open_read_only(path: Path, timeout: float) -> Iterator[sqlite3.Connection]:
    """A connection that reads ``path`` without creating or changing anything beside it (see the module)."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    with contextlib.ExitStack() as stack:
        if not _wal_mode(path):
            uri = f"{path.resolve().as_uri()}?mode=ro"  # a rollback journal: readers create nothing, and lock
        elif not wal.exists():
            uri = f"{path.resolve().as_uri()}?immutable=1"
        elif shm.exists():
            uri = f"{path.resolve().as_uri()}?mode=ro"
        else:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="acp-registry-import-")))
            copy = folder / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, f"{copy}-wal")
            uri = f"{copy.as_uri()}?mode=ro"
        db = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
        stack.callback(db.close)
        db.execute("PRAGMA query_only = ON")
        yield db


def _wal_mode(path: Path) -> bool:
    """Whether the database file says it is in WAL mode (header bytes 18-19, the read and write versions: 2)."""
    with open_regular(str(path)) as f:
        header = f.read(20)
    return len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


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
    def rows(self, db: sqlite3.Connection) -> list[Row]:
        """Every session row; ``SchemaError`` when the schema is not understood."""

    def unavailable(self, root: Path) -> str:
        """Why there is no database to read (no deletes follow)."""
        return "no database found"

    def conversation(self, db: sqlite3.Connection, row: Row, mark: Any) -> tuple[Said, Any] | None:
        """What the session of ``row`` said after ``mark`` (None: from its start), and the mark after it; None
        when the parser reads no conversation."""
        return None

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
        sessions: list[SessionFacts] = []
        said: dict[str, Said] = {}
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
            marks = dict(old.marks) if old is not None else {}
            found: list[SessionFacts] = []  # kept only when the whole database was read
            heard_here: dict[str, Said] = {}
            chars = 0
            try:
                with open_read_only(path, ctx.sqlite_timeout) as db:
                    rows = self.rows(db)
                    digests: dict[str, str] = {}
                    for row in rows:
                        digest = hashlib.sha256(msgspec.msgpack.encode((row.draft, row.tokens))).hexdigest()[:24]
                        before = old.rows.get(row.native_id) if old is not None else None
                        if before == digest and row.native_id not in ctx.want:
                            digests[row.native_id] = digest
                            continue
                        if chars > ctx.said_budget:
                            ctx.more = True  # the rest next round: the row as last read, the database read again
                            if before is not None:
                                digests[row.native_id] = before
                            continue
                        digests[row.native_id] = digest
                        locator = f"{rel}:{digest}"
                        facts = ctx.settle(row.native_id, row.draft, path=f"{path}#{row.native_id}", locator=locator)
                        if facts is not None:
                            found.append(facts)
                            held = ctx.conversations is None or row.native_id in ctx.conversations
                            mark = marks.get(row.native_id) if held and row.native_id not in ctx.want else None
                            heard = self.conversation(db, row, mark)
                            if heard is not None:
                                heard_here[row.native_id], marks[row.native_id] = heard
                                chars += sum(len(m.text) for m in heard[0].messages)
            except (sqlite3.Error, SchemaError, OSError) as exc:
                ctx.skip(str(path), f"skipped: {exc or type(exc).__name__}")
                complete = False
                if old is not None:
                    fresh.databases[rel] = old
                continue
            finally:
                ctx.advance()
            ctx.files_read += 1
            ctx.bytes_read += signature[1] + signature[4]
            sessions.extend(found)
            said.update(heard_here)
            marks = {k: v for k, v in marks.items() if k in digests}
            kept = signature if not ctx.more else (old.signature if old is not None else [])
            fresh.databases[rel] = _Database(signature=kept, rows=digests, marks=marks)
            present.update(digests)
        complete = complete and not ctx.more
        return ScanResult(msgspec.msgpack.encode(fresh), sessions, frozenset(present) if complete else None, said)

    def present(self, root: Path, state: bytes) -> frozenset[str] | None:
        # The rows were just read in this pass; a row gone from a table is gone (no move between tables).
        return frozenset()
