"""The read model as tables in the SQLite store's own file (see ``tables.py`` for the layout and its rules;
``sqlite_sql.py`` for the statements).

Connections are the read model's own, opened on the store's file (``SqliteStore.connect``): a writer, used under
a process lock and the database's write lock (``BEGIN IMMEDIATE``), and one reader per thread. The catch-up
commits with ``synchronous=NORMAL``: the tables are derived, the log's own commits stay as durable as the store
was told, and a catch-up lost to a power cut is simply folded again (its checkpoint was lost with it).
"""

from __future__ import annotations

import contextlib
import heapq
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from events.errors import StoreFormatError
from events.logger import Logger
from events.model import LogEntry
from events.sqlite import SqliteStore, ThreadReaders
from registry.backend import Backend
from registry.filters import ListFilter
from registry.model import SessionState
from registry.readmodel import DEFAULT_WINDOW, PAST_WINDOW, Page, PastWindow, ReadModel, ReadModelFault, StoredTables
from registry.readmodel import sqlite_sql as sql
from registry.readmodel.guard import as_they_are
from registry.readmodel.keys import HeldKey, Keyed, Seal, checked_states
from registry.readmodel.schema import prepare_tables
from registry.readmodel.sqlite_schema import SqliteStoredTables, create
from registry.readmodel.tables import (
    SnapshotPlan,
    anchor_value,
    checked_meta,
    checked_positions,
    fold_chunk,
    initial_meta,
    merge_pages,
    record_log_shorter,
)
from registry.readmodel.usage_tables import UsageGroup, UsageQuery, add_to_sqlite, query_statement

__all__ = ["SqliteReadModel"]

log = Logger(__name__)

_IN_TRANSACTION: Final = 10_000  # positions an append's own transaction folds at most (more: a catch-up of its own)


def _by_key(row: Keyed) -> tuple[int, str]:
    return row[0], row[1]


def _known_page(rows: list[Keyed], limit: int, seal: Seal) -> Page:
    """The page a ``known`` statement (``sqlite_sql.page_query``) found rows for: as of its ``:p``, which is at or
    after the floor."""
    return Page(checked_states(rows[:limit], seal), len(rows) > limit, True)


