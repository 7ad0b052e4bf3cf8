"""The SQLite store's write path: one unit of work (an append, or an ``append_batch``) written inside the writer's
transaction - its streams looked up once, its records chained and inserted in two bulk statements, and a
duplicate event id told apart from a retry of the same batch (which keeps its original positions)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Protocol

from events.chain import GENESIS, links
from events.codec import event_decoder
from events.content import KeptMessage
from events.errors import ConcurrencyError
from events.group_commit import Unit
from events.logger import Logger
from events.model import Event, LogEntry, RecordedEvent
from events.schema import RECORD_COLUMNS, SCHEMA_VERSION
from events.store import ANY, Clock, Tip, record_from_row, retried_positions

__all__ = ["TIP", "CommitHook", "EraseHook", "Unit", "run_hooks", "write_unit"]

log = Logger("events.sqlite")

TIP: Final = "SELECT position, chain FROM events ORDER BY position DESC LIMIT 1"
_COLUMNS: Final = RECORD_COLUMNS
_INSERT: Final = (
    "INSERT INTO events (position, session_id, version, event_id, recorded_at, data, chain, stream, writer)"
    f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, {SCHEMA_VERSION})"
)
_INSERT_MESSAGE: Final = "INSERT INTO messages (position, seq, stream, role, at, body) VALUES (?, ?, ?, ?, ?, ?)"
_SCAN: Final = "SELECT position, session_id, version, data FROM events WHERE position > ? ORDER BY position"
_UPSERT_STREAM: Final = (
    "INSERT INTO streams (session_id, stream, version) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id) DO UPDATE SET version = excluded.version"
)


def write_unit(db: sqlite3.Connection, tip: Tip, unit: Unit, alone: bool, clock: Clock) -> list[list[int]]:
    """Write one unit inside a savepoint (or, ``alone`` in its group, in the transaction itself: two statements
    fewer on every lone append). A duplicate event id rolls the unit back: requests whose ids are all stored
    already (retries, same content) then keep their original positions and the unit is written again without
    them; anything else raises (``EventIdConflict``), and the unit writes nothing."""
    retried: dict[int, list[int]] = {}
    while True:
        mark = tip.saved()
        if not alone:
            db.execute("SAVEPOINT unit")
        try:
            positions = _write(db, tip, unit, retried, clock)
            if not alone:
                db.execute("RELEASE unit")
            return positions
        except BaseException as exc:
            if not isinstance(exc, sqlite3.IntegrityError):
                if not alone:
                    db.execute("ROLLBACK TO unit")
                    db.execute("RELEASE unit")
                    tip.restore(mark)
                raise  # alone: the caller rolls the transaction back
            if alone:  # start over: another process may append while the write lock is let go
                db.execute("ROLLBACK")
                db.execute("BEGIN IMMEDIATE")
                head, previous = db.execute(TIP).fetchone() or (0, GENESIS)
                tip.restore((head, previous or GENESIS, None))
            else:
                db.execute("ROLLBACK TO unit")
                db.execute("RELEASE unit")
                tip.restore(mark)
            found = _retries(db, unit, retried)
            if not found:
                raise
            retried.update(found)


def _write(
    db: sqlite3.Connection, tip: Tip, unit: Unit, retried: dict[int, list[int]], clock: Clock
) -> list[list[int]]:
    """The unit's requests in order, with one look-up of their streams and two bulk statements."""
    streams = _streams(db, {request.session_id for request, _ in unit})
    changed: dict[str, tuple[int, int]] = {}
    rows: list[tuple[object, ...]] = []
    messages: list[tuple[object, ...]] = []
    results = []
    at = clock()
    for n, (request, blobs) in enumerate(unit):
        if n in retried:
            results.append(retried[n])
            continue
        session_id = request.session_id
        stream, actual = streams.get(session_id, (None, 0))
        if request.expected_version != ANY and request.expected_version != actual:
            retry = _stored_positions(db, session_id, request.events, request.event_ids)
            if retry is not None:
                results.append(retry)
                continue
            raise ConcurrencyError(session_id, request.expected_version, actual)
        if stream is None:
            if tip.next_stream is None:
                tip.next_stream = (db.execute("SELECT max(stream) FROM streams").fetchone()[0] or 0) + 1
            stream, tip.next_stream = tip.next_stream, tip.next_stream + 1
        head = tip.head
        records = [
            (head + k, session_id, actual + k, event_id.bytes, at, blob)
            for k, (event_id, blob) in enumerate(zip(request.event_ids, blobs, strict=True), 1)
        ]
        chain = links(tip.previous, records)
        rows += [(*record, link, stream) for record, link in zip(records, chain, strict=True)]
        if request.content is not None:
            for k, kept in enumerate(request.content, head + 1):
                if kept:
                    messages += [(k, m.seq, stream, m.role, m.at, m.body) for m in kept]
        streams[session_id] = changed[session_id] = (stream, actual + len(records))
        tip.head, tip.previous = head + len(records), chain[-1]
        results.append(list(range(head + 1, head + 1 + len(records))))
    if changed:
        db.executemany(_UPSERT_STREAM, [(sid, stream, version) for sid, (stream, version) in changed.items()])
        db.executemany(_INSERT, rows)
        if messages:
            db.executemany(_INSERT_MESSAGE, messages)
    return results


