"""The PostgreSQL store's write path: one transaction per append (or per group of appends), and the commit hooks
that keep tables derived from the log in that same transaction.

Positions: every writer holds one transaction-level advisory lock per schema from before it reads or writes the
head to its commit, so positions are assigned and committed in one order (and the integrity chain, which links
each record to the one before, is computed in that order). A reader that has seen position P never later finds
a committed event below P; readers still ask for ``> last``, never ``last + 1``.

Appending alone. A lone event goes in one exchange whoever appended last (store format 3): the lock (with its
NOTIFY), then one statement in which the server finds the log's end, computes the position, stream, version and
chain link, checks the expected version and writes the event - and the commit hooks' parts (``AtEnd``: the
registry's read model folds the event there, from the position the insert got, behind a guard) - one implicit
transaction the server commits at the exchange's sync. When it writes nothing (a hook's guard failed, a version
the session is past, an id stored already), or for several events at once, the append reads under the lock first
(BEGIN, two round trips, COMMIT) - unless the process knows the log's end (its own last append that read, and
nobody else's since): then the lock, the writes computed from what it knows, the hooks' writes from what they
know (guarded), in one exchange; a collision on a position (or a new stream) or a failed guard writes nothing,
and it reads first. Hooks queue their look-ups in the reading path's first exchange and their writes with the
events' before the COMMIT. Every way: one transaction, one WAL flush.

What bounds writers on different sessions is that lock, held for the server's work on the statement, then the
COMMIT and (by default) its WAL flush: what the lock's holder spends its time on is measured by
``benchmarks.postgres_writers`` (figures in ``docs/scale.md``).

How the transaction goes to the server, and the commit modes: ``events.postgres_commit``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Final, TypeVar

import psycopg
from psycopg.rows import TupleRow

from events.chain import GENESIS, ChainRule
from events.errors import ConcurrencyError, StoreError
from events.group_commit import Unit
from events.model import Event, LogEntry
from events.postgres_commit import CommitMode, Committer
from events.postgres_hooks import AtEnd, CommitHook, Connection, EraseHook, KnownPart
from events.postgres_sql import Statements, one
from events.postgres_units import message_columns, write_unit
from events.store import ANY, PreparedAppend, Tip, record_from_row, retried_positions

__all__ = ["CommitHook", "Connection", "EraseHook", "Unit", "Writer"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
# Failures of a hook's own statements that leave the append worth writing without it: its table, column, function
# or object is gone, or it cannot write (disk full, read-only, no privilege).
_HOOK_FAULTS: Final = frozenset({"42P01", "42703", "42704", "42883", "53100", "25006", "42501"})
_KNOWN_STREAMS: Final = 10_000  # sessions whose stream a process remembers between its appends
_QUIET: Final = 8
"""A lone writer goes from the log's end it knows after this many appends in a row found nobody else had appended."""


