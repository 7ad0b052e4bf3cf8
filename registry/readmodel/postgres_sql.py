"""The PostgreSQL read model's statements, built once per schema (identifiers quoted by psycopg): the tables as
``schema.py`` declares them (session ids and cwds in the "C" collation: code point order, as the registry sorts
everywhere else), what the catalogue says of them, and every read and write on them."""

from __future__ import annotations

from typing import Final, Literal, LiteralString, NamedTuple

from psycopg import sql

from events.schema import chain_query, entries_query, head_query
from registry.filters import FILTERS
from registry.readmodel.schema import TABLES, Table, insert_statement, postgres_ddl

__all__ = [
    "AT_END",
    "CURRENT_NAMES",
    "DESCRIBE",
    "FLOOR_STEP",
    "GUARD_FUNCTION",
    "PAST_NAMES",
    "PageShape",
    "Statements",
]

# Versioned by name: a changed body is a new function, never a replacement under a running older writer.
GUARD_FUNCTION: Final = "rm_guard_1"

# Every object on an rm_* table in the schema as the catalogue reports it, in one statement: (name, kind, table,
# definition, columns) - a table's definition is its columns (type, collation, NOT NULL) and constraints, an
# index's its table, columns, method and predicate, as ``schema.expected_objects`` renders them; the indexes that
# carry a table's own constraints are said by the table. Triggers and rules are objects of their own.
DESCRIBE: Final = (
    # rm_* by a range of pg_class's (relname, relnamespace) index, and the indexes on those tables whatever their
    # names: never a scan of the catalogue, which a busy server's many schemas make long.
    "WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %s),"
    " named AS (SELECT c.oid, c.relname, c.relkind, c.relam FROM pg_class AS c JOIN ns ON c.relnamespace = ns.oid"
    " WHERE c.relname >= 'rm_' AND c.relname < 'rm`'),"
    " rel AS (SELECT * FROM named UNION SELECT i.oid, i.relname, i.relkind, i.relam FROM named"
    " JOIN pg_index AS y ON y.indrelid = named.oid JOIN pg_class AS i ON i.oid = y.indexrelid)"
    " SELECT r.relname, CASE r.relkind WHEN 'r' THEN 'table' WHEN 'i' THEN 'index' WHEN 'v' THEN 'view'"
    " WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' WHEN 'p' THEN 'partitioned table'"
    " WHEN 'f' THEN 'foreign table' ELSE 'relation' END,"
    " coalesce(t.relname, r.relname),"
    " CASE WHEN x.indexrelid IS NOT NULL THEN t.relname || ' (' || (SELECT string_agg(pg_get_indexdef(x.indexrelid,"
    " k, true), ', ' ORDER BY k) FROM generate_series(1, x.indnatts) AS k) || ')'"
    " || CASE WHEN x.indisunique THEN ' UNIQUE' ELSE '' END"
    " || CASE WHEN am.amname <> 'btree' THEN ' USING ' || am.amname ELSE '' END"
    " || coalesce(' WHERE ' || pg_get_expr(x.indpred, x.indrelid, true), '')"
    " ELSE concat_ws('; ', (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)"
    " || CASE WHEN a.attcollation <> 0 THEN ' COLLATE ' || quote_ident(co.collname) ELSE '' END"
    " || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END, '; ' ORDER BY a.attnum)"
    " FROM pg_attribute AS a LEFT JOIN pg_collation AS co ON co.oid = a.attcollation"
    " WHERE a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped),"
    " (SELECT string_agg(pg_get_constraintdef(k.oid), '; ' ORDER BY k.conname) FROM pg_constraint AS k"
    " WHERE k.conrelid = r.oid)) END,"
    " (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute AS a"
    " WHERE a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped)"
    " FROM rel AS r LEFT JOIN pg_index AS x ON x.indexrelid = r.oid LEFT JOIN pg_class AS t ON t.oid = x.indrelid"
    " LEFT JOIN pg_am AS am ON am.oid = r.relam"
    " WHERE x.indexrelid IS NULL OR NOT EXISTS (SELECT 1 FROM pg_constraint AS k WHERE k.conrelid = x.indrelid"
    " AND k.conindid = x.indexrelid AND k.contype IN ('p', 'u', 'x'))"
    " UNION ALL SELECT g.tgname, 'trigger', r.relname, '', NULL FROM named AS r JOIN pg_trigger AS g"
    " ON g.tgrelid = r.oid WHERE NOT g.tgisinternal"
    " UNION ALL SELECT w.rulename, 'rule', r.relname, '', NULL FROM named AS r JOIN pg_rewrite AS w"
    " ON w.ev_class = r.oid WHERE w.rulename <> '_RETURN'"
)
_META, _CURRENT, _PAST = TABLES[:3]  # rm_usage: usage_tables.py
CURRENT_NAMES: Final = ""
"""An append's one-row fold names a current row's parameters by their columns, a past row's with this prefix."""
PAST_NAMES: Final = "p_"
_SCHEMA: Final = postgres_ddl("{s}.")
AT_END: Final = "rm_"
"""The parameters of an append's fold in its one statement (``Statements.at_end``): a current row's by its columns
with this prefix, a past row's with ``AT_END + PAST_NAMES``; ``lock``, ``from``, ``version``, ``window``, ``delta``."""
FLOOR_STEP: Final = 1_000
"""Positions the window's floor moves by at a time (see ``AppendFold._floor``)."""