def _streams(db: sqlite3.Connection, sessions: set[str]) -> dict[str, tuple[int | None, int]]:
    found: dict[str, tuple[int | None, int]] = {}
    keys = list(sessions)
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        query = f"SELECT session_id, stream, version FROM streams WHERE session_id IN ({','.join('?' * len(chunk))})"
        found.update((sid, (stream, version)) for sid, stream, version in db.execute(query, chunk))
    return found


def _retries(db: sqlite3.Connection, unit: Unit, known: dict[int, list[int]]) -> dict[int, list[int]]:
    """The requests of a unit that are retries (their ids stored with the same content) and their original
    positions; a request that mixes stored and new ids raises ``EventIdConflict``."""
    found = {}
    for n, (request, _) in enumerate(unit):
        if n not in known:
            positions = _stored_positions(db, request.session_id, request.events, request.event_ids)
            if positions is not None:
                found[n] = positions
    return found


def _stored_positions(
    db: sqlite3.Connection,
    session_id: str,
    events: Sequence[Event],
    event_ids: Sequence[uuid.UUID],
) -> list[int] | None:
    """Positions of a retried batch; None when none of its ids is stored."""
    found: dict[uuid.UUID, RecordedEvent] = {}
    keys = [i.bytes for i in event_ids]
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for row in db.execute(f"SELECT {_COLUMNS} FROM events WHERE event_id IN ({marks})", chunk):
            record = record_from_row(row)
            found[record.event_id] = record
    return retried_positions(session_id, events, event_ids, found)


class CommitHook(Protocol):
    """Work done in an append's own transaction (see ``SqliteStore.add_commit_hook``)."""

    def in_transaction(self, db: sqlite3.Connection, scan: Callable[[int], Iterator[LogEntry]]) -> None: ...

    def committed(self) -> None: ...


class EraseHook(Protocol):
    """Work done in an erasure's own transaction (see ``SqliteStore.add_erase_hook``): ``messages`` are the rows
    about to be deleted, read back (their text included), for an index derived from them to take them out."""

    def erasing(self, db: sqlite3.Connection, session_id: str, messages: list[KeptMessage]) -> None: ...


def run_hooks(db: sqlite3.Connection, hooks: list[CommitHook], path: str) -> list[CommitHook]:
    """Each hook in a savepoint of the append's transaction; one that fails is rolled back to it and logged, and
    the appends commit without it (derived data catches up later). Returns the hooks that ran."""
    decode = event_decoder().decode

    def scan(after: int) -> Iterator[LogEntry]:
        for position, session_id, version, data in db.execute(_SCAN, (after,)):
            yield LogEntry(position, session_id, version, decode(data))

    done = []
    for hook in hooks:
        db.execute("SAVEPOINT hook")
        try:
            hook.in_transaction(db, scan)
            db.execute("RELEASE hook")
            done.append(hook)
        except Exception:
            db.execute("ROLLBACK TO hook")
            db.execute("RELEASE hook")
            log.warning("%s: a commit hook failed; the appends commit without it", path, exc_info=True)
    return done


# -- reading --------------------------------------------------------------------------------------
