"""The PostgreSQL read model's fold of an append in the append's own transaction: its side of the store's commit
hook (``events.postgres_hooks.CommitHook``), and how a fold's rows are written, which a catch-up shares
(``postgres.py`` has the rest of ``PostgresReadModel``: its tables made, caught up and read).

A lone event (every command's append) folds in the append's own statement (``at_end``): the state is folded from
the session's state as this process last saw it, without the event's position - the state blob is sealed without
its last eight bytes, the position's (``keys.Seal``) - and the server writes the rows, ``valid_from`` and
``valid_to``, the window's floor, the checkpoint and its chain anchor from the position the event's insert got.
Its guard: no catch-up holds the read model, the checkpoint is the log's end before the append, and the session's
row is the version folded from; when it fails, nothing is written and the append reads first. There, the hook's
reads (the read model's lock, if free; its checkpoint; the appended sessions' rows) go in the append's first
exchange, its writes in the second with the events and the COMMIT. Several events sent in one exchange from the
log's end the process knows fold from what its own last fold left (``fold_known``), behind a guard that fails the
transaction if anything else moved the tables meanwhile. What committed is remembered: ``get`` answers from it
while nothing moves, ``at_end`` and ``last_seen`` from the states this process saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, cast

import msgspec

from events.model import Event, LogEntry, SessionUpdated
from events.postgres_hooks import AtEnd, KnownPart
from registry.fold import fold
from registry.model import SessionState
from registry.readmodel import ReadModelFault
from registry.readmodel.keys import PLACE, Seal
from registry.readmodel.postgres_sql import AT_END, CURRENT_NAMES, FLOOR_STEP, PAST_NAMES
from registry.readmodel.postgres_usage import usage_params
from registry.readmodel.tables import (
    CURRENT_COLUMNS,
    PAST_COLUMNS,
    STATE,
    Fold,
    SnapshotPlan,
    anchor_value,
    counted,
    current_row,
    fold_stretch,
    past_row,
)
from registry.readmodel.usage_tables import usage_rows
from registry.snapshot import EVERY
from registry.usage import UsageKey, fold_usage

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

    from events.postgres import PostgresStore
    from registry.backend import Backend
    from registry.readmodel.postgres_sql import Statements
    from registry.readmodel.postgres_usage import UsageStatements

    Connection = psycopg.Connection[TupleRow]
    Cursor = psycopg.Cursor[TupleRow]


__all__ = ["IN_TRANSACTION", "AppendFold"]

log = logging.getLogger("registry.readmodel.postgres")

IN_TRANSACTION: Final = 10_000  # positions an append's own transaction folds at most (more: a catch-up of its own)
_RECENT: Final = 10_000  # states this process folded that ``get`` answers without a query (while nothing moves)
_event_decoder = msgspec.msgpack.Decoder(Event)
# The parameter names of one row in ``Statements.fold_one``, in ``CURRENT_COLUMNS`` and ``PAST_COLUMNS`` order.
_CURRENT_KEYS: Final = tuple(CURRENT_NAMES + name for name in CURRENT_COLUMNS)
_PAST_KEYS: Final = tuple(PAST_NAMES + name for name in PAST_COLUMNS)
# The same in ``Statements.known``.
_KNOWN_CURRENT: Final = tuple(AT_END + name for name in CURRENT_COLUMNS)
_KNOWN_PAST: Final = tuple(AT_END + PAST_NAMES + name for name in PAST_COLUMNS)
# The same in ``Statements.at_end``, with the columns the statement computes left out (None).
_AT_CURRENT: Final = tuple(
    None if name in ("session_id", "valid_from", "state") else AT_END + name for name in CURRENT_COLUMNS
)
_AT_PAST: Final = tuple(
    None if name in ("session_id", "valid_to") else AT_END + PAST_NAMES + name for name in PAST_COLUMNS
)


class AppendFold:
    """``PostgresReadModel``'s side of the store's commit hook, and the fold's writes a catch-up shares. A mixin:
    the attributes declared here are the read model's, set in its ``__init__``."""

    window: int
    _backend: Backend
    _seal: Seal
    _store: PostgresStore
    _sql: Statements
    _usage_sql: UsageStatements
    _key: int  # the read model's advisory lock
    _position: int
    _guard_function: bool  # whether ``write_known``'s guard is the defined function (else an anonymous block)
    # Folded by the append being committed: checkpoint, the one before, floor, the rows' states.
    _pending: tuple[int, int, int, dict[str, bytes]] | None
    # What this process's appends folded since another writer last moved the tables: checkpoint, floor, states.
    _recent: tuple[int, int, dict[str, bytes]] | None
    _known_writes: tuple[Fold, int, bytes] | None  # a fold from what is known, to queue
    # The session and its new row's blob but the position (None: the event changed nothing) of an ``at_end`` part.
    _placing: tuple[str, bytes | None] | None
    # Sealed states of sessions as this process last saw or folded them: where ``at_end`` folds from, behind its
    # guard (so a stale one costs a fallback, never a wrong row).
    _seen: dict[str, bytes]
    _dump: Callable[[int], None]  # a kept snapshot at a checkpoint (``PostgresReadModel._dump``)

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
        its own beyond excluding a concurrent catch-up; a read model found behind by at most ``IN_TRANSACTION``
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
        if checkpoint > head_before or head_before - checkpoint > IN_TRANSACTION:
            return
        try:
            states = {session_id: self._seal.open_at(state, at) for session_id, state, at in loaded.fetchall()}
            looked = {entry.session_id for entry in written}  # a session the look-up did not find has no row
            entries: list[LogEntry] = written
            if checkpoint < head_before:  # behind (appends that bypassed the fold): the gap first, in this transaction
                gap = conn.execute(self._sql.scan, (checkpoint, head_before), binary=True).fetchall()
                entries = [LogEntry(p, sid, v, _event_decoder.decode(d)) for p, sid, v, d in gap] + written
                states, looked = {}, set()

            def load(session_ids: list[str]) -> dict[str, SessionState]:
                # A fetch here is one more round trip with the append lock held (a create paid it): only for
                # sessions the look-up did not cover.
                missing = [sid for sid in session_ids if sid not in states and sid not in looked]
                return {**{sid: states[sid] for sid in session_ids if sid in states}, **self._load(conn, missing)}

            position = written[-1].position
            new_floor = position if checkpoint == 0 else self._floor(floor, position)
            folded = fold_stretch(entries, load, checkpoint=checkpoint, keep_past_after=new_floor, seal=self._seal)
        except Exception:  # derived data: the append commits without it, and a catch-up folds it later
            log.warning(
                "%s: the read model could not fold an append in its transaction", self._store.location, exc_info=True
            )
            return
        with conn.cursor() as cursor:
            self._queue(cursor, folded, floor, new_floor, chain)
        self._pending = (folded.position, checkpoint, new_floor, {row[0]: row[STATE] for row in folded.current})

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
                lambda ids: {sid: self._seal.open(rows[sid]) for sid in ids if sid in rows and first[sid] != 1},
                checkpoint=checkpoint,
                keep_past_after=new_floor,
                seal=self._seal,
            )
        except Exception:
            log.warning("%s: could not fold an append from what it knows", self._store.location, exc_info=True)
            return False
        self._known_writes = (folded, floor, chain)
        self._pending = (folded.position, checkpoint, new_floor, {row[0]: row[STATE] for row in folded.current})
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

    def known_part(self) -> KnownPart | None:
        """``fold_known``'s usual fold (a current row, maybe the past version it replaced) as a part of the append's
        own statement, behind the same guard as ``write_known``'s, written as a boolean the statement's writes are
        gated on; None for a larger fold, or one with usage (``write_known`` then queues it: the daily totals'
        upserts would make the statement longer than psycopg caches the parsing of, and parsing it on every turn
        costs more than the two statements queued instead)."""
        assert self._known_writes is not None and self._pending is not None
        folded, floor, chain = self._known_writes
        if len(folded.current) > 1 or len(folded.past) > 1 or folded.usage:
            return None
        new_floor = self._pending[2]
        params: dict[str, object] = {"rm_lock": self._key, "rm_checkpoint": self._pending[1], "rm_f0": floor}
        params |= {"rm_c": folded.position, "rm_f": new_floor, "rm_a": anchor_value(chain), "rm_d": folded.live_delta}
        params["rm_ad"] = folded.archived_delta
        for row in folded.current:
            params |= zip(_KNOWN_CURRENT, row, strict=True)
        for past in folded.past:
            params |= zip(_KNOWN_PAST, past, strict=True)
        guard, writes = self._sql.known[(bool(folded.current), bool(folded.past), new_floor > floor)]
        return KnownPart(guard, writes, params)

    def at_end(self, session_id: str, version: int | None, event: Event) -> AtEnd | None:
        """The commit hook's part of a lone event's one-statement append: the fold from the session's state as this
        process last saw it, without the event's position, which the server writes in (``Statements.at_end``),
        behind a guard (the tables at the log's end; the session's row that state, its stream at the version before
        ``version`` - for any version, the state's next). None when this process has not seen the session's state
        (or it is damaged): the store reads first."""
        self._pending = self._known_writes = self._placing = None
        old: SessionState | None = None
        blob = None
        if version != 1:
            blob = self._seen.get(session_id)
            if blob is None:
                return None
            try:
                old = self._seal.open(blob)
            except ReadModelFault:
                return None
            version = old.version + 1 if version is None else version
        new = fold(old, LogEntry(0, session_id, version, event))
        params: dict[str, object] = {"rm_lock": self._key, "rm_from": None if old is None else old.position}
        params |= {"rm_window": self.window, "rm_delta": 0, "rm_adelta": 0, "rm_version": version - 1}
        if new is not None:
            row = current_row(new, self._seal, placed=False)
            params |= {key: value for key, value in zip(_AT_CURRENT, row, strict=True) if key is not None}
            params["rm_state"] = row[STATE]
            params["rm_delta"], params["rm_adelta"] = counted(old, new)
            if old is not None:
                past = past_row(old, 0, self._seal, blob)
                params |= {key: value for key, value in zip(_AT_PAST, past, strict=True) if key is not None}
        self._placing = (session_id, None if new is None else row[STATE])
        guard, writes, answer = self._sql.at_end[(new is not None, old is not None and new is not None)]
        if new is not None and type(event) is SessionUpdated and event.usage is not None:
            totals: dict[UsageKey, list[int]] = {}
            fold_usage(totals, event.at, new.agent, new.cwd, event.usage)
            params |= usage_params(usage_rows(totals)[0])
            # In the one statement (a row only once the event is written): its parsing is not cached at this
            # length, but reading first instead would cost a round trip with the append lock held.
            writes = self._usage_sql.with_usage(writes, "FROM rm_at")
        return AtEnd(guard, writes, answer, params)

    def placed(self, position: int, answer: object) -> None:
        """``at_end``'s part committed at ``position``; ``answer`` is the window's floor it set (None: the tables had
        no floor row and were not written - the read model finds them damaged when it next reads)."""
        placing, self._placing = self._placing, None
        if placing is None or not isinstance(answer, int):
            return
        session_id, unplaced = placing
        rows = {} if unplaced is None else {session_id: unplaced + position.to_bytes(PLACE, "big", signed=True)}
        self._pending = (position, position - 1, answer, rows)

    def _queue(self, cursor: Cursor, folded: Fold, floor: int, new_floor: int, chain: bytes | None) -> None:
        """A fold's rows and meta (checkpoint, floor, the checkpoint's chain link, live and archived counts): what a
        catch-up writes and what an append writes in its own transaction. An append's usual fold (a row, maybe the past
        version it replaced) goes as one statement: fewer statements is less of psycopg's time per append, which
        under contention is spent with the append lock held."""
        meta: dict[str, object] = {
            "c": folded.position,
            "f": new_floor,
            "a": anchor_value(chain),
            "d": folded.live_delta,
            "ad": folded.archived_delta,
        }
        if new_floor > floor:
            cursor.execute(self._sql.prune, (floor, new_floor))
        if folded.usage:
            cursor.executemany(self._usage_sql.add, [usage_params(row) for row in usage_rows(folded.usage)])
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
        self._saw(rows)
        recent = self._recent
        if recent is not None and recent[0] == before and len(recent[2]) < _RECENT:
            rows = {**recent[2], **rows}  # no other writer between this process's last fold and this one
        self._recent = (position, floor, rows)
        self._position = max(self._position, position)
        if position // EVERY != before // EVERY:
            SnapshotPlan(self._backend, before, position, self._dump).passed(position)

    def _saw(self, states: dict[str, bytes]) -> None:
        """Sealed states as they are now in the tables (as far as this process knows)."""
        if len(self._seen) + len(states) > _RECENT:
            self._seen.clear()
        self._seen.update(states)

    def _load(self, conn: Connection, session_ids: list[str]) -> dict[str, SessionState]:
        if not session_ids:
            return {}
        rows = conn.execute(self._sql.load, (session_ids,)).fetchall()
        return {session_id: self._seal.open_at(state, at) for session_id, state, at in rows}

    def _floor(self, floor: int, position: int) -> int:
        """The window's floor once the read model is at ``position``: ``window`` behind it, moved in steps of
        ``FLOOR_STEP`` positions, so that past versions are pruned once a step rather than by every write (a
        prune's cost depends on the planner's statistics, and grows with the store: ``docs/scale.md``). Walks stay
        exact over the window at least."""
        return max(floor, (position - self.window) // FLOOR_STEP * FLOOR_STEP)
