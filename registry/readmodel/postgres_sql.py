"""The PostgreSQL read model's tables and every statement on them, built once per schema (identifiers quoted by
psycopg). Session ids and cwds compare with the "C" collation: code point order, as the registry sorts everywhere
else."""

from __future__ import annotations

from typing import Final, LiteralString

from psycopg import sql

__all__ = ["COLUMNS", "GUARD_FUNCTION", "INDEXES", "TABLES", "Statements"]

TABLES: Final = ("rm_meta", "rm_sessions", "rm_past")
# Versioned by name: a changed body is a new function, never a replacement under a running older writer.
GUARD_FUNCTION: Final = "rm_guard_1"
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


# What the tables are, as found (schema checks): columns in order, and indexes with their columns.
COLUMNS: Final = (
    "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s"
    " AND table_name LIKE 'rm\\_%%' ORDER BY table_name, ordinal_position"
)
INDEXES: Final = (
    "SELECT i.relname, t.relname, array(SELECT a.attname::text FROM unnest(x.indkey) WITH ORDINALITY AS k(num, n)"
    " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.num ORDER BY k.n)"
    " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
    " JOIN pg_namespace ns ON ns.oid = t.relnamespace"
    " WHERE ns.nspname = %s AND t.relname LIKE 'rm\\_%%' AND NOT x.indisprimary"
)


# A row's columns, written once for the batch statements (positional parameters) and an append's one-row CTEs
# (named ones); a current row replaces the session's row column by column, a past row is kept once.
_INTO_CURRENT: Final = "INSERT INTO {s}.rm_sessions (session_id, cwd, rank, live, valid_from, state, archived, agent)"
_REPLACE_CURRENT: Final = (
    " ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd, rank = excluded.rank, live = excluded.live,"
    " valid_from = excluded.valid_from, state = excluded.state, archived = excluded.archived, agent = excluded.agent"
)
_INTO_PAST: Final = (
    "INSERT INTO {s}.rm_past (session_id, cwd, rank, live, valid_from, valid_to, state, archived, agent)"
)


def _guard_checks(lock: LiteralString, checkpoint: LiteralString, floor: LiteralString) -> LiteralString:
    """The guard's body: the same checks as the function's (``lock``, ``checkpoint``, ``floor``: its parameters)
    and as the anonymous block's (the placeholders ``Statements.guard_block`` writes the values over)."""
    return (
        f"$$BEGIN IF NOT pg_try_advisory_xact_lock_shared({lock}) THEN"
        " RAISE EXCEPTION 'a catch-up holds the read model' USING ERRCODE = '40001'; END IF;"
        f" IF (SELECT value FROM {{s}}.rm_meta WHERE key = 'checkpoint') IS DISTINCT FROM {checkpoint}"
        f" OR (SELECT value FROM {{s}}.rm_meta WHERE key = 'floor') IS DISTINCT FROM {floor} THEN"
        " RAISE EXCEPTION 'the read model moved' USING ERRCODE = '40001'; END IF; END$$"
    )


def _current_rows(where: str, halves: list[tuple[int, str]]) -> str:
    """A page query's current rows: one index range per ``archived`` value (part 0; part 3 for the other half of an
    ``include`` walk)."""
    return " UNION ALL ".join(
        f"(SELECT {part}, rank, session_id, state FROM {{s}}.rm_sessions WHERE {where}"
        f" AND archived = {value} ORDER BY rank, session_id LIMIT %(n)s)"
        for part, value in halves
    )