class Writer:
    """Appends for one store: the transaction's statements, in as few round trips as they can go."""

    def __init__(
        self, statements: Statements, clock: Callable[[], int], location: str, commit: CommitMode = "in-lock"
    ) -> None:
        self._sql = statements
        self._commit = Committer(statements, commit)
        self._barrier = self._commit.barrier
        self._clock = clock
        self._location = location
        self.hooks: tuple[CommitHook, ...] = ()
        self.rule = ChainRule()  # the store's link function at each position (set by the store once it is open)
        self._known: _Known | None = None  # the log's end as this process's last append left it
        self._active: tuple[CommitHook, ...] = ()  # the hooks of the append being written

    def forget(self) -> None:
        """Another writer may have appended: the next append reads the log's end first."""
        self._known = None

    def append_alone(self, conn: Connection, request: PreparedAppend, blobs: list[bytes]) -> list[int]:
        """A lone append (the common case: no other thread of this process appending). A lone event goes in one
        statement in which the server finds the log's end (``_append_at_end``: one exchange whoever appended
        last, so contended writers do not read first) - unless this process's last ``_QUIET`` appends each found
        the end where the one before left it: then it goes in short statements computed from the end it knows
        (``_append_known``: the cheapest for a lone writer; a collision there costs a rollback, so it waits for a
        quiet stretch). Several events go from the end this process knows when it knows one, else read it first
        (``_append_reading``, two exchanges)."""

        def append() -> list[int]:
            if request.content is not None:  # its messages are written by the append that reads the log's end
                return self._append_reading(conn, request, blobs)
            known, lone = self._known, len(blobs) == 1 and self.rule.sql_from is not None
            if known is not None and not known.contended and (known.quiet >= _QUIET or not lone):
                positions = self._append_known(conn, known, request, blobs)
                if positions is not None:
                    return positions
            if lone:
                parts = self._parts_at_end(request)
                if parts is not None:
                    return self._append_at_end(conn, request, blobs[0], parts)
            return self._append_reading(conn, request, blobs)

        return self._with_hooks(append)

    def _parts_at_end(self, request: PreparedAppend) -> list[AtEnd] | None:
        """The hooks' parts of a lone event's one-statement append; None when one has none."""
        if not self._active:
            return []
        expected, event = request.expected_version, request.events[0]
        version = expected + 1 if expected >= 0 else None
        parts = []
        for hook in self._active:
            part = hook.at_end(request.session_id, version, event)
            if part is None:
                return None
            parts.append(part)
        return parts

    def _append_at_end(self, conn: Connection, request: PreparedAppend, blob: bytes, parts: list[AtEnd]) -> list[int]:
        """One event: one exchange whoever appended last - the server finds the log's end under the lock, computes
        the position, stream, version and link, and checks the expected version; the hooks' parts (``parts``) fold
        the event in the same statement, behind their guard. When it writes nothing (an id stored already: a retry
        whose answer was lost; a version the session is past; a hook's guard that failed), the append that reads
        first tells which, as it does for any append, and folds through the hooks' look-ups."""
        before, self._known = self._known, None
        at, expected = self._clock(), request.expected_version
        params = {"genesis": GENESIS, "session": request.session_id, "id": request.event_ids[0], "at": at}
        params |= {"blob": blob, "expected": expected}
        for part in parts:
            params |= part.params
        statement = self._sql.at_end(tuple((part.guard, part.writes, part.answer) for part in parts))
        try:
            with self._commit.committing(conn, implicit=not self._barrier):
                conn.execute(self._sql.lock_and_notify, (self._sql.append_key,))
                inserted = conn.execute(statement, params)
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "events_event_id":
                raise
            return self._append_reading(conn, request, [blob])
        position, _guarded, link, stream, version, next_stream, *answers = one(inserted)
        if position is None:
            return self._append_reading(conn, request, [blob])
        self._learn(before, position - 1, request.session_id, stream, version, position, link, next_stream)
        _committed(self._active, (position, answers))
        return [position]

    def _with_hooks(self, write: Callable[[], _T]) -> _T:
        """Run ``write`` with the hooks; when their statements fail for their own tables' sake (gone, damaged,
        not writable), once more without them: derived data never costs an append (its owner finds the fault
        and mends it when it next reads)."""
        self._active = self.hooks
        try:
            return write()
        except psycopg.Error as exc:
            if not self._active or exc.sqlstate not in _HOOK_FAULTS:
                raise
            log.warning("%s: a commit hook failed (%s); the append commits without it", self._location, exc)
            self._known = None
            self._active = ()
            return write()

    def _append_known(
        self, conn: Connection, known: _Known, request: PreparedAppend, blobs: list[bytes]
    ) -> list[int] | None:
        """One exchange, one implicit transaction: the lock and the writes, computed from the log's end this process
        knows (with the flush barrier, an explicit one). If
        another writer appended meantime, the insert collides on a position (or on a new stream) and nothing is
        written: None, and the append reads first. The hooks fold from what they know, behind their own guard - in
        the insert's own statement (``known_part``: the lock and one statement, where the guard and the fold were two
        more for psycopg to send and the server to run), else queued after it."""
        session_id, events, expected_version = request.session_id, request.events, request.expected_version
        stream, actual = known.streams.get(session_id, (None, 0))
        if (stream is None and expected_version not in (ANY, 0)) or (
            expected_version not in (ANY, actual) and stream is not None
        ):
            return None  # the store decides a conflict, from what it reads
        hooks = self._active
        at = self._clock()
        positions, chain, written = _laid_out(self.rule, request, blobs, known.head, actual, at, known.previous)
        if not all(hook.fold_known(written, known.head, chain[-1]) for hook in hooks):
            return None
        new_stream = stream is None
        if stream is None:
            stream = known.next_stream
        last = actual + len(events)
        # The hooks' writes in the insert's own statement, gated on their guards; else queued after it.
        parts = [hook.known_part() for hook in hooks]
        known_parts = None if None in parts else [part for part in parts if part is not None]
        try:
            with self._commit.committing(conn, implicit=not self._barrier):
                conn.execute(self._sql.lock_and_notify, (self._sql.append_key,))
                inserted = self._insert(
                    conn, request, blobs, known.head, (stream, new_stream), actual, at, chain, known_parts
                )
                if known_parts is None:
                    for hook in hooks:
                        hook.write_known(conn)
            if known_parts and not one(inserted)[0]:
                self._known = None  # a hook's data moved: nothing was written, read it
                return None
        except (psycopg.errors.UniqueViolation, psycopg.errors.SerializationFailure):
            self._known = None  # the log (or a hook's data) moved: read it
            return None
        known.advance(session_id, stream, last, positions[-1], chain[-1], new_stream)
        _committed(hooks)
        return positions

    def _insert(
        self,
        conn: Connection,
        request: PreparedAppend,
        blobs: list[bytes],
        head: int,
        stream: tuple[int, bool],
        actual: int,
        at: int,
        chain: list[bytes],
        parts: list[KnownPart] | None = None,
    ) -> psycopg.Cursor[TupleRow]:
        """Queue the insert of a lone append's events after ``head``, on a stream (its number, and whether it is
        new) at version ``actual``, with the stream's row: one statement - with the commit hooks' ``parts`` in it
        when there are any (it then answers whether their guards held)."""
        number, new = stream
        params = {"head": head, "stream": number, "actual": actual, "at": at, "session": request.session_id}
        params["last"] = actual + len(request.events)
        if len(blobs) == 1:
            params |= {"id": request.event_ids[0], "blob": blobs[0], "link": chain[0]}
        else:
            params |= {"ids": request.event_ids, "blobs": blobs, "chain": chain}
        if not parts:
            return conn.execute(self._sql.insert_lone[(new, len(blobs) == 1)], params)
        for part in parts:
            params |= part.params
        return conn.execute(
            self._sql.known(new, len(blobs) == 1, tuple((part.guard, part.writes) for part in parts)), params
        )

    def _append_reading(self, conn: Connection, request: PreparedAppend, blobs: list[bytes]) -> list[int]:
        """The append that reads the log's end under the lock first: two round trips, optimistic about ids (a
        duplicate id shows as a unique violation, and only then are the stored ids looked up)."""
        session_id, events, expected_version = request.session_id, request.events, request.expected_version
        conflict: ConcurrencyError | None = None
        positions: list[int] = []
        hooks = self._active
        try:
            # Two round trips: the pipeline sends BEGIN, the lock (with the NOTIFY) and the look-ups together, then
            # the writes, the hooks' writes and COMMIT together.
            with self._commit.committing(conn):
                # READ COMMITTED: the look-ups' snapshots are taken after the lock is granted, so they see every
                # append committed before; positions are therefore assigned and committed in one order.
                conn.execute(self._sql.lock_and_notify, (self._sql.append_key,))
                looked_up = [hook.look_up(conn, [session_id]) for hook in hooks]
                head, previous, next_stream, stream, actual = one(
                    conn.execute(self._sql.tip_and_stream, (session_id,), binary=True)
                )
                actual = actual or 0
                if expected_version != ANY and expected_version != actual:
                    conflict = ConcurrencyError(session_id, expected_version, actual)
                    raise psycopg.Rollback
                at = self._clock()
                positions, chain, written = _laid_out(self.rule, request, blobs, head, actual, at, previous or GENESIS)
                new_stream = stream is None
                if stream is None:
                    stream = next_stream
                self._insert(conn, request, blobs, head, (stream, new_stream), actual, at, chain)
                if request.content is not None:
                    conn.execute(self._sql.insert_messages, message_columns(request, head, stream))
                self._run_hooks(conn, hooks, looked_up, written, head, chain[-1])
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "events_event_id":
                raise
            # Some ids are stored already: a retried batch, or a conflict (below). Nothing was written.
        else:
            if conflict is None:
                last_version = actual + len(events)
                self._learn(self._known, head, session_id, stream, last_version, positions[-1], chain[-1], next_stream)
                _committed(hooks)
                return positions
        self._known = None
        retried = self._stored_positions(conn, session_id, events, request.event_ids)
        if retried is not None:
            self._commit.flush(conn)  # stored by an attempt whose answer was lost: maybe before its barrier
            return retried
        if conflict is not None:
            raise conflict
        raise StoreError(f"{self._location}: an append collided with stored event ids that cannot be read back")

    def _learn(
        self,
        before: _Known | None,
        head: int,
        session_id: str,
        stream: int,
        version: int,
        last: int,
        link: bytes,
        next_stream: int,
    ) -> None:
        """After an append that found the log's end at ``head`` (``before``: what this process knew before it): what
        it knows now, and whether another writer had appended since this process's previous append (contended:
        then the next append does not go from what it knows either)."""
        contended = before is None or before.head != head
        quiet = 0 if contended or before is None else before.quiet + 1
        streams = {} if contended or before is None else before.streams
        if len(streams) >= _KNOWN_STREAMS:
            streams = {}
        known = _Known(head, GENESIS, next_stream, streams, contended=contended, quiet=quiet)
        known.advance(session_id, stream, version, last, link, stream == next_stream)
        self._known = known

    def _stored_positions(
        self, conn: Connection, session_id: str, events: Sequence[Event], event_ids: Sequence[uuid.UUID]
    ) -> list[int] | None:
        """Positions of a retried batch; None when none of its ids is stored."""
        rows = conn.execute(self._sql.select_ids, (list(event_ids),), binary=True).fetchall()
        found = {record.event_id: record for record in map(record_from_row, rows)}
        return retried_positions(session_id, events, event_ids, found)

    def commit_once(self, conn: Connection, units: list[Unit]) -> list[list[list[int]] | BaseException]:
        self._known = None  # several appends at once: the next lone append reads the log's end again
        return self._with_hooks(lambda: self._commit_once(conn, units))

    def _commit_once(self, conn: Connection, units: list[Unit]) -> list[list[list[int]] | BaseException]:
        """One transaction and one commit for every unit the group commit queued (``events.group_commit``); each
        unit (an append or an ``append_batch``) runs in a savepoint of its own when there are several, so a unit
        that fails writes nothing and gets its error while the others commit."""
        outcomes: list[list[list[int]] | BaseException] = []
        hooks = self._active
        # The pipeline sends the statements whose results are not needed at once with the next that is.
        with self._commit.committing(conn) as pipeline:
            conn.execute(self._sql.lock_and_notify, (self._sql.append_key,))
            session_ids = list({request.session_id for unit in units for request, _ in unit})
            looked_up = [hook.look_up(conn, session_ids) for hook in hooks]
            head, previous, next_stream = one(conn.execute(self._sql.tip, binary=True))
            tip = Tip(head, previous or GENESIS, next_stream)
            written: list[LogEntry] = []

            def write(unit: Unit, into: list[LogEntry]) -> list[list[int]]:
                return write_unit(conn, self._sql, self.rule, self._clock(), tip, unit, into)

            if len(units) == 1:
                outcomes.append(write(units[0], written))  # its error rolls everything back
            else:
                pipeline.sync()  # psycopg now knows the transaction is open: each unit gets a savepoint
                for unit in units:
                    mark = tip.saved()
                    mine: list[LogEntry] = []
                    try:
                        with conn.transaction():
                            outcomes.append(write(unit, mine))
                    except (StoreError, ValueError) as exc:
                        tip.restore(mark)
                        outcomes.append(exc)
                    else:
                        written += mine
            self._run_hooks(conn, hooks, looked_up, written, head, tip.previous)
        _committed(hooks)
        return outcomes

    def _run_hooks(
        self,
        conn: Connection,
        hooks: tuple[CommitHook, ...],
        looked_up: list[object],
        written: list[LogEntry],
        head_before: int,
        chain: bytes,
    ) -> None:
        for hook, answers in zip(hooks, looked_up, strict=True):
            hook.in_transaction(conn, answers, written, head_before, chain)