_HEAD: Final = head_query("{s}.")


def _insert(table: Table, names: str | None = None) -> LiteralString:
    """A row's insert (``schema.insert_statement``), positional or with its parameters named ``<names><column>``."""
    return insert_statement(table, "postgresql", "{s}.", names)


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


def _moved(key: LiteralString, live: LiteralString, archived: LiteralString) -> LiteralString:
    """The ``rm_meta`` rows a fold's update writes: the positions and the anchor always, a count only when its delta
    (the parameters ``live`` and ``archived``) is not 0 - a turn changes neither, so it writes three rows, not five."""
    return (
        f"{key} IN ('checkpoint', 'floor', 'anchor') OR ({key} = 'live' AND %({live})s::bigint <> 0)"
        f" OR ({key} = 'archived' AND %({archived})s::bigint <> 0)"
    )


def _at_end(current: bool, past: bool) -> tuple[LiteralString, LiteralString, LiteralString]:
    """An append's fold written into its one statement (``events.postgres_hooks.AtEnd``: guard, writes, answer), by
    whether it writes the session's current row and the past row it replaces. The guard: the read model's lock is
    free of a catch-up, the session's stream is at the version the fold assumed (``cur``), the checkpoint is the
    log's end (``tip``), and the session's row is the version the fold started from (``%(rm_from)s``: its position,
    NULL for none). The writes, from the event's position (``ev``):
    the rows (each ``valid_from`` and ``valid_to`` that position, the state blob's position appended to what was
    sealed without it), the window's floor moved and pruned below, the checkpoint, its chain anchor and the live
    count. Answers the floor."""
    at = (
        "rm_at AS (SELECT ev.position AS p, ev.chain, f.value AS floor_before,"
        " CASE WHEN tip.position = 0 THEN ev.position ELSE greatest(f.value, (ev.position - %(rm_window)s::bigint)"
        f" / {FLOOR_STEP} * {FLOOR_STEP}) END AS floor FROM ev, tip, {{s}}.rm_meta AS f WHERE f.key = 'floor')"
    )
    writes = [at]
    if current:
        computed = {"session_id": "%(session)s", "valid_from": "a.p", "state": "%(rm_state)b || int8send(a.p)"}
        source = "FROM rm_at AS a"
        writes.append(f"rm_cur AS ({insert_statement(_CURRENT, 'postgresql', '{s}.', AT_END, computed, source)})")
    if past:
        source = "FROM rm_at AS a WHERE a.p > a.floor"
        names = AT_END + PAST_NAMES
        computed = {"session_id": "%(session)s", "valid_to": "a.p"}
        writes.append(f"rm_past AS ({insert_statement(_PAST, 'postgresql', '{s}.', names, computed, source)})")
    writes += [
        "rm_prune AS (DELETE FROM {s}.rm_past AS x USING rm_at AS a"
        " WHERE a.floor > a.floor_before AND x.valid_to > a.floor_before AND x.valid_to <= a.floor)",
        "rm_set AS (UPDATE {s}.rm_meta AS m SET value = CASE m.key WHEN 'checkpoint' THEN a.p WHEN 'floor' THEN a.floor"
        " WHEN 'anchor' THEN ('x' || encode(substring(a.chain FROM 1 FOR 8), 'hex'))::bit(64)::bigint"
        " WHEN 'live' THEN m.value + %(rm_delta)s ELSE m.value + %(rm_adelta)s END FROM rm_at AS a"
        f" WHERE {_moved('m.key', 'rm_delta', 'rm_adelta')})",
    ]
    guard = (
        "pg_try_advisory_xact_lock_shared(%(rm_lock)s) AND cur.version = %(rm_version)s"
        " AND (SELECT value FROM {s}.rm_meta WHERE key = 'checkpoint') = tip.position"
        " AND (SELECT valid_from FROM {s}.rm_sessions WHERE session_id = %(session)s)"
        " IS NOT DISTINCT FROM %(rm_from)s::bigint"
    )
    return guard, ", ".join(writes), "(SELECT floor FROM rm_at)"


