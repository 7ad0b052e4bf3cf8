"""The search index of a PostgreSQL store: a ``tsvector`` of each kept message in the store's schema, with GIN
indexes, derived from the ``messages`` table as the read model is from the log.

What it holds of a message is the index's words as the SQLite index makes them (``registry.search.query.tokens``
of ``indexed``: letters and digits, case and accents folded, a CamelCase word's parts added), joined by spaces and
read by the ``simple`` configuration - so a query means the same on both backends, and PostgreSQL's own parser
(which would take ``foo.bar`` for a host name) never decides what a word is. Like the ``messages`` table it is
partitioned by session (``events.schema.MESSAGE_BUCKETS``): an erasure deletes the session's rows and rewrites the
one partition that held them (``VACUUM FULL``), GIN entries included. Every process catches it up before it
searches, one at a time (an advisory lock), so a message recorded on any host is found at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from events.content import KeptMessage, decode_body
from events.logger import Logger
from events.postgres_content import rewrite
from events.schema import MESSAGE_BUCKETS
from registry.search.index import Match, SearchIndex
from registry.search.query import Query, indexed, tokens

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

    from events.postgres import PostgresStore

    Connection = psycopg.Connection[TupleRow]

__all__ = ["PostgresSearchIndex"]

log = Logger("registry.search")

_VERSION: Final = 1
_REWRITE_TIMEOUT: Final = 30.0  # seconds an erasure waits for transactions that still see the erased rows
_BATCH: Final = 5_000


def terms(text: str) -> str:
    """What the index reads of a message: its words as the SQLite index holds them, one space apart."""
    return " ".join(tokens(indexed(text)))


class PostgresSearchIndex(SearchIndex):
    """``search_terms`` (and ``search_meta``) in the store's schema."""

    def __init__(self, store: PostgresStore) -> None:
        from psycopg import sql  # noqa: PLC0415 - psycopg only with such a store

        self._store = store
        self._lock = threading.Lock()
        self._ready = False
        s = sql.Identifier(store.schema)
        self._s = s
        self._sql = sql
        self._key = store.append_lock_key ^ 0x5EA2C4  # this index's own advisory lock, beside the store's
        self._dirty: dict[int, set[str]] = {}  # partitions an erasure left dead rows in, by stream

    def _q(self, template: str) -> Any:
        return self._sql.SQL(template).format(s=self._s)

    # -- layout ---------------------------------------------------------------------------------------

    def _version(self, conn: Connection) -> int | None:
        found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{self._store.schema}".search_meta',)).fetchone()
        if not found or not found[0]:
            return None
        row = conn.execute(self._q("SELECT value FROM {s}.search_meta WHERE key = 'version'")).fetchone()
        return None if row is None else int(row[0])

    def _create(self, conn: Connection) -> None:
        for statement in (
            "DROP TABLE IF EXISTS {s}.search_terms",
            "DROP TABLE IF EXISTS {s}.search_meta",
            "CREATE TABLE {s}.search_meta (key text PRIMARY KEY, value bigint NOT NULL)",
            "CREATE TABLE {s}.search_terms (stream bigint NOT NULL, position bigint NOT NULL, seq integer NOT NULL,"
            " at bigint, terms tsvector NOT NULL, PRIMARY KEY (stream, position, seq)) PARTITION BY HASH (stream)",
            *(
                f"CREATE TABLE {{s}}.search_terms_{n} PARTITION OF {{s}}.search_terms"
                f" FOR VALUES WITH (MODULUS {MESSAGE_BUCKETS}, REMAINDER {n})"
                for n in range(MESSAGE_BUCKETS)
            ),
            "CREATE INDEX search_terms_words ON {s}.search_terms USING gin (terms)",
            "CREATE INDEX search_terms_position ON {s}.search_terms (position, seq)",
        ):
            conn.execute(self._q(statement))
        conn.execute(
            self._q("INSERT INTO {s}.search_meta (key, value) VALUES ('version', %s), ('checkpoint', 0)"), (_VERSION,)
        )

    def _ensure(self, conn: Connection) -> bool:
        if self._ready:
            return True
        version = self._version(conn)
        if version == _VERSION:
            self._ready = True
            return True
        if self._store.read_only:
            return False
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
            if self._version(conn) != _VERSION:  # another process may have made it while this one waited
                if version is not None:
                    log.warning("%s: the search index is of version %s; rebuilding it", self._store.location, version)
                self._create(conn)
        self._ready = True
        return True

    # -- indexing -------------------------------------------------------------------------------------

    def catch_up(self) -> int:
        with self._lock:
            return int(self._store.run(self._catch_up))

    def _catch_up(self, conn: Connection) -> int:
        if not self._ensure(conn) or self._store.read_only:
            return 0
        checkpoint = "SELECT value FROM {s}.search_meta WHERE key = 'checkpoint'"
        newer = self._q("SELECT 1 FROM {s}.messages WHERE position > %s LIMIT 1")
        if conn.execute(newer, (self._scalar(conn, checkpoint),)).fetchone() is None:
            return 0  # current: a search that finds it so never takes the lock
        added = 0
        while True:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                after = self._scalar(conn, checkpoint)
                rows = conn.execute(
                    self._q(
                        "SELECT position, seq, stream, at, body FROM {s}.messages WHERE position > %s"
                        " AND position <= (SELECT max(position) FROM (SELECT position FROM {s}.messages"
                        " WHERE position > %s ORDER BY position LIMIT %s) AS first) ORDER BY position, seq"
                    ),
                    (after, after, _BATCH),
                    binary=True,
                ).fetchall()
                if not rows:
                    return added
                conn.execute(
                    self._q(
                        "INSERT INTO {s}.search_terms (stream, position, seq, at, terms)"
                        " SELECT s, p, q, a, to_tsvector('simple', t) FROM unnest(%b::bigint[], %b::bigint[],"
                        " %b::integer[], %b::bigint[], %b::text[]) AS r (s, p, q, a, t) ON CONFLICT DO NOTHING"
                    ),
                    (
                        [r[2] for r in rows],
                        [r[0] for r in rows],
                        [r[1] for r in rows],
                        [r[3] for r in rows],
                        [terms(decode_body(bytes(r[4]))) for r in rows],
                    ),
                )
                conn.execute(self._q("UPDATE {s}.search_meta SET value = %s WHERE key = 'checkpoint'"), (rows[-1][0],))
                added += len(rows)

    # -- erasing --------------------------------------------------------------------------------------

    def erasing(self, conn: Connection, session_id: str, messages: list[KeptMessage]) -> None:
        """Take a session's rows out, in the erasure's transaction (``vacuum`` rewrites their partition after)."""
        if self._version(conn) is None:
            return
        deleted = conn.execute(
            self._q(
                "DELETE FROM {s}.search_terms WHERE stream = (SELECT stream FROM {s}.streams WHERE session_id = %s)"
                " RETURNING stream, tableoid::regclass::text"
            ),
            (session_id,),
        ).fetchall()
        with self._lock:
            for stream, partition in deleted:
                self._dirty.setdefault(int(stream), set()).add(partition)

    def vacuum(self, conn: Connection, stream: int) -> None:
        """Rewrite the partition that held ``stream``'s rows: the dead rows' words leave the files (GIN's too)."""
        with self._lock:
            partitions = self._dirty.pop(stream, set())
        for name in partitions:  # a regclass's text: already a quoted, schema-qualified name
            rewrite(conn, name, _REWRITE_TIMEOUT, self._store.location)

    # -- searching ------------------------------------------------------------------------------------

    def matches(self, query: Query, limit: int) -> tuple[list[Match], bool]:
        expression = query.tsquery()

        def work(conn: Connection) -> list[tuple[Any, ...]]:
            if not self._ensure(conn):
                return []
            return conn.execute(
                self._q(
                    "SELECT position, seq, ts_rank_cd(terms, q, 1) AS score FROM {s}.search_terms,"
                    " to_tsquery('simple', %s) AS q WHERE terms @@ q ORDER BY score DESC, position DESC LIMIT %s"
                ),
                (expression, limit),
            ).fetchall()

        rows = self._store.run(work)
        return [Match(-float(score) or -1e-9, position, seq) for position, seq, score in rows], len(rows) < limit

    def owners(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], tuple[str, int | None]]:
        if not keys:
            return {}

        def work(conn: Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                self._q(
                    "SELECT m.position, m.seq, s.session_id, m.at FROM unnest(%b::bigint[], %b::integer[]) AS k (p, q)"
                    " JOIN {s}.messages AS m ON m.position = k.p AND m.seq = k.q"
                    " JOIN {s}.streams AS s ON s.stream = m.stream"
                ),
                ([p for p, _ in keys], [q for _, q in keys]),
            ).fetchall()

        return {(p, q): (sid, at) for p, q, sid, at in self._store.run(work)}

    # -- upkeep ---------------------------------------------------------------------------------------

    def rebuild(self) -> int:
        if self._store.read_only:
            raise PermissionError(f"{self._store.location} is open read-only: its search index cannot be rebuilt")

        def work(conn: Connection) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                self._create(conn)

        with self._lock:
            self._store.run(work)
            self._ready = True
        return self.catch_up()

    def problems(self) -> list[str]:
        def work(conn: Connection) -> list[str]:
            version = self._version(conn)
            if version is None:
                return []
            if version != _VERSION:
                return [f"search index: version {version}, not this version's {_VERSION} (rebuild makes it)"]
            checkpoint = self._scalar(conn, "SELECT value FROM {s}.search_meta WHERE key = 'checkpoint'")
            held = self._scalar(conn, "SELECT count(*) FROM {s}.search_terms")
            kept = self._scalar(conn, "SELECT count(*) FROM {s}.messages WHERE position <= %s", checkpoint)
            if held == kept:
                return []
            return [f"search index: it holds {held} messages where {kept} are kept up to its checkpoint {checkpoint}"]

        return list(self._store.run(work))

    def _scalar(self, conn: Connection, template: str, *params: object) -> int:
        row = conn.execute(self._q(template), params).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])