def _laid_out(
    rule: ChainRule, request: PreparedAppend, blobs: list[bytes], head: int, actual: int, at: int, previous: bytes
) -> tuple[list[int], list[bytes], list[LogEntry]]:
    """Where a lone append's events go after ``head`` on a stream at version ``actual``: their positions, their
    chain links (from the ``previous`` one) and the log entries the hooks fold."""
    session_id, events = request.session_id, request.events
    positions = list(range(head + 1, head + 1 + len(events)))
    chain = rule.links(
        previous,
        [
            (position, session_id, actual + n, event_id.bytes, at, blob)
            for n, (position, event_id, blob) in enumerate(zip(positions, request.event_ids, blobs, strict=True), 1)
        ],
    )
    written = [
        LogEntry(position, session_id, actual + n, event)
        for n, (position, event) in enumerate(zip(positions, events, strict=True), 1)
    ]
    return positions, chain, written


def _committed(hooks: tuple[CommitHook, ...], placed: tuple[int, list[object]] | None = None) -> None:
    """Tell the hooks their transaction committed (``placed``: where a one-statement append put the event, and
    what each hook's part answered)."""
    for n, hook in enumerate(hooks):
        try:
            if placed is not None:
                hook.placed(placed[0], placed[1][n])
            hook.committed()
        except Exception:  # derived data: its owner catches up later; the append is committed and stays so
            log.warning("a commit hook failed after the commit", exc_info=True)


@dataclass(slots=True)
class _Known:
    """The log's end as this process's last append left it: the head and its link, the next new stream number,
    and the (stream, version) of the sessions this process appended to since."""

    head: int
    previous: bytes
    next_stream: int
    streams: dict[str, tuple[int, int]]
    _: KW_ONLY
    contended: bool
    quiet: int = 0
    """Appends in a row that found the log's end where the one before left it."""

    def advance(self, session_id: str, stream: int, version: int, last: int, link: bytes, new_stream: bool) -> None:
        self.head, self.previous = last, link
        self.streams[session_id] = (stream, version)
        if new_stream:
            self.next_stream = stream + 1