def _known(current: bool, past: bool, prune: bool) -> tuple[LiteralString, LiteralString]:
    """An append's usual fold from what its process knows (``AppendFold.fold_known``: at most one current row and
    one past row, positions known) written into the store's one statement of that append
    (``events.postgres_hooks.KnownPart``: guard, writes), by whether it writes the current row, the past row it
    replaces, and prunes below a moved floor. The guard, over the statement's snapshot (taken once the append lock
    is granted): the read model's lock free of a catch-up, and its checkpoint and floor still what this process
    left. The writes are gated on it (``ok``); named ``AT_END + column``, a past row's ``AT_END + PAST_NAMES +
    column``, the meta's ``rm_c``, ``rm_f``, ``rm_a``, ``rm_d``, ``rm_ad`` and the floor before ``rm_f0``."""
    gate = "FROM ok WHERE ok.ok"
    writes = []
    if prune:
        writes.append(
            "rm_prune AS (DELETE FROM {s}.rm_past WHERE valid_to > %(rm_f0)s::bigint AND valid_to <= %(rm_f)s::bigint"
            " AND (SELECT ok FROM ok))"
        )
    if current:
        writes.append(f"rm_cur AS ({insert_statement(_CURRENT, 'postgresql', '{s}.', AT_END, source=gate)})")
    if past:
        names = AT_END + PAST_NAMES
        writes.append(f"rm_past AS ({insert_statement(_PAST, 'postgresql', '{s}.', names, source=gate)})")
    writes.append(
        "rm_set AS (UPDATE {s}.rm_meta SET value = CASE key WHEN 'checkpoint' THEN %(rm_c)s::bigint"
        " WHEN 'floor' THEN %(rm_f)s::bigint WHEN 'anchor' THEN %(rm_a)s::bigint"
        " WHEN 'live' THEN value + %(rm_d)s::bigint ELSE value + %(rm_ad)s::bigint END"
        f" WHERE ({_moved('key', 'rm_d', 'rm_ad')}) AND (SELECT ok FROM ok))"
    )
    guard = (
        "pg_try_advisory_xact_lock_shared(%(rm_lock)s::bigint)"
        " AND (SELECT value FROM {s}.rm_meta WHERE key = 'checkpoint') IS NOT DISTINCT FROM %(rm_checkpoint)s::bigint"
        " AND (SELECT value FROM {s}.rm_meta WHERE key = 'floor') IS NOT DISTINCT FROM %(rm_f0)s::bigint"
    )
    return guard, ", ".join(writes)


def _current_rows(where: str, halves: list[tuple[int, str]]) -> str:
    """A page query's current rows: one index range per ``archived`` value (part 0; part 3 for the other half of an
    ``include`` walk)."""
    return " UNION ALL ".join(
        f"(SELECT {part}, rank, session_id, state FROM {{s}}.rm_sessions WHERE {where}"
        f" AND archived = {value} ORDER BY rank, session_id LIMIT %(n)s)"
        for part, value in halves
    )


