"""The read model as tables in the PostgreSQL store's own schema (see ``tables.py`` for the layout and rules;
``postgres_sql.py`` for the statements).

Every process and host on the store shares these tables. An append folds itself into them in its own transaction
(the store's commit hook, ``events.postgres_write``): its reads go in the append's first exchange, its writes in
the second with the events and the COMMIT - one transaction, one WAL flush, no round trip of its own. The
append lock that orders positions orders these folds too; they only try a shared hold of the read model's own
advisory lock, and leave their fold to a catch-up that holds it exclusively. A catch-up (a read model behind the
log: appends by a store with no read model open, a fold an append left, or the first open) runs in transactions
of its own, reads the log through the store, and moves the checkpoint with the rows: a short one under the append
lock too (so, like an append, it never runs beside one), a long one under the read model's lock alone (appends
never wait for it). A page is one statement, so it
reads one snapshot: the current rows valid at P, the past rows valid at P, and the window's floor; a walk's
first page adds the freshness check (is the checkpoint the log's head?) to the same statement.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec
import psycopg
from psycopg import sql

from events.errors import StoreError
from events.model import Event, LogEntry
from events.postgres_sql import lock_key, one
from registry.model import ListFilter, SessionState
from registry.projection import Page
from registry.readmodel import DEFAULT_WINDOW, PAST_WINDOW, PastWindow, ReadModel, ReadModelFault
from registry.readmodel.guard import as_they_are
from registry.readmodel.postgres_sql import COLUMNS, INDEXES, TABLES, Statements
from registry.readmodel.schema import FoundSchema, prepare_tables, schema_problems
from registry.readmodel.tables import (
    INITIAL_META,
    CurrentRow,
    Fold,
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
    record_log_shorter,
    unsealed,
)
from registry.snapshot import EVERY, events_up_to, save_encoded_snapshot

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from events.postgres import PostgresStore

    Connection = psycopg.Connection[TupleRow]
    Cursor = psycopg.Cursor[TupleRow]


__all__ = ["PostgresReadModel"]

log = logging.getLogger(__name__)

_FLOOR_STEP: Final = 1_000  # positions the window's floor moves by at a time (see _floor)
_IN_TRANSACTION: Final = 10_000  # positions an append's own transaction folds at most (more: a catch-up of its own)
_NOW: Final = 2**62  # "as of" the checkpoint itself: every current row is valid then, and no past row
_RECENT: Final = 10_000  # states this process folded that ``get`` answers without a query (while nothing moves)
_event_decoder = msgspec.msgpack.Decoder(Event)
# The parameter names of one row in ``Statements.fold_one``, in ``CurrentRow`` and ``PastRow`` order.
_CURRENT_KEYS: Final = ("sid", "cwd", "rank", "live", "from", "state", "archived", "agent")
_PAST_KEYS: Final = ("p_sid", "p_cwd", "p_rank", "p_live", "p_from", "p_to", "p_state", "p_archived", "p_agent")


def _cut(rows: list[Any], as_of: int, limit: int) -> Page:
    """A page from the rows of a page query: current rows (parts 0 and 3), past rows (1), the floor (2)."""
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


class PostgresReadModel(ReadModel):
    """``rm_*`` tables in the store's PostgreSQL schema, shared by every process and host."""

    kind = "tables"

    def __init__(self, store: PostgresStore, *, window: int = DEFAULT_WINDOW, catch_up: bool = True) -> None:
        self.window = window
        self._store = store
        self._sql = Statements(store.schema)
        self._key = lock_key("read-model", store.schema)
        self._position = 0
        # Folded by the append being committed: checkpoint, the one before, floor, the rows' states.
        self._pending: tuple[int, int, int, dict[str, bytes]] | None = None
        # What this process's appends folded since another writer last moved the tables: checkpoint, floor, states.
        self._recent: tuple[int, int, dict[str, bytes]] | None = None
        self._known_writes: tuple[Fold, int, bytes] | None = None  # a fold from what is known, to queue
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
        """The ``rm_*`` tables, columns, indexes (primary keys aside) and ``rm_meta`` rows as they are."""
        schema = self._store.schema
        tables: dict[str, tuple[str, ...]] = {}
        for table, column in conn.execute(COLUMNS, (schema,)).fetchall():
            tables[table] = (*tables.get(table, ()), column)
        indexes = {name: (table, tuple(columns)) for name, table, columns in conn.execute(INDEXES, (schema,))}
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
        stray = {table for table, _column in conn.execute(COLUMNS, (self._store.schema,)).fetchall()}
        for table in sorted(stray - set(TABLES)):
            conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {}.{}").format(sql.Identifier(self._store.schema), sql.Identifier(table))
            )
        for statement in (*self._sql.drop, *self._sql.create):
            conn.execute(statement)
        conn.cursor().executemany(self._sql.insert_meta, INITIAL_META)

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
        plan = SnapshotPlan(self._store, checkpoint, head, self._dump)
        long = False
        while checkpoint < head and (to is None or checkpoint < to):
            short = head - checkpoint <= _IN_TRANSACTION
            long = long or not short
            checkpoint, head = self._store.run(functools.partial(self._catch_up_chunk, short=short))
            self._position = checkpoint
            plan.passed(checkpoint)
        if long:
            self._analyze()
        return self._position

    def _floor(self, floor: int, position: int) -> int:
        """The window's floor once the read model is at ``position``: ``window`` behind it, moved in steps of
        ``_FLOOR_STEP`` positions, so that past versions are pruned once a step rather than by every write (a
        prune's plan depends on statistics: with fresh ones, one per write cost 4 ms at 100k sessions and 30 ms at
        1M, where a step's prune is paid once in a thousand writes). Walks stay exact over the window at least."""
        return max(floor, (position - self.window) // _FLOOR_STEP * _FLOOR_STEP)

    def _analyze(self) -> None:
        """Fresh planner statistics once a long catch-up wrote many rows (autovacuum may take minutes to)."""
        try:
            self._store.run(lambda conn: conn.execute(self._sql.analyze))
        except StoreError as exc:  # e.g. not the tables' owner: the pages are right, only maybe slower
            log.info("could not ANALYZE the read model's tables: %s", exc)

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
        fresh = checkpoint == 0
        for chunk in chunks(self._store.scan(checkpoint, until=head)):
            new_floor = head if fresh else self._floor(floor, chunk[-1].position)
            folded = fold_stretch(
                chunk, lambda ids: self._load(conn, ids), checkpoint=checkpoint, keep_past_after=new_floor
            )
            (link,) = conn.execute(self._sql.chain, (folded.position,)).fetchone() or (None,)
            with conn.cursor() as cursor:
                self._queue(cursor, folded, floor, new_floor, None if link is None else bytes(link))
            return folded.position, head
        return checkpoint, head  # pragma: no cover - positions up to the head are committed

    # -- in the append's own transaction ----------------------------------------------------------------

    def look_up(self, conn: Connection, session_ids: list[str]) -> object:
        """The commit hook's look-ups, queued in the append's first exchange (``events.postgres_write``): the read
        model's lock, if free (a catch-up holding it folds these appends later instead), its checkpoint, and the
        appended sessions' rows."""
        return (
            conn.execute(self._sql.try_lock, (self._key,)),
            conn.execute(self._sql.meta),
            conn.execute(self._sql.load, (session_ids,)),
        )

    def in_transaction(
        self, conn: Connection, looked_up: object, written: list[LogEntry], head_before: int, chain: bytes
    ) -> None:
        """Fold the append's entries into the tables in its own transaction: the rows and the checkpoint commit
        with the events, or not at all. Appends are serialised by the store's lock, so the fold needs no lock of
        its own beyond excluding a concurrent catch-up; a read model found behind by at most ``_IN_TRANSACTION``
        positions folds the gap here too, further behind it is left to ``catch_up``."""
        self._pending = None
        if not written:
            return
        locked, meta_rows, loaded = cast("tuple[Cursor, Cursor, Cursor]", looked_up)
        row = locked.fetchone()
        if row is None or not row[0]:
            return
        meta: dict[str, int] = dict(meta_rows.fetchall())
        if not isinstance(meta.get("checkpoint"), int) or not isinstance(meta.get("floor"), int):
            return  # damaged tables: the read model's guard finds them when it next reads, and mends them
        checkpoint, floor = meta["checkpoint"], meta["floor"]
        if checkpoint > head_before or head_before - checkpoint > _IN_TRANSACTION:
            return
        try:
            states = {session_id: decode_state(state) for session_id, state in loaded.fetchall()}
            entries: list[LogEntry] = written
            if checkpoint < head_before:  # behind (appends that bypassed the fold): the gap first, in this transaction
                gap = conn.execute(self._sql.scan, (checkpoint, head_before), binary=True).fetchall()
                entries = [LogEntry(p, sid, v, _event_decoder.decode(d)) for p, sid, v, d in gap] + written
                states = {}

            def load(session_ids: list[str]) -> dict[str, SessionState]:
                missing = [sid for sid in session_ids if sid not in states]
                return {**{sid: states[sid] for sid in session_ids if sid in states}, **self._load(conn, missing)}

            position = written[-1].position
            new_floor = position if checkpoint == 0 else self._floor(floor, position)
            folded = fold_stretch(entries, load, checkpoint=checkpoint, keep_past_after=new_floor)
        except Exception:  # derived data: the append commits without it, and a catch-up folds it later
            log.warning(
                "%s: the read model could not fold an append in its transaction", self._store.location, exc_info=True
            )
            return
        with conn.cursor() as cursor:
            self._queue(cursor, folded, floor, new_floor, chain)
        self._pending = (folded.position, checkpoint, new_floor, {row.session_id: row.state for row in folded.current})

    def fold_known(self, written: list[LogEntry], head_before: int, chain: bytes) -> bool:
        """The commit hook's fold without reads, for an append sent in one exchange: possible when this process's
        own last fold left the tables at ``head_before`` and it knows the state of every session appended to
        (or the append creates it). False: the store reads first instead."""
        self._pending = self._known_writes = None
        recent = self._recent
        if not written or recent is None or recent[0] != head_before:
            return False
        checkpoint, floor, rows = recent
        first: dict[str, int] = {}
        for entry in written:
            first.setdefault(entry.session_id, entry.version)
        if any(version != 1 and session_id not in rows for session_id, version in first.items()):
            return False
        position = written[-1].position
        new_floor = self._floor(floor, position)
        try:
            folded = fold_stretch(
                written,
                lambda ids: {sid: decode_state(rows[sid]) for sid in ids if sid in rows and first[sid] != 1},
                checkpoint=checkpoint,
                keep_past_after=new_floor,
            )
        except Exception:
            log.warning("%s: could not fold an append from what it knows", self._store.location, exc_info=True)
            return False
        self._known_writes = (folded, floor, chain)
        self._pending = (folded.position, checkpoint, new_floor, {row.session_id: row.state for row in folded.current})
        return True

    def write_known(self, conn: Connection) -> None:
        """Queue ``fold_known``'s writes, behind a guard that fails the transaction (serialization_failure: the
        store then reads first) unless the read model's lock is free and the checkpoint and floor are still
        what this process left - a catch-up or a rebuild elsewhere may have moved them."""
        assert self._known_writes is not None and self._pending is not None
        folded, floor, chain = self._known_writes
        with conn.cursor() as cursor:
            if self._guard_function:
                cursor.execute(self._sql.guard, (self._key, self._pending[1], floor))
            else:
                cursor.execute(self._sql.guard_block(self._key, self._pending[1], floor))
            self._queue(cursor, folded, floor, self._pending[2], chain)

    def _queue(self, cursor: Cursor, folded: Fold, floor: int, new_floor: int, chain: bytes | None) -> None:
        """A fold's rows and meta (checkpoint, floor, the checkpoint's chain link, live count): what a catch-up
        writes and what an append writes in its own transaction. An append's usual fold (a row, maybe the past
        version it replaced) goes as one statement: fewer statements is less of psycopg's time per append, which
        under contention is spent with the append lock held."""
        meta: dict[str, object] = {
            "c": folded.position,
            "f": new_floor,
            "a": anchor_value(chain),
            "d": folded.live_delta,
        }
        if new_floor > floor:
            cursor.execute(self._sql.prune, (floor, new_floor))
        if len(folded.current) <= 1 and len(folded.past) <= 1:
            for row in folded.current:
                meta |= dict(zip(_CURRENT_KEYS, row, strict=True))
            for past in folded.past:
                meta |= dict(zip(_PAST_KEYS, past, strict=True))
            cursor.execute(self._sql.fold_one[(bool(folded.current), bool(folded.past))], meta)
            return
        if folded.current:
            cursor.executemany(self._sql.upsert, folded.current)
        if folded.past:
            cursor.executemany(self._sql.insert_past, folded.past)
        cursor.execute(self._sql.set_all_meta, meta)

    def committed(self) -> None:
        pending, self._pending = self._pending, None
        self._known_writes = None
        if pending is None:
            return
        position, before, floor, rows = pending
        recent = self._recent
        if recent is not None and recent[0] == before and len(recent[2]) < _RECENT:
            rows = {**recent[2], **rows}  # no other writer between this process's last fold and this one
        self._recent = (position, floor, rows)
        self._position = max(self._position, position)
        if position // EVERY != before // EVERY:
            SnapshotPlan(self._store, before, position, self._dump).passed(position)

    def _load(self, conn: Connection, session_ids: list[str]) -> dict[str, SessionState]:
        if not session_ids:
            return {}
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

    def page(self, *, as_of: int, after: tuple[int, str] | None, where: ListFilter, limit: int) -> Page:
        cwd, archived, agent = where
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
        rows = self._store.run(lambda conn: conn.execute(query, params, binary=True).fetchall())
        return _cut(rows, as_of, limit)

    def first_page(self, *, where: ListFilter, limit: int) -> tuple[int, Page]:
        """The first page as of the head, with its freshness check, in one statement (one round trip) when the
        tables are caught up; else a catch-up first."""
        cwd, archived, agent = where
        params = {"cwd": cwd, "agent": agent, "archived": archived == "only", "p": _NOW, "n": limit + 1}
        query = self._sql.first_pages[(cwd is not None, agent is not None, archived == "include")]
        rows = self._store.run(lambda conn: conn.execute(query, params, binary=True).fetchall())
        found = [(int(rank), int(sid)) for part, rank, sid, _ in rows if part == 4 and rank is not None]
        if not found:
            raise ReadModelFault("the read model's rm_meta has no checkpoint row")
        checkpoint, head = found[0]
        if checkpoint < head:
            as_of = self.catch_up()
            return as_of, self.page(as_of=as_of, after=None, where=where, limit=limit)
        self._position = max(self._position, checkpoint)
        return checkpoint, _cut([row for row in rows if row[0] != 4], checkpoint, limit)

    def get(self, session_id: str) -> SessionState | None:
        recent = self._recent
        if recent is not None and recent[0] == self._position and session_id in recent[2]:
            return decode_state(recent[2][session_id])  # this process folded it, and nothing moved since
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

    def archived_count(self, cwd: str | None = None) -> int:
        query, params = (self._sql.archived_count, {}) if cwd is None else (self._sql.archived_cwd, {"cwd": cwd})
        return int(self._store.run(lambda conn: conn.execute(query, params).fetchone())[0])  # type: ignore[index]

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