class Statements:
    """Every statement, built once for one schema (identifiers quoted by psycopg)."""

    def __init__(self, schema: str) -> None:
        def q(template: LiteralString) -> bytes:
            return sql.SQL(template).format(s=sql.Identifier(schema)).as_bytes(None)

        self.create = [q(statement) for statement in _SCHEMA]
        self.drop = [q(f"DROP TABLE IF EXISTS {{s}}.{table}") for table in TABLES]
        self.insert_meta = q("INSERT INTO {s}.rm_meta (key, value) VALUES (%s, %s)")
        self.check = q(
            "SELECT (SELECT value FROM {s}.rm_meta WHERE key = 'checkpoint'),"
            " (SELECT value FROM {s}.rm_meta WHERE key = 'floor'),"
            " (SELECT coalesce(max(position), 0) FROM {s}.events)"
        )
        self.meta = q("SELECT key, value FROM {s}.rm_meta")
        self.chain = q("SELECT chain FROM {s}.events WHERE position = %s")
        self.upsert = q(_INTO_CURRENT + " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)" + _REPLACE_CURRENT)
        self.insert_past = q(_INTO_PAST + " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING")
        # Only the versions the floor's move leaves behind: a bound below too keeps the index scan off the dead
        # entries of every earlier prune (until a vacuum, ``valid_to <= floor`` walked them all: 46 ms a write
        # at 100k sessions, ~350 ms at 1M). Nothing lives below the old floor: no fold writes a version there.
        self.prune = q("DELETE FROM {s}.rm_past WHERE valid_to > %s AND valid_to <= %s")
        # After a long catch-up: the planner's statistics for the rows it wrote (without them, a deep page's
        # rm_past part ran as a parallel bitmap scan: 19 ms at 100k sessions, 0.06 ms after ANALYZE).
        self.analyze = q("ANALYZE {s}.rm_sessions, {s}.rm_past")
        self.load = q("SELECT session_id, state FROM {s}.rm_sessions WHERE session_id = ANY(%s)")
        self.get = q("SELECT state FROM {s}.rm_sessions WHERE session_id = %s")
        self.state_at = q(
            "SELECT 0, valid_from, state FROM {s}.rm_sessions WHERE session_id = %(sid)s"
            " UNION ALL SELECT 1, valid_from, state FROM {s}.rm_past"
            " WHERE session_id = %(sid)s AND valid_from <= %(p)s AND valid_to > %(p)s"
            " UNION ALL SELECT CASE key WHEN 'floor' THEN 3 ELSE 2 END, value, NULL FROM {s}.rm_meta"
            " WHERE key IN ('floor', 'checkpoint')"
        )
        # Shared: appends (and short catch-ups, which hold the append lock too) never exclude each other here - the
        # append lock orders them, and an exclusive try raced the previous append releasing its hold at commit
        # (advisory locks are released in no set order: the next append, woken by the append lock, often found
        # this one still held). Long catch-ups and rebuilds take it exclusively.
        self.try_lock = b"SELECT pg_try_advisory_xact_lock_shared(%s)"
        # The guard of an append that folds from what its process knows: a function (its plan cached once per
        # connection; the same body as an anonymous DO block was parsed on every call, ~130 us of the server's
        # time per append). Each IF is a statement of its own, so the meta rows are read after the lock is granted.
        self.guard_exists = (
            "SELECT count(*) FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
            f" WHERE n.nspname = %s AND p.proname = '{GUARD_FUNCTION}'"
        ).encode()
        self.define_guard = q(
            "CREATE OR REPLACE FUNCTION {s}." + GUARD_FUNCTION + "(lock bigint, checkpoint bigint, floor bigint)"
            " RETURNS void LANGUAGE plpgsql AS " + _guard_checks("lock", "checkpoint", "floor")
        )
        self.guard = q("SELECT {s}." + GUARD_FUNCTION + "(%s, %s, %s)")
        self._guard_block = q("DO " + _guard_checks("KEY", "CHECKPOINT", "FLOOR"))
        set_meta = (
            "UPDATE {s}.rm_meta SET value = CASE key WHEN 'checkpoint' THEN %(c)s WHEN 'floor' THEN %(f)s"
            " WHEN 'anchor' THEN %(a)s ELSE value + %(d)s END WHERE key IN ('checkpoint', 'floor', 'anchor', 'live')"
        )
        self.set_all_meta = q(set_meta)
        # An append's usual fold - at most one current row and one past row - with the meta, in one statement
        # (sibling CTEs: the tables differ, nothing one writes is read by another), by (current row, past row).
        upsert_one = (
            "cur AS ("
            + _INTO_CURRENT
            + " VALUES (%(sid)s, %(cwd)s, %(rank)s, %(live)s, %(from)s, %(state)s, %(archived)s, %(agent)s)"
            + _REPLACE_CURRENT
            + ")"
        )
        past_one = (
            "past AS ("
            + _INTO_PAST
            + " VALUES (%(p_sid)s, %(p_cwd)s, %(p_rank)s, %(p_live)s, %(p_from)s, %(p_to)s, %(p_state)s,"
            " %(p_archived)s, %(p_agent)s) ON CONFLICT DO NOTHING)"
        )
        self.fold_one: dict[tuple[bool, bool], bytes] = {
            (True, False): q("WITH " + upsert_one + " " + set_meta),
            (True, True): q("WITH " + upsert_one + ", " + past_one + " " + set_meta),
            (False, True): q("WITH " + past_one + " " + set_meta),
            (False, False): self.set_all_meta,
        }
        self.scan = q(
            "SELECT position, session_id, version, data FROM {s}.events WHERE position > %s AND position <= %s"
            " ORDER BY position"
        )
        self.cwd_counts = q("SELECT cwd, count(*) FROM {s}.rm_sessions WHERE live GROUP BY cwd")
        self.archived_count = q("SELECT count(*) FROM {s}.rm_sessions WHERE live AND archived")
        self.archived_cwd = q("SELECT count(*) FROM {s}.rm_sessions WHERE live AND archived AND cwd = %(cwd)s")
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
        # A first page is "as of now": every current row is valid and no past row is, so it is the current rows
        # alone, with whether the checkpoint is the log's head (part 4), in one statement - one round trip, one
        # snapshot.
        self.first_pages: dict[tuple[bool, bool, bool], bytes] = {}
        # A later page of a walk whose position is still the checkpoint: nothing changed since the walk began, so
        # no past row is valid at it and every current row is; the current rows after the cursor, with the floor
        # (part 2) and the checkpoint (part 4) that say whether that holds. With no position to compare, the
        # server plans it once (a generic plan), where a page through rm_past is planned at every call.
        self.unchanged_pages: dict[tuple[bool, bool, bool], bytes] = {}
        self._sized: dict[tuple[bytes, int], bytes] = {}
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

                        current = _current_rows(where + " AND valid_from <= %(p)s", halves)
                        if not after:
                            self.first_pages[(cwd, agent, include)] = q(
                                _current_rows(where, halves)  # as of now: every current row is valid
                                + " UNION ALL (SELECT 4, value, (SELECT coalesce(max(position), 0) FROM {s}.events)"
                                "::text, NULL FROM {s}.rm_meta WHERE key = 'checkpoint')"
                            )
                        if after:
                            self.unchanged_pages[(cwd, agent, include)] = q(
                                _current_rows(where, halves)
                                + " UNION ALL (SELECT CASE key WHEN 'floor' THEN 2 ELSE 4 END, value, NULL, NULL"
                                " FROM {s}.rm_meta WHERE key IN ('floor', 'checkpoint'))"
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

    def sized(self, query: bytes, rows: int) -> bytes:
        """A page statement with its ``LIMIT`` written in (an integer, never user text). With ``LIMIT`` a parameter,
        PostgreSQL planned the statement again at every execution: a generic plan's estimate, with no limit
        known, never beat a custom plan's, and the planning was half of a first page's time in the server."""
        key = (query, rows)
        sized = self._sized.get(key)
        if sized is None:
            sized = self._sized[key] = query.replace(b"%(n)s", str(int(rows)).encode())
        return sized

    def guard_block(self, key: int, checkpoint: int, floor: int) -> bytes:
        """The guard as an anonymous block, where the function could not be defined (no CREATE privilege on the
        schema): the same checks, parsed on every call (integers: formatted, never user text)."""
        values = {b"KEY": key, b"CHECKPOINT": checkpoint, b"FLOOR": floor}
        statement = self._guard_block
        for name, value in values.items():
            statement = statement.replace(name, str(int(value)).encode())
        return statement
