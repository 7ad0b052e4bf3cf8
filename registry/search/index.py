"""The full-text index of the messages kept beside the log: derived from them, caught up before every search, checked
by ``verify``, rebuilt by ``rebuild``, and erased with them.

``SearchIndex`` is what the search asks of an index; ``SqliteSearchIndex`` keeps one in SQLite FTS5 tables - in the
store's own file for a SQLite store, in memory for ``memory://`` (and for a store the registry knows nothing of),
``registry.search.postgres`` one in PostgreSQL for a PostgreSQL store.

The FTS5 tables are *contentless* (the text is in the ``messages`` table already, compressed; the index keeps only
its words) and, once it is large (``SHARD_FROM`` messages), split into ``SHARDS`` tables by session: erasing a
conversation takes its words out of its table and merges that table's segments (FTS5's ``optimize``), so that no
segment keeps them - the cost of an erasure is one shard's size, not the whole index's. A small index is one table
(its scores then come from one set of statistics; a shard's scores from its own, which at that size agree). A
message's row id is its event's position and its place there (``position << 20 | seq``)."""

from __future__ import annotations

import abc
import sqlite3
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

from events.content import KeptMessage, decode_body
from events.logger import Logger
from events.sqlite_content import at_keys
from events.store import EventStore
from registry.search.query import Query, indexed

__all__ = ["SEARCH_VERSION", "SHARDS", "SHARD_FROM", "Match", "SearchIndex", "SqliteSearchIndex", "row_id", "shard_of"]

log = Logger("registry.search")

SEARCH_VERSION: Final = 1
"""The index's format: what it holds of a message (``registry.search.query.indexed``) and how it is laid out. An
index of another version is rebuilt."""
SHARDS: Final = 16
"""FTS5 tables a large index is split into, by session (see the module's docstring)."""
SHARD_FROM: Final = 50_000
"""Messages from which the index is split into ``SHARDS`` tables (the catch-up that passes it rebuilds it so)."""
_SEQ_BITS: Final = 20
_BATCH: Final = 5_000
_REBUILD_MESSAGES: Final = 50_000
_REBUILD_CHARS: Final = 64 << 20
"""A rebuild indexes up to this many messages, or of text, a transaction (batches of ``_BATCH`` read in turn, none
kept after its insert): each of a large index's tables then gets rows in larger runs, so FTS5 writes fewer, larger
segments and merges them less, and fewer commits wait for the disk. A catch-up commits every batch (a writer of
the store waits for no more than one)."""
_TOKENIZER: Final = "unicode61 remove_diacritics 2"


class Match(NamedTuple):
    """A message that matched: its event's position, its place there, and its score (lower is better)."""

    score: float
    position: int
    seq: int


def row_id(position: int, seq: int) -> int:
    return position << _SEQ_BITS | seq


def shard_of(session_id: str, shards: int) -> int:
    """The table a session's messages are indexed in, of ``shards``."""
    return zlib.crc32(session_id.encode()) % shards


class SearchIndex(abc.ABC):
    """What a search asks of a full-text index of the messages kept beside one store's log."""

    @abc.abstractmethod
    def catch_up(self) -> int:
        """Index every message kept up to the log's head; returns how many were added."""

    @abc.abstractmethod
    def matches(self, query: Query, limit: int) -> tuple[list[Match], bool]:
        """The best ``limit`` messages for ``query``, best first, and whether that was all of them."""

    @abc.abstractmethod
    def owners(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], tuple[str, int | None]]:
        """The session and time of each kept message under ``(position, seq)`` keys (one not kept is left out)."""

    @abc.abstractmethod
    def rebuild(self) -> int:
        """Throw the index away and index every kept message again; returns how many."""

    @abc.abstractmethod
    def problems(self) -> list[str]:
        """What is wrong with the index (``verify``): [] when it is sound and holds every kept message."""

    def close(self) -> None:
        """Release what the index holds."""


