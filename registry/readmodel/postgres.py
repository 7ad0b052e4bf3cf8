"""The read model as tables in the PostgreSQL store's own schema (see ``tables.py`` for the layout and rules;
``postgres_sql.py`` for the statements).

Every process and host on the store shares these tables. An append folds itself into them in its own transaction
(the store's commit hook, ``events.postgres_write``, answered in ``postgres_fold.py``): a lone event's fold is
written by the server in the append's own statement, from the position it finds - one transaction, one WAL flush,
one exchange, whoever appended last. The append lock that orders positions orders these folds too; they only try a
shared hold of the read model's own advisory lock, and leave their fold to a catch-up that holds it exclusively. A
catch-up (a read model behind the log: appends by a store with no read model open, a fold an append left, or the
first open) runs in transactions of its own, reads the log through the store, and moves the checkpoint with the
rows: a short one under the append lock too (so, like an append, it never runs beside one), a long one under the
read model's lock alone (appends never wait for it). A page is one statement, so it reads one snapshot: the current
rows valid at P, the past rows valid at P, and the window's floor; a walk's first page adds the freshness check (is
the checkpoint the log's head?) to the same statement.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import sql

from events.errors import StoreError
from events.postgres_sql import lock_key, one
from registry.backend import Backend
from registry.filters import ListFilter, bound
from registry.model import SessionState
from registry.readmodel import DEFAULT_WINDOW, PAST_WINDOW, Page, PastWindow, ReadModel, ReadModelFault, StoredTables
from registry.readmodel.guard import as_they_are
from registry.readmodel.keys import Keyed, Seal
from registry.readmodel.postgres_fold import IN_TRANSACTION, AppendFold
from registry.readmodel.postgres_sql import DESCRIBE, PageShape, Statements
from registry.readmodel.postgres_usage import UsageStatements
from registry.readmodel.schema import STORED_COLUMNS, TABLES, FoundObject, FoundSchema, prepare_tables, schema_problems
from registry.readmodel.tables import (
    SnapshotPlan,
    checked_meta,
    checked_positions,
    fold_chunk,
    initial_meta,
    matches_log,
    merge_pages,
    record_log_shorter,
)
from registry.readmodel.usage_tables import UsageGroup, UsageQuery
from registry.snapshot import save_encoded_snapshot

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from events.postgres import PostgresStore

    Connection = psycopg.Connection[TupleRow]


__all__ = ["PostgresReadModel"]


_DROP: Final = {
    "index": "INDEX",
    "view": "VIEW",
    "materialized view": "MATERIALIZED VIEW",
    "sequence": "SEQUENCE",
    "foreign table": "FOREIGN TABLE",
    "trigger": "TRIGGER",
    "rule": "RULE",
}
"""How each kind of object the catalogue reports is dropped (any other: a table)."""

_MOVING: Final = 16
"""Later pages that send the time-travel statement with the one that reads the current rows, after one found the
checkpoint moved since its walk began."""


log = logging.getLogger(__name__)


def _cut(rows: list[Any], as_of: int, limit: int, seal: Seal) -> Page:
    """A page from the rows of a page query: current rows (parts 0 and 3), past rows (1), the floor (2)."""
    parts: tuple[list[Keyed], list[Keyed], list[Keyed], list[Keyed]] = ([], [], [], [])
    floor = 0
    for part, rank, session_id, state in rows:
        if part == 2:
            floor = rank
        else:
            parts[part].append((rank, session_id, state))
    current = parts[0] if not parts[3] else list(heapq.merge(parts[0], parts[3], key=lambda row: row[:2]))
    states, more = merge_pages(current, parts[1], limit, seal)
    return Page(states, more, as_of >= floor)


class PostgresReadModel(AppendFold, ReadModel, StoredTables):
    """``rm_*`` tables in the store's PostgreSQL schema, shared by every process and host."""

    @property
    def tables(self) -> StoredTables:
        return self

    def __init__(
        self, backend: Backend, store: PostgresStore, *, window: int = DEFAULT_WINDOW, catch_up: bool = True
    ) -> None:
        self.window = window
        self._backend = backend
        self._seal = Seal(backend.seal_key())
        self._store = store
        self._sql = Statements(store.schema)
        self._usage_sql = UsageStatements(store.schema)
        self._key = lock_key("read-model", store.schema)
        self._position = 0
        self._pending = None
        self._recent = None
        self._known_writes = None
        self._placing = None
        self._seen = {}
        self._moving = 0  # later pages still to send both statements at once (see _later_page)
        store.run(functools.partial(self._prepare, repair=catch_up))
        if catch_up:
            self.catch_up()
        else:
            with as_they_are():  # tables as they are: verify reports what is wrong
                self._position = self._meta()["checkpoint"]
        self._remove_hook: Callable[[], None] = lambda: None
        self._guard_function = False
        if not store.read_only:
            self._guard_function = store.run(self._define_guard)
            self._remove_hook = store.add_commit_hook(self)

    def close(self) -> None:
        self._remove_hook()

    # -- schema ---------------------------------------------------------------------------------------

    def _describe(self, conn: Connection) -> FoundSchema:
        """The objects on ``rm_*`` tables (one catalogue query) and ``rm_meta``'s rows as they are."""
        objects = {
            name: FoundObject(kind, table, definition or "", tuple(columns or ()) if kind == "table" else ())
            for name, kind, table, definition, columns in conn.execute(DESCRIBE, (self._store.schema,))
        }
        meta: dict[str, int] | None = None
        found = objects.get("rm_meta")
        if found is not None and found.kind == "table" and found.columns == ("key", "value"):
            meta = {key: int(value) for key, value in conn.execute(self._sql.meta).fetchall() if value is not None}
        return FoundSchema(objects, meta)

    def _problems(self, found: FoundSchema) -> list[str]:
        return schema_problems(found, "postgresql", self._seal.key_id)

    def schema_problems(self) -> list[str]:
        return self._problems(self._store.run(self._describe))

    def _matches_log(self, conn: Connection) -> bool:
        """Whether the tables' checkpoint is a position of this log with the chain link they recorded."""
        return matches_log(
            dict(conn.execute(self._sql.meta).fetchall()), lambda at: conn.execute(self._sql.chain, (at,)).fetchone()
        )

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
            problems=self._problems,
            matches_log=lambda: self._matches_log(conn),
            exclusively=exclusively,
            create=lambda: self._create(conn),
            repair=repair,
            before_rebuild=lambda: record_log_shorter(
                self._backend, dict(conn.execute(self._sql.meta).fetchall()), self._store.head()
            ),
        )

    def _create(self, conn: Connection) -> None:
        """Replace whatever is on ``rm_*`` tables (stray, partial or damaged objects too) with empty tables."""
        schema = sql.Identifier(self._store.schema)
        found = self._describe(conn).objects
        names = {name: FoundObject("table", name, "") for name in (table.name for table in TABLES)}
        for name, what in sorted({**names, **found}.items(), key=lambda item: item[1].kind.endswith("table")):
            kind = _DROP.get(what.kind, "TABLE")
            if kind in ("TRIGGER", "RULE"):
                on = sql.SQL(" ON {}.{}").format(schema, sql.Identifier(what.table))
                conn.execute(sql.SQL(f"DROP {kind} IF EXISTS {{}}{{}}").format(sql.Identifier(name), on))
            else:
                conn.execute(sql.SQL(f"DROP {kind} IF EXISTS {{}}.{{}}").format(schema, sql.Identifier(name)))
        for statement in self._sql.create:
            conn.execute(statement)
        conn.cursor().executemany(self._sql.insert_meta, initial_meta(self._seal))

    def _define_guard(self, conn: Connection) -> bool:
        """Define the guard function ``write_known`` calls, unless it is there; False when this role may not (the
        guard then goes as an anonymous block). Definitions are serialised by an advisory lock of their own:
        two concurrent ``CREATE OR REPLACE FUNCTION`` of one function fail ("tuple concurrently updated")."""
        exists = self._sql.guard_exists, (self._store.schema,)
        if one(conn.execute(*exists))[0]:
            return True
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("guard-function", self._store.schema),))
                if not one(conn.execute(*exists))[0]:
                    conn.execute(self._sql.define_guard)
        except psycopg.errors.InsufficientPrivilege as exc:
            log.info("%s: could not define the read model's guard function (%s)", self._store.location, exc)
            return False
        return True

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
        plan = SnapshotPlan(self._backend, checkpoint, head, self._dump)
        long = False
        while checkpoint < head and (to is None or checkpoint < to):
            short = head - checkpoint <= IN_TRANSACTION
            long = long or not short
            checkpoint, head = self._store.run(functools.partial(self._catch_up_chunk, short=short))
            self._position = checkpoint
            plan.passed(checkpoint)
        if long:
            self._analyze()
        return self._position

    def _analyze(self) -> None:
        """Fresh planner statistics once a long catch-up wrote many rows (autovacuum may take minutes to)."""
        try:
            self._store.run(lambda conn: conn.execute(self._sql.analyze))
        except StoreError as exc:  # e.g. not the tables' owner: the pages are right, only maybe slower
            log.info("could not ANALYZE the read model's tables: %s", exc)

    def _dump(self, checkpoint: int) -> None:
        """A kept snapshot at ``checkpoint`` from the rows as they are (nothing if the tables moved on)."""
        events = self._backend.events_up_to(checkpoint)

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
                        self._backend,
                        checkpoint,
                        (self._seal.unsealed(bytes(state)) for (state,) in rows),
                        count,
                        events=events,
                    )

        self._store.run(dump)

    def _catch_up_chunk(self, conn: Connection, *, short: bool) -> tuple[int, int]:
        """One transaction of a catch-up, under the read model's lock. A short one (what an append's own fold
        would take on) holds the store's append lock too, taken first as appends take it: it then never runs
        beside an append, whose try of the read model's lock would fail and leave its fold to yet another
        catch-up - under 4 concurrent writers, half of the appends did, each catch-up making the next; when
        another catch-up holds the read model, it waits for that one to end and looks again. A long
        one (a first open, a rebuild) does not stop appends: it takes the read model's lock alone, and appends
        meanwhile leave their folds to it. Either commits without waiting for its WAL flush: its rows are derived
        from committed events, and a server crash that lost them leaves the read model behind (a later commit
        that survived implies this one did), which the next catch-up folds again."""
        if short:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._store.append_lock_key,))
                if one(conn.execute(self._sql.try_lock, (self._key,)))[0]:
                    return self._fold_chunk(conn)
            # Another catch-up holds the read model: wait for it to end (holding nothing an append needs), then
            # the caller looks again - it may have folded what this one wanted.
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (self._key,))
            checkpoint, _floor, head = checked_positions(conn.execute(self._sql.check).fetchone())
            return checkpoint, head
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
            return self._fold_chunk(conn)

    def _fold_chunk(self, conn: Connection) -> tuple[int, int]:
        """Fold up to 10,000 positions after the checkpoint, in the caller's transaction (the lock held)."""
        conn.execute("SET LOCAL synchronous_commit = off")
        checkpoint, floor, head = checked_positions(conn.execute(self._sql.check).fetchone())
        if checkpoint >= head:
            return checkpoint, head
        chunk = fold_chunk(
            self._store.scan(checkpoint, until=head),
            lambda ids: self._load(conn, ids),
            checkpoint=checkpoint,
            head=head,
            floor_at=functools.partial(self._floor, floor),
            seal=self._seal,
        )
        if chunk is None:  # pragma: no cover - positions up to the head are committed
            return checkpoint, head
        folded, new_floor = chunk
        (link,) = conn.execute(self._sql.chain, (folded.position,)).fetchone() or (None,)
        with conn.cursor() as cursor:
            self._queue(cursor, folded, floor, new_floor, None if link is None else bytes(link))
        return folded.position, head

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

    def page(self, *, as_of: int, after: tuple[int, str] | None, where: ListFilter, limit: int) -> Page:
        filtered = bound(where)
        params: dict[str, Any] = {**filtered.params, "p": as_of, "rank": None, "sid": None}
        shape = PageShape(narrowing=filtered.narrowing, after=after is not None, include=filtered.include, kind="as_of")
        query = self._sql.sized(self._sql.page(shape), limit + 1)
        if after is not None:
            params["rank"], params["sid"] = after
            if as_of == self._position:  # as far as this process knows, nothing changed since the walk began
                unchanged = self._sql.sized(self._sql.page(shape._replace(kind="unchanged")), limit + 1)
                return self._store.run(functools.partial(self._later_page, params, unchanged, query, limit))
        rows = self._store.run(lambda conn: conn.execute(query, params, binary=True).fetchall())
        return _cut(rows, as_of, limit, self._seal)

    def _later_page(self, params: dict[str, Any], unchanged: bytes, query: bytes, limit: int, conn: Connection) -> Page:
        """A later page of a walk as of the checkpoint, from the current rows alone (``unchanged_pages``, which
        the server plans once), with the checkpoint in the same snapshot; if the checkpoint has moved past the
        walk's position (another process wrote), the page through rm_past (``query``) on the same connection,
        and this process's position moves, so the walk's next pages go there at once. When the last later page
        found the checkpoint moved (writers at work), both statements go in one exchange for the next
        ``_MOVING`` later pages that find it still: one round trip, for the time-travel statement's planning in the
        server on pages that turn out not to need it (its cost: docs/scale.md)."""
        with conn.pipeline():
            rows = conn.execute(unchanged, params, binary=True)
            through_past = conn.execute(query, params, binary=True) if self._moving else None
        found = rows.fetchall()
        checkpoint = next((rank for part, rank, _sid, _state in found if part == 4), None)
        if checkpoint == params["p"]:
            self._moving = max(self._moving - 1, 0)
            return _cut([row for row in found if row[0] != 4], params["p"], limit, self._seal)
        self._moving = _MOVING
        if isinstance(checkpoint, int):
            self._position = max(self._position, checkpoint)
        past = through_past.fetchall() if through_past is not None else conn.execute(query, params, binary=True)
        return _cut(list(past), params["p"], limit, self._seal)

    def first_page(self, *, where: ListFilter, limit: int) -> tuple[int, Page]:
        """The first page as of the head, with its freshness check, in one statement (one round trip) when the
        tables are caught up; else a catch-up first."""
        filtered = bound(where)
        params = filtered.params
        shape = PageShape(narrowing=filtered.narrowing, after=False, include=filtered.include, kind="first")
        query = self._sql.sized(self._sql.page(shape), limit + 1)
        rows = self._store.run(lambda conn: conn.execute(query, params, binary=True).fetchall())
        found = [(int(rank), int(sid)) for part, rank, sid, _ in rows if part == 4 and rank is not None]
        if not found:
            raise ReadModelFault("the read model's rm_meta has no checkpoint row")
        checkpoint, head = found[0]
        if checkpoint < head:
            as_of = self.catch_up()
            return as_of, self.page(as_of=as_of, after=None, where=where, limit=limit)
        self._position = max(self._position, checkpoint)
        return checkpoint, _cut([row for row in rows if row[0] != 4], checkpoint, limit, self._seal)

    def get(self, session_id: str) -> SessionState | None:
        recent = self._recent
        if recent is not None and recent[0] == self._position and session_id in recent[2]:
            return self._seal.open(recent[2][session_id])  # this process folded it, and nothing moved since
        row = self._store.run(lambda conn: conn.execute(self._sql.get, (session_id,)).fetchone())
        if row is None:
            return None
        state = self._seal.open_at(*row)
        self._saw({session_id: row[0]})
        return state

    def last_seen(self, session_id: str) -> SessionState | None:
        blob = self._seen.get(session_id)
        return self.get(session_id) if blob is None else self._seal.open(blob)

    def forks(self, session_id: str) -> list[SessionState]:
        rows = self._store.run(lambda conn: conn.execute(self._sql.forks, (session_id,)).fetchall())
        return [self._seal.open(state) for (state,) in rows]

    def state_at(self, session_id: str, position: int) -> SessionState | PastWindow | None:
        rows = self._store.run(
            lambda conn: conn.execute(self._sql.state_at, {"sid": session_id, "p": position}).fetchall()
        )
        current = next((row for row in rows if row[0] == 0), None)
        if current is not None and current[1] <= position:
            return self._seal.open_at(current[2], current[1])
        meta = {part: value for part, value, _state in rows if part >= 2}
        if 2 not in meta or 3 not in meta:
            raise ReadModelFault("the read model's rm_meta has no checkpoint or floor row")
        if position < meta[3] or position > meta[2]:
            return PAST_WINDOW
        past = next((row for row in rows if row[0] == 1), None)
        return None if past is None else self._seal.open(past[2])

    def count(self) -> int:
        return self._meta()["live"]

    def cwd_counts(self) -> dict[str, int]:
        return dict(self._store.run(lambda conn: conn.execute(self._sql.cwd_counts).fetchall()))

    def usage(self, query: UsageQuery) -> list[UsageGroup]:
        statement, params = self._usage_sql.query(query)
        rows = self._store.run(lambda conn: conn.execute(statement, params).fetchall())
        return [(row[0], row[1], row[2], *map(int, row[3:])) for row in rows]  # sum(bigint) is numeric

    def archived_count(self, cwd: str | None = None) -> int:
        if cwd is None:
            return self._meta()["archived"]  # kept as the live count is
        query, params = self._sql.archived_cwd, {"cwd": cwd}
        return int(self._store.run(lambda conn: conn.execute(query, params).fetchone())[0])  # type: ignore[index]

    def stored(self, table: str) -> Iterator[tuple[Any, ...]]:
        columns = STORED_COLUMNS[table]
        query = sql.SQL("SELECT {} FROM {}.{}").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(self._store.schema), sql.Identifier(table)
        )
        rows = self._store.run(lambda conn: conn.execute(query).fetchall())
        return (tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows)

    def storage_problems(self) -> list[str]:
        """None looked for: PostgreSQL checks its pages itself, and its index checks (``amcheck``) are an extension
        the store does not require."""
        return []

    def checkpoint_matches_log(self) -> bool:
        """Whether the checkpoint is a position of this log with the chain link the tables recorded there."""
        return self._store.run(self._matches_log)

    def stored_meta(self) -> dict[str, int]:
        rows = self._store.run(lambda conn: conn.execute(self._sql.meta).fetchall())
        return {key: int(value) for key, value in rows if value is not None}

    def states(self) -> Iterator[SessionState]:
        rows = self._store.run(lambda conn: conn.execute(self._sql.states).fetchall())
        return (self._seal.open(state) for (state,) in rows)