class PageShape(NamedTuple):
    """Which page statement (``Statements.page``): the filters it narrows by (``registry.filters.Bound.narrowing``),
    whether it continues after a cursor's sort key, reads both ``archived`` ranges (``include``), and its kind."""

    narrowing: tuple[str, ...]
    after: bool
    include: bool
    kind: Literal["as_of", "first", "unchanged"]


_SQL: Final = {f.name: f.sql["postgresql"] for f in FILTERS if f.sql is not None}


def _page(shape: PageShape) -> str:
    """``Statements.page``'s statement of ``shape``, ``{s}`` for the schema."""
    where = " AND ".join(["live", *(_SQL[name] for name in shape.narrowing)])
    if shape.after:
        where += " AND (rank, session_id) > (%(rank)s, %(sid)s)"
    halves = [(0, "%(archived)s")] + ([(3, "NOT %(archived)s")] if shape.include else [])
    if shape.kind == "first":  # as of now: every current row is valid
        return (
            _current_rows(where, halves)
            + " UNION ALL (SELECT 4, value, "
            + _HEAD
            + "::text, NULL FROM {s}.rm_meta WHERE key = 'checkpoint')"
        )
    if shape.kind == "unchanged":
        return (
            _current_rows(where, halves) + " UNION ALL (SELECT CASE key WHEN 'floor' THEN 2 ELSE 4 END, value, NULL,"
            " NULL FROM {s}.rm_meta WHERE key IN ('floor', 'checkpoint'))"
        )
    return (
        _current_rows(where + " AND valid_from <= %(p)s", halves)
        + " UNION ALL (SELECT 1, rank, session_id, state FROM {s}.rm_past"
        + f" WHERE {where}{'' if shape.include else ' AND archived = %(archived)s'}"
        + " AND valid_to > %(p)s AND valid_from <= %(p)s"
        " AND %(p)s >= (SELECT value FROM {s}.rm_meta WHERE key = 'floor')"
        " ORDER BY rank, session_id LIMIT %(n)s)"
        " UNION ALL (SELECT 2, value, NULL, NULL FROM {s}.rm_meta WHERE key = 'floor')"
    )