class SqliteSearchIndex(SearchIndex):
    """FTS5 tables in a SQLite database: the store's own file (``connect`` opens it; messages are read there) or a
    private in-memory database (messages read through the store)."""

    def __init__(self, store: EventStore, connect: Callable[[], sqlite3.Connection] | None = None) -> None:
        self._store = store
        self._shared = connect is not None
        self._connect = connect or (lambda: sqlite3.connect(":memory:", check_same_thread=False))
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._read_only = store.read_only
        self._ready = False
        self._shards = 1

    @property
    def _db(self) -> sqlite3.Connection:
        """The index's own connection, opened on first use (an erasure's hook uses the erasure's)."""
        if self._conn is None:
            self._conn = self._connect()
            self._conn.isolation_level = None
        return self._conn

    # -- layout ---------------------------------------------------------------------------------------

    def _tables(self) -> list[str]:
        return [
            name
            for (name,) in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND (name = 'search_meta' OR name GLOB"
                " 'search_[0-9]*') AND name NOT GLOB 'search_[0-9]*_*'"
            )
        ]

    def _version(self) -> int | None:
        try:
            row = self._db.execute("SELECT value FROM search_meta WHERE key = 'version'").fetchone()
        except sqlite3.OperationalError:
            return None
        return None if row is None else int(row[0])

    def _meta(self, key: str, db: sqlite3.Connection | None = None) -> int:
        return int((db or self._db).execute("SELECT value FROM search_meta WHERE key = ?", (key,)).fetchone()[0])

    def _ensure(self) -> None:
        """Tables of this version in place (made, or made again), or nothing done on a store that cannot be
        written (its index, if any, is searched as it is)."""
        if self._ready:
            return
        version = self._version()
        if version == SEARCH_VERSION:
            shards = self._meta("shards")
            if len(self._tables()) == shards + 1:
                self._shards = shards
                self._ready = True
                return
        if self._read_only:
            if version is not None:
                log.warning("%s: the search index is of another version and cannot be rebuilt here", self._store)
            return
        if version is not None:
            log.warning("%s: the search index is of version %s; rebuilding it", self._store, version)
        self._rebuild()

    def _rebuild(self, shards: int | None = None) -> int:
        """Make the tables anew (``shards`` of them: default, as many as the kept messages call for) and index every
        kept message."""
        db = self._db
        if shards is None:
            shards = SHARDS if self._kept_up_to(self._store.head()) >= SHARD_FROM else 1
        db.execute("BEGIN IMMEDIATE")
        try:
            for name in self._tables():
                db.execute(f"DROP TABLE {name}")
            db.execute("CREATE TABLE search_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID")
            db.executemany(
                "INSERT INTO search_meta (key, value) VALUES (?, ?)",
                [("version", SEARCH_VERSION), ("checkpoint", 0), ("shards", shards), ("count", 0)],
            )
            for k in range(shards):
                db.execute(f"CREATE VIRTUAL TABLE search_{k} USING fts5(body, content='', tokenize='{_TOKENIZER}')")
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
        self._shards = shards
        self._ready = True
        return self._index_after(_REBUILD_MESSAGES, _REBUILD_CHARS)

    # -- indexing -------------------------------------------------------------------------------------

    def catch_up(self) -> int:
        with self._lock:
            self._ensure()
            if not self._ready or self._read_only or not self._behind():
                return 0
            added = self._index_after()
            if self._shards < SHARDS and self._meta("count") >= SHARD_FROM:
                log.info("%s: the search index holds %d messages; splitting it in %d", self._store, added, SHARDS)
                self._ready = False
                self._rebuild(SHARDS)
            return added

    def _behind(self) -> bool:
        """Whether messages were kept after the checkpoint: a look without the write lock (a search that finds the
        index current never waits for a writer)."""
        after = self._checkpoint()
        if self._shared:
            return (
                self._db.execute("SELECT 1 FROM messages WHERE position > ? LIMIT 1", (after,)).fetchone() is not None
            )
        return bool(self._store.stored_messages(after, 1))

    def _checkpoint(self) -> int:
        return self._meta("checkpoint")

    def _pending(self, after: int) -> list[tuple[int, str, int, str]]:
        """Up to about ``_BATCH`` kept messages after position ``after``: (position, session id, seq, text)."""
        if self._shared:
            rows = self._db.execute(
                "SELECT m.position, s.session_id, m.seq, m.body FROM messages m JOIN streams s ON s.stream = m.stream"
                " WHERE m.position > ? AND m.position <= (SELECT max(position) FROM (SELECT position FROM messages"
                " WHERE position > ? ORDER BY position LIMIT ?)) ORDER BY m.position, m.seq",
                (after, after, _BATCH),
            ).fetchall()
            return [(p, sid, q, decode_body(b)) for p, sid, q, b in rows]
        return [(p, sid, m.seq, decode_body(m.body)) for p, sid, m in self._store.stored_messages(after, _BATCH)]

    def _index_after(self, messages: int = 0, chars: int = 0) -> int:
        """Index the messages kept after the checkpoint, a batch a transaction - or, given ``messages`` and
        ``chars``, batches until a transaction holds that many messages or characters of text; returns how many."""
        added = 0
        shards = self._shards
        while True:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                after = self._checkpoint()
                held = size = 0
                while True:
                    rows = self._pending(after)
                    if not rows:
                        break
                    by_shard: list[list[tuple[int, str]]] = [[] for _ in range(shards)]
                    for position, session_id, seq, text in rows:
                        by_shard[shard_of(session_id, shards)].append((row_id(position, seq), indexed(text)))
                        size += len(text)
                    for k, values in enumerate(by_shard):
                        if values:
                            db.executemany(f"INSERT INTO search_{k} (rowid, body) VALUES (?, ?)", values)
                    after = rows[-1][0]
                    held += len(rows)
                    if held >= messages or size >= chars:
                        break
                if held:
                    db.execute("UPDATE search_meta SET value = ? WHERE key = 'checkpoint'", (after,))
                    db.execute("UPDATE search_meta SET value = value + ? WHERE key = 'count'", (held,))
                db.execute("COMMIT")
                added += held
                if not rows:
                    return added
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")

    def erasing(self, db: sqlite3.Connection | None, session_id: str, messages: list[KeptMessage]) -> None:
        """Take a session's messages out of its shard and merge the shard (an erasure's hook: on the store's file,
        in the erasure's own transaction, ``db``)."""
        with self._lock:
            conn = db if db is not None and self._shared else self._db
            if self._version_on(conn) != SEARCH_VERSION:
                return  # no index here yet (nothing of it to take out), or one the next catch-up rebuilds
            k = shard_of(session_id, self._meta("shards", conn))
            wanted = {row_id(m.position, m.seq): m for m in messages}
            present: set[int] = set()
            keys = list(wanted)
            for start in range(0, len(keys), 500):  # only what is indexed: taking out a row twice damages FTS5
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                present.update(
                    r for (r,) in conn.execute(f"SELECT rowid FROM search_{k} WHERE rowid IN ({marks})", chunk)
                )
            conn.executemany(
                f"INSERT INTO search_{k} (search_{k}, rowid, body) VALUES ('delete', ?, ?)",
                [(rowid, indexed(wanted[rowid].message.text)) for rowid in sorted(present)],
            )
            if present:
                conn.execute(f"INSERT INTO search_{k} (search_{k}) VALUES ('optimize')")
                conn.execute("UPDATE search_meta SET value = value - ? WHERE key = 'count'", (len(present),))

    def vacuum(self, conn: object, stream: int) -> None:
        """Nothing to vacuum: ``secure_delete`` zeroed what the erasure freed, and an in-memory index has no disk."""

    @staticmethod
    def _version_on(conn: sqlite3.Connection) -> int | None:
        try:
            row = conn.execute("SELECT value FROM search_meta WHERE key = 'version'").fetchone()
        except sqlite3.OperationalError:
            return None
        return None if row is None else int(row[0])

    # -- searching ------------------------------------------------------------------------------------

    def matches(self, query: Query, limit: int) -> tuple[list[Match], bool]:
        with self._lock:
            self._ensure()
            if not self._ready:
                return [], True
            expression = query.fts5()
            found: list[Match] = []
            whole = True
            for k in range(self._shards):
                rows = self._db.execute(
                    f"SELECT rowid, bm25(search_{k}) FROM search_{k} WHERE search_{k} MATCH ? ORDER BY rank LIMIT ?",
                    (expression, limit),
                ).fetchall()
                whole = whole and len(rows) < limit
                found += [Match(score, rowid >> _SEQ_BITS, rowid & ((1 << _SEQ_BITS) - 1)) for rowid, score in rows]
        found.sort()
        return found[:limit], whole and len(found) <= limit

    def owners(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], tuple[str, int | None]]:
        """The session and time of each kept message under ``(position, seq)`` keys (one not kept is left out)."""
        if not self._shared:
            return {key: (m.session_id, m.message.at) for key, m in self._store.messages_at(keys).items()}
        found: dict[tuple[int, int], tuple[str, int | None]] = {}
        with self._lock:
            for start in range(0, len(keys), 400):
                chunk = keys[start : start + 400]
                rows = self._db.execute(
                    at_keys("m.position, m.seq, s.session_id, m.at", len(chunk)), [v for key in chunk for v in key]
                ).fetchall()
                found.update(((p, q), (sid, at)) for p, q, sid, at in rows)
        return found

    # -- upkeep ---------------------------------------------------------------------------------------

    def rebuild(self) -> int:
        with self._lock:
            if self._read_only:
                raise PermissionError(f"{self._store!r} is open read-only: its search index cannot be rebuilt")
            self._ready = False
            return self._rebuild()

    def problems(self) -> list[str]:
        with self._lock:
            version = self._version()
            if version is None:
                return []  # no index (yet): nothing derived to check; the first search builds it
            shards = self._meta("shards") if version == SEARCH_VERSION else 0
            if version != SEARCH_VERSION or len(self._tables()) != shards + 1:
                return [f"search index: version {version} or its tables are not this version's (rebuild makes them)"]
            found = []
            checkpoint = self._checkpoint()
            head = self._store.head()
            if checkpoint > head:
                found.append(f"search index: its checkpoint {checkpoint} is past the log's head {head}")
            indexed_count = 0
            for k in range(shards):
                try:
                    self._db.execute(f"INSERT INTO search_{k} (search_{k}) VALUES ('integrity-check')")
                except sqlite3.DatabaseError as exc:
                    found.append(f"search index: shard {k} is damaged ({exc})")
                indexed_count += int(self._db.execute(f"SELECT count(*) FROM search_{k}").fetchone()[0])
            kept = self._kept_up_to(checkpoint)
            counted = self._meta("count")
            if counted != indexed_count:
                found.append(f"search index: its count says {counted} messages where it holds {indexed_count}")
            if indexed_count != kept:
                found.append(
                    f"search index: it holds {indexed_count} messages where {kept} are kept up to its checkpoint"
                    f" {checkpoint} (an erased or planted row, or a damaged index)"
                )
            return found

    def _kept_up_to(self, position: int) -> int:
        if self._shared:
            return int(self._db.execute("SELECT count(*) FROM messages WHERE position <= ?", (position,)).fetchone()[0])
        total, after = 0, 0
        while rows := self._store.stored_messages(after, _BATCH):
            total += sum(1 for p, _, _ in rows if p <= position)
            after = rows[-1][0]
        return total

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
