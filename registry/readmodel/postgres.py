"""The read model as tables in the PostgreSQL store's own schema (see ``tables.py`` for the layout and rules).

Every process and host on the store shares these tables. A catch-up runs in one transaction under an advisory
lock of its own (appends to the log never wait for it), reads the log through the store, and moves the
checkpoint with the rows. A page is one statement, so it reads one snapshot of the tables: the current rows
valid at P, the past rows valid at P, and the window's floor, together. Session ids and cwds compare with the
"C" collation: code point order, as the registry sorts everywhere else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, LiteralString

import psycopg
from psycopg import sql

from registry.model import Archived, SessionState
from registry.projection import Page
from registry.readmodel import DEFAULT_WINDOW, PAST_WINDOW, PastWindow, ReadModel, ReadModelFault
from registry.readmodel.tables import (
    INITIAL_META,
    CurrentRow,
    FoundSchema,
    Keyed,
    PastRow,
    SnapshotPlan,
    anchor_value,
    checked_meta,
    checked_positions,
    chunks,
    decode_state,
    fold_stretch,
    merge_pages,
    prepare_tables,
    record_log_shorter,
    schema_problems,
    unsealed,
)
from registry.snapshot import events_up_to, save_encoded_snapshot

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from events.postgres import PostgresStore

    Connection = psycopg.Connection[TupleRow]

__all__ = ["PostgresReadModel"]


_TABLES: Final = ("rm_meta", "rm_sessions", "rm_past")
_SCHEMA: Final[tuple[LiteralString, ...]] = (
    "CREATE TABLE {s}.rm_meta (key text PRIMARY KEY, value bigint NOT NULL)",
    """CREATE TABLE {s}.rm_sessions (
        session_id text COLLATE "C" PRIMARY KEY,
        cwd text COLLATE "C" NOT NULL,
        rank bigint NOT NULL,
        live boolean NOT NULL,
        valid_from bigint NOT NULL,
        state bytea NOT NULL,
        archived boolean NOT NULL,
        agent text COLLATE "C"
    )""",
    "CREATE INDEX rm_sessions_order ON {s}.rm_sessions (archived, rank, session_id, valid_from) WHERE live",
    "CREATE INDEX rm_sessions_cwd ON {s}.rm_sessions (cwd, archived, rank, session_id, valid_from) WHERE live",
    "CREATE INDEX rm_sessions_agent ON {s}.rm_sessions (agent, archived, rank, session_id, valid_from)"
    " WHERE live AND agent IS NOT NULL",
    """CREATE TABLE {s}.rm_past (
        session_id text COLLATE "C" NOT NULL,
        cwd text COLLATE "C" NOT NULL,
        rank bigint NOT NULL,
        live boolean NOT NULL,
        valid_from bigint NOT NULL,
        valid_to bigint NOT NULL,
        state bytea NOT NULL,
        archived boolean NOT NULL,
        agent text COLLATE "C",
        PRIMARY KEY (session_id, valid_from)
    )""",
    "CREATE INDEX rm_past_to ON {s}.rm_past (valid_to)",
)


_COLUMNS: Final = (
    "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s"
    " AND table_name LIKE 'rm\\_%%' ORDER BY table_name, ordinal_position"
)
_INDEXES: Final = (
    "SELECT i.relname, t.relname, array(SELECT a.attname::text FROM unnest(x.indkey) WITH ORDINALITY AS k(num, n)"
    " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.num ORDER BY k.n)"
    " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
    " JOIN pg_namespace ns ON ns.oid = t.relnamespace"
    " WHERE ns.nspname = %s AND t.relname LIKE 'rm\\_%%' AND NOT x.indisprimary"
)


def _lock_key(schema: str) -> int:
    digest = hashlib.blake2b(f"acp-session-registry/read-model/{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _Sql:
    """Every statement, built once for one schema (identifiers quoted by psycopg)."""

    def __init__(self, schema: str) -> None:
        def q(template: LiteralString) -> bytes:
            return sql.SQL(template).format(s=sql.Identifier(schema)).as_bytes(None)

        self.create = [q(statement) for statement in _SCHEMA]
        self.drop = [q(f"DROP TABLE IF EXISTS {{s}}.{table}") for table in _TABLES]
        self.version = q("SELECT value FROM {s}.rm_meta WHERE key = 'version'")
        self.insert_meta = q("INSERT INTO {s}.rm_meta (key, value) VALUES (%s, %s)")
        self.check = q(
            "SELECT (SELECT value FROM {s}.rm_meta WHERE key = 'checkpoint'),"
            " (SELECT value FROM {s}.rm_meta WHERE key = 'floor'),"
            " (SELECT coalesce(max(position), 0) FROM {s}.events)"
        )
        self.meta = q("SELECT key, value FROM {s}.rm_meta")
        self.set_meta = q(
            "INSERT INTO {s}.rm_meta (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self.chain = q("SELECT chain FROM {s}.events WHERE position = %s")
        self.add_live = q("UPDATE {s}.rm_meta SET value = value + %s WHERE key = 'live'")
        self.upsert = q(
            "INSERT INTO {s}.rm_sessions (session_id, cwd, rank, live, valid_from, state, archived, agent)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,"
            " rank = excluded.rank, live = excluded.live, valid_from = excluded.valid_from, state = excluded.state,"
            " archived = excluded.archived, agent = excluded.agent"
        )
        self.insert_past = q(
            "INSERT INTO {s}.rm_past (session_id, cwd, rank, live, valid_from, valid_to, state, archived, agent)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
        )
        self.prune = q("DELETE FROM {s}.rm_past WHERE valid_to <= %s")
        self.load = q("SELECT session_id, state FROM {s}.rm_sessions WHERE session_id = ANY(%s)")
        self.get = q("SELECT state FROM {s}.rm_sessions WHERE session_id = %s")
        self.state_at = q(
            "SELECT 0, valid_from, state FROM {s}.rm_sessions WHERE session_id = %(sid)s"
            " UNION ALL SELECT 1, valid_from, state FROM {s}.rm_past"
            " WHERE session_id = %(sid)s AND valid_from <= %(p)s AND valid_to > %(p)s"
            " UNION ALL SELECT CASE key WHEN 'floor' THEN 3 ELSE 2 END, value, NULL FROM {s}.rm_meta"
            " WHERE key IN ('floor', 'checkpoint')"
        )
        self.cwd_counts = q("SELECT cwd, count(*) FROM {s}.rm_sessions WHERE live GROUP BY cwd")
        self.states = q("SELECT state FROM {s}.rm_sessions")
        self.in_list_order = q(
            "(SELECT state FROM {s}.rm_sessions WHERE live ORDER BY archived, rank, session_id)"
            " UNION ALL (SELECT state FROM {s}.rm_sessions WHERE NOT live)"
        )
        self.count_all = q("SELECT count(*) FROM {s}.rm_sessions")
        # Page queries by (cwd, agent, after, include): the current rows of one index range per ``archived``
        # value (part 0, and part 3 for the other half of an ``include`` walk), the past rows valid at %(p)s
        # (part 1), and the window's floor (part 2), in one round trip.
        self.pages: dict[tuple[bool, bool, bool, bool], bytes] = {}
        for cwd in (False, True):
            for agent in (False, True):
                for after in (False, True):
                    where = (
                        "live"
                        + (" AND agent = %(agent)s" if agent else "")
                        + (" AND cwd = %(cwd)s" if cwd else "")
                        + (" AND (rank, session_id) > (%(rank)s, %(sid)s)" if after else "")
                    )
                    for include in (False, True):
                        halves = [(0, "%(archived)s")] + ([(3, "NOT %(archived)s")] if include else [])
                        current = " UNION ALL ".join(
                            f"(SELECT {part}, rank, session_id, state FROM {{s}}.rm_sessions WHERE {where}"
                            f" AND archived = {value} AND valid_from <= %(p)s ORDER BY rank, session_id LIMIT %(n)s)"
                            for part, value in halves
                        )
                        self.pages[(cwd, agent, after, include)] = q(
                            current
                            + " UNION ALL (SELECT 1, rank, session_id, state FROM {s}.rm_past"
                            + f" WHERE {where}{'' if include else ' AND archived = %(archived)s'}"
                            + " AND valid_to > %(p)s AND valid_from <= %(p)s"
                            " AND %(p)s >= (SELECT value FROM {s}.rm_meta WHERE key = 'floor')"
                            " ORDER BY rank, session_id LIMIT %(n)s)"
                            " UNION ALL (SELECT 2, value, NULL, NULL FROM {s}.rm_meta WHERE key = 'floor')"
                        )


class PostgresReadModel(ReadModel):
    """``rm_*`` tables in the store's PostgreSQL schema, shared by every process and host."""

    kind = "tables"

    def __init__(self, store: PostgresStore, *, window: int = DEFAULT_WINDOW, catch_up: bool = True) -> None:
        self.window = window
        self._store = store
        self._sql = _Sql(store.schema)
        self._key = _lock_key(store.schema)
        self._position = 0
        store.run(functools.partial(self._prepare, repair=catch_up))
        if catch_up:
            self.catch_up()
        else:
            with contextlib.suppress(ReadModelFault):  # tables as they are: verify reports what is wrong
                self._position = self._meta()["checkpoint"]

    # -- schema ---------------------------------------------------------------------------------------

    def _describe(self, conn: Connection) -> FoundSchema:
        """The ``rm_*`` tables, columns, indexes (primary keys aside) and ``rm_meta`` rows as they are."""
        schema = self._store.schema
        tables: dict[str, tuple[str, ...]] = {}
        for table, column in conn.execute(_COLUMNS, (schema,)).fetchall():
            tables[table] = (*tables.get(table, ()), column)
        indexes = {name: (table, tuple(columns)) for name, table, columns in conn.execute(_INDEXES, (schema,))}
        meta: dict[str, int] | None = None
        if "rm_meta" in tables and tables["rm_meta"] == ("key", "value"):
            meta = {key: int(value) for key, value in conn.execute(self._sql.meta).fetchall() if value is not None}
        return FoundSchema(tables, indexes, meta)

    def schema_problems(self) -> list[str]:
        return schema_problems(self._store.run(self._describe))

    def _matches_log(self, conn: Connection) -> bool:
        """Whether the tables' checkpoint is a position of this log with the chain link they recorded."""
        meta: dict[str, int] = dict(conn.execute(self._sql.meta).fetchall())
        if meta["checkpoint"] == 0:
            return True
        row = conn.execute(self._sql.chain, (meta["checkpoint"],)).fetchone()
        return row is not None and anchor_value(None if row[0] is None else bytes(row[0])) == meta.get("anchor", 0)

    def _prepare(self, conn: Connection, *, repair: bool = True) -> None:
        """Create, rebuild or refuse the tables (``tables.prepare_tables``) under the read model's advisory lock."""

        @contextlib.contextmanager
        def exclusively() -> Iterator[None]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                yield

        prepare_tables(
            self._store.location,
            describe=lambda: self._describe(conn),
            problems=schema_problems,
            matches_log=lambda: self._matches_log(conn),
            exclusively=exclusively,
            create=lambda: self._create(conn),
            repair=repair,
            before_rebuild=lambda: record_log_shorter(
                self._store, dict(conn.execute(self._sql.meta).fetchall()), self._store.head()
            ),
        )

    def _create(self, conn: Connection) -> None:
        """Replace whatever ``rm_*`` tables are there (stray, partial or damaged ones too) with empty ones."""
        stray = {table for table, _column in conn.execute(_COLUMNS, (self._store.schema,)).fetchall()}
        for table in sorted(stray - set(_TABLES)):
            conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {}.{}").format(sql.Identifier(self._store.schema), sql.Identifier(table))
            )
        for statement in (*self._sql.drop, *self._sql.create):
            conn.execute(statement)
        conn.cursor().executemany(self._sql.insert_meta, INITIAL_META)

    # -- catching up ----------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        return self._position

    def catch_up(self, to: int | None = None) -> int:
        if to is not None and self._position >= to:
            return self._position
        checkpoint, _floor, head = checked_positions(
            self._store.run(lambda conn: conn.execute(self._sql.check).fetchone())
        )
        self._position = checkpoint
        plan = SnapshotPlan(self._store, checkpoint, head, self._dump)
        while checkpoint < head:
            checkpoint, head = self._store.run(self._catch_up_chunk)
            self._position = checkpoint
            plan.passed(checkpoint)
        return self._position

    def _dump(self, checkpoint: int) -> None:
        """A kept snapshot at ``checkpoint`` from the rows as they are (nothing if the tables moved on)."""
        events = events_up_to(self._store, checkpoint)

        def dump(conn: Connection) -> None:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                meta = checked_meta(conn.execute(self._sql.meta).fetchall())
                if meta["checkpoint"] != checkpoint:
                    return
                count = conn.execute(self._sql.count_all).fetchone()[0]  # type: ignore[index]
                with conn.cursor(name="acp_registry_snapshot") as rows:  # a server-side cursor: memory stays flat
                    rows.execute(self._sql.in_list_order)  # see save_snapshot: in list order
                    save_encoded_snapshot(
                        self._store, checkpoint, (unsealed(bytes(state)) for (state,) in rows), count, events=events
                    )

        self._store.run(dump)

    def _catch_up_chunk(self, conn: Connection) -> tuple[int, int]:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
            checkpoint, floor, head = checked_positions(conn.execute(self._sql.check).fetchone())
            if checkpoint >= head:
                return checkpoint, head
            fresh = checkpoint == 0
            for chunk in chunks(self._store.scan(checkpoint, until=head)):
                new_floor = head if fresh else max(floor, chunk[-1].position - self.window)
                folded = fold_stretch(
                    chunk, lambda ids: self._load(conn, ids), checkpoint=checkpoint, keep_past_after=new_floor
                )
                with conn.cursor() as cursor:
                    if folded.current:
                        cursor.executemany(self._sql.upsert, folded.current)
                    if folded.past:
                        cursor.executemany(self._sql.insert_past, folded.past)
                    if new_floor > floor:
                        cursor.execute(self._sql.prune, (new_floor,))
                    chain = conn.execute(self._sql.chain, (folded.position,)).fetchone()
                    anchor = anchor_value(None if chain is None or chain[0] is None else bytes(chain[0]))
                    cursor.executemany(
                        self._sql.set_meta,
                        [("checkpoint", folded.position), ("floor", new_floor), ("anchor", anchor)],
                    )
                    cursor.execute(self._sql.add_live, (folded.live_delta,))
                return folded.position, head
            return checkpoint, head  # pragma: no cover - positions up to the head are committed

    def _load(self, conn: Connection, session_ids: list[str]) -> dict[str, SessionState]:
        rows = conn.execute(self._sql.load, (session_ids,)).fetchall()
        return {session_id: decode_state(state) for session_id, state in rows}

    def rebuild(self) -> int:
        def rebuild(conn: Connection) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                self._create(conn)

        self._store.run(rebuild)
        self._position = 0
        return self.catch_up()

    # -- reading --------------------------------------------------------------------------------------

    def _meta(self) -> dict[str, int]:
        return checked_meta(self._store.run(lambda conn: conn.execute(self._sql.meta).fetchall()))

    def window_floor(self) -> int:
        return self._meta()["floor"]

    def page(
        self,
        *,
        as_of: int,
        after: tuple[int, str] | None,
        cwd: str | None,
        limit: int,
        archived: Archived = "exclude",
        agent: str | None = None,
    ) -> Page:
        params: dict[str, Any] = {
            "cwd": cwd,
            "agent": agent,
            "archived": archived == "only",
            "p": as_of,
            "n": limit + 1,
            "rank": None,
            "sid": None,
        }
        if after is not None:
            params["rank"], params["sid"] = after
        query = self._sql.pages[(cwd is not None, agent is not None, after is not None, archived == "include")]
        rows = self._store.run(lambda conn: conn.execute(query, params).fetchall())
        parts: tuple[list[Keyed], list[Keyed], list[Keyed], list[Keyed]] = ([], [], [], [])
        floor = 0
        for part, rank, session_id, state in rows:
            if part == 2:
                floor = rank
            else:
                parts[part].append((rank, session_id, state))
        current = parts[0] if not parts[3] else list(heapq.merge(parts[0], parts[3], key=lambda row: row[:2]))
        states, more = merge_pages(current, parts[1], limit)
        return Page(states, more, as_of >= floor)

    def get(self, session_id: str) -> SessionState | None:
        row = self._store.run(lambda conn: conn.execute(self._sql.get, (session_id,)).fetchone())
        return None if row is None else decode_state(row[0])

    def state_at(self, session_id: str, position: int) -> SessionState | PastWindow | None:
        rows = self._store.run(
            lambda conn: conn.execute(self._sql.state_at, {"sid": session_id, "p": position}).fetchall()
        )
        current = next((row for row in rows if row[0] == 0), None)
        if current is not None and current[1] <= position:
            return decode_state(current[2])
        meta = {part: value for part, value, _state in rows if part >= 2}
        if 2 not in meta or 3 not in meta:
            raise ReadModelFault("the read model's rm_meta has no checkpoint or floor row")
        if position < meta[3] or position > meta[2]:
            return PAST_WINDOW
        past = next((row for row in rows if row[0] == 1), None)
        return None if past is None else decode_state(past[2])

    def count(self) -> int:
        return self._meta()["live"]

    def cwd_counts(self) -> dict[str, int]:
        return dict(self._store.run(lambda conn: conn.execute(self._sql.cwd_counts).fetchall()))

    def stored(self, table: str) -> Iterator[tuple[Any, ...]]:
        columns = {"rm_sessions": CurrentRow._fields, "rm_past": PastRow._fields}[table]
        query = sql.SQL("SELECT {} FROM {}.{}").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(self._store.schema), sql.Identifier(table)
        )
        rows = self._store.run(lambda conn: conn.execute(query).fetchall())
        return (tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows)

    def checkpoint_matches_log(self) -> bool:
        """Whether the checkpoint is a position of this log with the chain link the tables recorded there."""
        return self._store.run(self._matches_log)

    def stored_meta(self) -> dict[str, int]:
        rows = self._store.run(lambda conn: conn.execute(self._sql.meta).fetchall())
        return {key: int(value) for key, value in rows if value is not None}

    def states(self) -> Iterator[SessionState]:
        rows = self._store.run(lambda conn: conn.execute(self._sql.states).fetchall())
        return (decode_state(state) for (state,) in rows)