class Statements:
    """Every statement, built once for one schema (identifiers quoted by psycopg); the page statements at their
    first use (``page``)."""

    def __init__(self, schema: str) -> None:
        def q(template: str) -> bytes:
            return sql.SQL(template).format(s=sql.Identifier(schema)).as_bytes(None)

        self.create = [q(statement) for statement in _SCHEMA]
        self.insert_meta = q(_insert(_META))
        self.check = q(
            "SELECT (SELECT value FROM {s}.rm_meta WHERE key = 'checkpoint'),"
            " (SELECT value FROM {s}.rm_meta WHERE key = 'floor'), " + _HEAD
        )
        self.meta = q("SELECT key, value FROM {s}.rm_meta")
        self.chain = q(chain_query("{s}.", "%s"))
        self.upsert = q(_insert(_CURRENT))
        self.insert_past = q(_insert(_PAST))
        # Only the versions the floor's move leaves behind: a bound below too keeps the index scan off the dead
        # entries of every earlier prune (until a vacuum, ``valid_to <= floor`` walks them all; docs/scale.md has
        # the cost). Nothing lives below the old floor: no fold writes a version there.
        self.prune = q("DELETE FROM {s}.rm_past WHERE valid_to > %s AND valid_to <= %s")
        # After a long catch-up: the planner's statistics for the rows it wrote (without them a deep page's rm_past
        # part can be planned as a parallel bitmap scan, orders of magnitude slower).
        self.analyze = q("ANALYZE {s}.rm_sessions, {s}.rm_past")
        self.load = q("SELECT session_id, state, valid_from FROM {s}.rm_sessions WHERE session_id = ANY(%s)")
        self.get = q("SELECT state, valid_from FROM {s}.rm_sessions WHERE session_id = %s")
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
        # connection, where an anonymous DO block is parsed on every call). Each IF is a statement of its own, so
        # the meta rows are read after the lock is granted.
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
            " WHEN 'anchor' THEN %(a)s WHEN 'live' THEN value + %(d)s ELSE value + %(ad)s END"
            " WHERE " + _moved("key", "d", "ad")
        )
        self.set_all_meta = q(set_meta)
        # An append's usual fold - at most one current row and one past row - with the meta, in one statement
        # (sibling CTEs: the tables differ, nothing one writes is read by another), by (current row, past row).
        upsert_one = "cur AS (" + _insert(_CURRENT, CURRENT_NAMES) + ")"
        past_one = "past AS (" + _insert(_PAST, PAST_NAMES) + ")"
        self.fold_one: dict[tuple[bool, bool], bytes] = {
            (True, False): q("WITH " + upsert_one + " " + set_meta),
            (True, True): q("WITH " + upsert_one + ", " + past_one + " " + set_meta),
            (False, True): q("WITH " + past_one + " " + set_meta),
            (False, False): self.set_all_meta,
        }
        # An append's fold in its own statement, by (current row, past row): see ``_at_end``.
        self.at_end: dict[tuple[bool, bool], tuple[bytes, bytes, bytes]] = {
            (current, past): tuple(map(q, _at_end(current, past)))  # type: ignore[misc]
            for current in (False, True)
            for past in (False, True)
        }
        # An append's usual fold from what its process knows, in the append's own statement: see ``_known``.
        self.known: dict[tuple[bool, bool, bool], tuple[bytes, bytes]] = {
            (current, past, prune): tuple(map(q, _known(current, past, prune)))  # type: ignore[misc]
            for current in (False, True)
            for past in (False, True)
            for prune in (False, True)
        }
        self.scan = q(entries_query("{s}.", "%s", "%s"))
        self.cwd_counts = q("SELECT cwd, count(*) FROM {s}.rm_sessions WHERE live GROUP BY cwd")
        self.archived_cwd = q("SELECT count(*) FROM {s}.rm_sessions WHERE live AND archived AND cwd = %(cwd)s")
        self.states = q("SELECT state FROM {s}.rm_sessions")
        self.in_list_order = q(
            "(SELECT state FROM {s}.rm_sessions WHERE live ORDER BY archived, rank, session_id)"
            " UNION ALL (SELECT state FROM {s}.rm_sessions WHERE NOT live)"
        )
        self.count_all = q("SELECT count(*) FROM {s}.rm_sessions")
        # A session's forks: one range of the partial index on ``parent`` (``show``)
        self.forks = q("SELECT state FROM {s}.rm_sessions WHERE parent = %s")
        self._q = q
        self._pages: dict[PageShape, bytes] = {}
        self._sized: dict[tuple[bytes, int], bytes] = {}

    def page(self, shape: PageShape) -> bytes:
        """The page statement of ``shape`` (built at its first use, from the filters' predicates):

        - ``"as_of"``: the current rows valid at ``%(p)s``, of one index range per ``archived`` value (part 0, and
          part 3 for the other half of an ``include`` walk), the past rows valid then (part 1), and the window's
          floor (part 2), in one round trip;
        - ``"first"``: a first page is "as of now": every current row is valid and no past row is, so it is the
          current rows alone, with whether the checkpoint is the log's head (part 4), in one statement - one round
          trip, one snapshot;
        - ``"unchanged"``: a later page of a walk whose position is still the checkpoint: nothing changed since the
          walk began, so no past row is valid at it and every current row is; the current rows after the cursor,
          with the floor (part 2) and the checkpoint (part 4) that say whether that holds. With no position to
          compare, the server plans it once (a generic plan), where a page through rm_past is planned at every
          call."""
        made = self._pages.get(shape)
        if made is None:
            made = self._pages[shape] = self._q(_page(shape))
        return made

    def sized(self, query: bytes, rows: int) -> bytes:
        """A page statement with its ``LIMIT`` written in (an integer, never user text). With ``LIMIT`` a parameter,
        PostgreSQL plans the statement again at every execution (a generic plan's estimate, with no limit known,
        never beats a custom plan's), and planning is a large part of a first page's time in the server."""
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