class SqliteReadModel(ReadModel):
    """``rm_*`` tables in a SQLite store's file. Use ``open`` (it may decline for a read-only file)."""

    @property
    def tables(self) -> StoredTables:
        return self._tables

    @property
    def _seal(self) -> Seal:
        return self._key.seal

    def __init__(self, backend: Backend, store: SqliteStore, writer: sqlite3.Connection | None, *, window: int) -> None:
        self.window = window
        self._backend = backend
        self._key = HeldKey(backend)
        self._store = store
        self._writer = writer
        self._write_lock = threading.Lock()
        self._readers = ThreadReaders(store.connect)
        self._tables = SqliteStoredTables(store, self._reader, self._key)
        self._position = 0
        self._head = 0
        self._pending: int | None = None
        self._plan: SnapshotPlan | None = None
        self._remove_hook: Callable[[], None] = lambda: None

    @classmethod
    def open(
        cls, backend: Backend, store: SqliteStore, *, window: int = DEFAULT_WINDOW, catch_up: bool = True
    ) -> SqliteReadModel | None:
        """The tables of ``store`` (created, or rebuilt when an older version made them), caught up to the log;
        ``backend`` is the store's.

        None for a read-only store whose tables are missing, outdated or behind its log: fold it in memory.
        """
        read_only = store.read_only
        writer = None if read_only else store.connect()
        model = cls(backend, store, writer, window=window)
        try:
            if writer is None:
                if model._tables.schema_problems() or not model._tables.checkpoint_matches_log() or model._behind():
                    log.warning(
                        "%s is read-only and its read model is missing or behind its log; folding the log"
                        " in memory instead",
                        store.path,
                    )
                    model.close()
                    return None
            else:
                with store.translate_errors():
                    writer.execute("PRAGMA synchronous=NORMAL")
                    writer.execute("PRAGMA cache_size=-65536")  # 64 MiB: index inserts in session-id order are random
                    model._prepare(repair=catch_up)  # catch_up=False: look at the tables as they are (verify)
                if catch_up:
                    model.catch_up()
                else:
                    with as_they_are():  # tables as they are: verify reports what is wrong
                        model._behind()  # learn the checkpoint
                model._remove_hook = store.add_commit_hook(model)
        except BaseException:
            model.close()
            raise
        return model

    # -- schema ---------------------------------------------------------------------------------------

    def _prepare(self, *, repair: bool = True) -> None:
        """Create, rebuild or refuse the tables (``tables.prepare_tables``) under the database's write lock."""
        db = self._writer
        assert db is not None

        @contextlib.contextmanager
        def exclusively() -> Iterator[None]:
            with self._write_lock:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield
                    db.execute("COMMIT")
                finally:
                    if db.in_transaction:
                        db.execute("ROLLBACK")

        prepare_tables(
            self._store.path,
            describe=lambda: self._tables.describe(db),
            problems=self._tables.problems,
            matches_log=lambda: self._tables.matches_log(db),
            exclusively=exclusively,
            create=lambda: self._create(db),
            repair=repair,
            before_rebuild=lambda: record_log_shorter(
                self._backend, dict(db.execute(sql.META).fetchall()), self._store.head()
            ),
        )

    def _create(self, db: sqlite3.Connection) -> None:
        create(db)
        db.executemany(sql.SET_META, initial_meta(self._seal))

    # -- connections ----------------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        return self._readers.get()

    def close(self) -> None:
        self._remove_hook()
        self._readers.close()
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    # -- catching up ----------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        return self._position

    def _behind(self) -> bool:
        with self._store.translate_errors():
            checkpoint, _floor, head = checked_positions(self._reader().execute(sql.CHECK).fetchone())
        self._position = checkpoint
        self._head = head or 0
        return bool(self._head > checkpoint)

    def catch_up(self, to: int | None = None) -> int:
        if to is not None and self._position >= to:
            return self._position
        if not self._behind():
            return self._position
        if self._writer is None:
            raise StoreFormatError(self._store.path, "is read-only and its read model is behind its log")
        plan = SnapshotPlan(self._backend, self._position, self._head, self._dump)
        with self._write_lock, self._store.translate_errors():
            db = self._writer
            while True:
                db.execute("BEGIN IMMEDIATE")
                try:
                    done = self._catch_up_chunk(db)
                    db.execute("COMMIT")
                finally:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                plan.passed(self._position)
                if done:
                    return self._position

    def _catch_up_chunk(self, db: sqlite3.Connection) -> bool:
        """Fold up to one chunk of the log past the checkpoint; True when the checkpoint reached the head."""
        checkpoint, floor, head, sealed = db.execute(sql.CHECK_SEALED).fetchone()
        checkpoint, floor, head = checked_positions((checkpoint, floor, head))
        if checkpoint < head:
            self._key.check(sealed)
            checkpoint = self._fold(db, self._store.scan(checkpoint, until=head), checkpoint, floor, head)
        self._position = checkpoint
        return bool(checkpoint >= head)

    def _fold(self, db: sqlite3.Connection, entries: Iterator[LogEntry], checkpoint: int, floor: int, head: int) -> int:
        """Fold one chunk of ``entries`` (the log after ``checkpoint``) into the tables; returns the new checkpoint
        (one chunk per transaction: other writers get their turn)."""
        # Walks from the floor on stay exact: past versions valid after it are kept, older ones pruned.
        chunk = fold_chunk(
            entries,
            lambda ids: self._load(db, ids),
            checkpoint=checkpoint,
            head=head,
            floor_at=lambda position: max(floor, position - self.window),
            seal=self._seal,
        )
        if chunk is None:  # pragma: no cover - the log cannot shrink under the write lock
            return checkpoint
        folded, new_floor = chunk
        db.executemany(sql.UPSERT, folded.current)
        db.executemany(sql.INSERT_PAST, folded.past)
        if folded.usage:
            add_to_sqlite(db, folded.usage)
        if new_floor > floor:
            db.execute(sql.PRUNE, (new_floor,))
        chain = db.execute(sql.CHAIN, (folded.position,)).fetchone()
        db.executemany(
            sql.SET_META,
            [("checkpoint", folded.position), ("floor", new_floor), ("anchor", anchor_value(chain and chain[0]))],
        )
        counts = (("live", folded.live_delta), ("archived", folded.archived_delta))
        moved = [(delta, key) for key, delta in counts if delta]
        if moved:  # a turn moves neither
            db.executemany(sql.ADD_COUNT, moved)
        return folded.position

    # -- in the append's own transaction ----------------------------------------------------------------

    def in_transaction(self, db: sqlite3.Connection, scan: Callable[[int], Iterator[LogEntry]]) -> None:
        """The store's commit hook: fold this transaction's appends into the tables before it commits (one
        commit, one fsync for both). A read model lagging far behind (appends that bypassed it) is left to its
        own catch-up, outside the writer's transaction."""
        self._pending = None
        db.execute("SAVEPOINT read_model")
        try:
            checkpoint, floor, head, sealed = db.execute(sql.CHECK_SEALED).fetchone()
            checkpoint, floor, head = checked_positions((checkpoint, floor, head))
            if checkpoint >= head or head - checkpoint > _IN_TRANSACTION:
                db.execute("RELEASE read_model")
                return
            self._key.check(sealed)
            self._plan = SnapshotPlan(self._backend, checkpoint, head, self._dump)
            self._pending = self._fold(db, scan(checkpoint), checkpoint, floor, head)
            db.execute("RELEASE read_model")
        except (sqlite3.Error, ReadModelFault) as exc:  # derived data: the appends commit, the next reader mends it
            self._pending = None
            db.execute("ROLLBACK TO read_model")
            db.execute("RELEASE read_model")
            log.warning(
                "%s: the read model was not updated with this commit (%s); it is caught up later", self._store.path, exc
            )

    def committed(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self._position = max(self._position, pending)
            if self._plan is not None:
                self._plan.passed(pending)

    def _load(self, db: sqlite3.Connection, session_ids: list[str]) -> dict[str, SessionState]:
        found: dict[str, SessionState] = {}
        for start in range(0, len(session_ids), 500):
            part = session_ids[start : start + 500]
            for session_id, state, at in db.execute(sql.load(len(part)), part):
                found[session_id] = self._seal.open_at(state, at)
        return found

    def reseal(self) -> bool:
        try:
            row = self._reader().execute(sql.SEALED).fetchone()
        except sqlite3.Error:
            return False  # tables too damaged to say: they are rebuilt
        return row is not None and self._key.adopt(row[0])

    def rebuild(self) -> int:
        if self._writer is None:
            raise StoreFormatError(self._store.path, "is read-only: its read model cannot be rebuilt")
        self._key.take_up()  # the tables are sealed with the key the store keeps now, never a lost one
        with self._write_lock, self._store.translate_errors():
            db = self._writer
            db.execute("BEGIN IMMEDIATE")
            try:
                self._create(db)
                db.execute("COMMIT")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
            self._position = 0
        return self.catch_up()

    # -- reading --------------------------------------------------------------------------------------

    def _meta(self, db: sqlite3.Connection) -> dict[str, int]:
        return checked_meta(db.execute(sql.META).fetchall())

    def window_floor(self) -> int:
        with self._store.translate_errors():
            return self._meta(self._reader())["floor"]

    def first_page(self, *, where: ListFilter, limit: int) -> tuple[int, Page]:
        """The first page as of the head: in one statement when the tables are where this process last saw them
        (a ``known`` page), else read in the freshness check's transaction; a catch-up first if behind."""
        known = self._position
        if known:
            params = sql.page_params(where, known, None, limit)
            if not params.bound.include:
                query = sql.page_statement(params, known=True)
                with self._store.translate_errors():
                    found = self._reader().execute(query, params.values).fetchall()
                if found:
                    return known, _known_page(found, limit, self._seal)
        db = self._reader()
        with self._store.translate_errors():
            db.execute("BEGIN")
            try:
                checkpoint, floor, head = checked_positions(db.execute(sql.CHECK).fetchone())
                rows = (
                    None
                    if head > checkpoint
                    else self._rows(db, sql.page_params(where, checkpoint, None, limit), False)
                )
            finally:
                db.execute("COMMIT")
        if rows is None:
            as_of = self.catch_up()
            return as_of, self.page(as_of=as_of, after=None, where=where, limit=limit)
        self._position, self._head = checkpoint, head
        states, more = merge_pages(rows, [], limit, self._seal)
        return checkpoint, Page(states, more, checkpoint >= floor)

    def _rows(self, db: sqlite3.Connection, params: sql.PageParams, dated: bool) -> Iterable[Keyed]:
        """A page's current rows (``dated``: those valid at ``:p``), an ``include`` walk's two halves merged."""
        query = sql.page_statement(params, as_of=dated)
        rows: Iterable[Keyed] = db.execute(query, params.values).fetchall()
        if params.bound.include:  # the other half of the archived index, merged in list order
            other = db.execute(query, {**params.values, "archived": 1}).fetchall()
            rows = heapq.merge(rows, other, key=_by_key)
        return rows

    def page(self, *, as_of: int, after: tuple[int, str] | None, where: ListFilter, limit: int) -> Page:
        params = sql.page_params(where, as_of, after, limit)
        if as_of == self._position and not params.bound.include:  # nothing changed since the walk began, it seems
            query = sql.page_statement(params, known=True)
            with self._store.translate_errors():
                rows = self._reader().execute(query, params.values).fetchall()
            if rows:
                return _known_page(rows, limit, self._seal)
        db = self._reader()
        with self._store.translate_errors():
            db.execute("BEGIN")
            try:
                checkpoint, floor, _head = checked_positions(db.execute(sql.CHECK).fetchone())
                if as_of > checkpoint:
                    raise ValueError(f"as_of={as_of} is past the read model's checkpoint {checkpoint}")
                current = self._rows(db, params, as_of < checkpoint)
                past: list[Keyed] = []
                if as_of < checkpoint and as_of >= floor:
                    query = sql.page_statement(params, one_range=not params.bound.include, past=True)
                    past = db.execute(query, params.values).fetchall()
            finally:
                db.execute("COMMIT")
        states, more = merge_pages(current, past, limit, self._seal)
        return Page(states, more, as_of >= floor)

    def forks(self, session_id: str) -> list[SessionState]:
        with self._store.translate_errors():
            rows = self._reader().execute(sql.FORKS, (session_id,)).fetchall()
        return [self._seal.open(state) for (state,) in rows]

    def get(self, session_id: str) -> SessionState | None:
        with self._store.translate_errors():
            row = self._reader().execute(sql.GET, (session_id,)).fetchone()
        return None if row is None else self._seal.open_at(*row)

    def state_at(self, session_id: str, position: int) -> SessionState | PastWindow | None:
        db = self._reader()
        with self._store.translate_errors():
            db.execute("BEGIN")
            try:
                meta = self._meta(db)
                row = db.execute(sql.CURRENT_OF, (session_id,)).fetchone()
                if row is not None and row[0] <= position:
                    return self._seal.open_at(row[1], row[0])
                if position < meta["floor"] or position > meta["checkpoint"]:
                    return PAST_WINDOW
                if row is None:
                    return None
                past = db.execute(sql.PAST_AT, (session_id, position, position)).fetchone()
                return None if past is None else self._seal.open(past[0])
            finally:
                db.execute("COMMIT")

    def count(self) -> int:
        with self._store.translate_errors():
            return self._meta(self._reader())["live"]

    def cwd_counts(self) -> dict[str, int]:
        with self._store.translate_errors():
            return dict(self._reader().execute(sql.CWD_COUNTS).fetchall())

    def usage(self, query: UsageQuery) -> list[UsageGroup]:
        statement, params = query_statement(query, "sqlite")
        with self._store.translate_errors():
            groups: list[UsageGroup] = self._reader().execute(statement, params).fetchall()  # tuples of its columns
            return groups

    def archived_count(self, cwd: str | None = None) -> int:
        """Of the whole list, kept in ``rm_meta`` as the live count is (a pass over the order index's archived part
        grows with the list: docs/benchmarks.md); of a cwd, a pass over its archived part of the cwd index."""
        with self._store.translate_errors():
            if cwd is None:
                return self._meta(self._reader())["archived"]
            return int(self._reader().execute(sql.ARCHIVED_IN_CWD, (cwd,)).fetchone()[0])

    def _dump(self, checkpoint: int) -> None:
        """A kept snapshot at ``checkpoint`` from the rows as they are (nothing if the tables moved on)."""
        db = self._store.connect()
        try:
            with self._store.translate_errors():
                db.execute("BEGIN")
                meta = self._meta(db)
                if meta["checkpoint"] != checkpoint:
                    return  # another catch-up moved on: the rows are not the states at ``checkpoint`` any more
                (count,) = db.execute(sql.COUNT).fetchone()
                rows = (
                    self._seal.unsealed(state) for (state,) in db.execute(sql.IN_LIST_ORDER)
                )  # see save_snapshot: list order
                from registry.snapshot import save_encoded_snapshot  # noqa: PLC0415 - not loaded by a read

                save_encoded_snapshot(
                    self._backend, checkpoint, rows, count, events=self._backend.events_up_to(checkpoint)
                )
        finally:
            db.close()

    def states(self) -> Iterator[SessionState]:
        db = self._store.connect()  # its own connection: a long read that other calls must not interleave with
        try:
            with self._store.translate_errors():
                for (state,) in db.execute(sql.STATES):
                    yield self._seal.open(state)
        finally:
            db.close()
