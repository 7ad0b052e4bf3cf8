"""The SQLite store's messages kept beside the log (``events.content``): reading them back, and erasing a deleted
session's for good - its rows deleted (every store connection runs with ``secure_delete``, so what they free is
zeroed), an index derived from them taking them out in the same transaction (``EraseHook``), then the WAL copied
into the file and cut to nothing, so that no earlier copy of a page survives there."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Final

from events.codec import event_decoder
from events.content import KeptMessage, StoredMessage, kept
from events.errors import StoreError
from events.model import SessionDeleted
from events.sqlite_write import EraseHook

__all__ = ["at_keys", "erase", "messages", "messages_at", "stored_messages"]

_LAST_POSITION: Final = 2**63 - 1
_WAIT: Final = 0.05  # seconds between two tries at emptying a WAL a reader holds


def messages(db: sqlite3.Connection, session_id: str, until: int | None) -> list[KeptMessage]:
    rows = db.execute(
        "SELECT m.position, m.seq, m.role, m.at, m.body FROM streams s"
        " JOIN messages m ON m.stream = s.stream AND m.position <= ?"
        " WHERE s.session_id = ? ORDER BY m.position, m.seq",
        (_LAST_POSITION if until is None else until, session_id),
    ).fetchall()
    return [kept(p, session_id, StoredMessage(q, r, a, b)) for p, q, r, a, b in rows]


def at_keys(columns: str, keys: int) -> str:
    """A query of ``columns`` (of ``messages m`` and ``streams s``) for the messages under ``keys`` ``(position,
    seq)`` pairs, bound as ``?, ?`` each: the keys are a table the messages are looked up from, by their primary
    key. (``(m.position, m.seq) IN (VALUES ...)`` reads the whole ``messages`` table instead: SQLite does not look
    a row value list up in an index.)"""
    marks = ",".join("(?, ?)" for _ in range(keys))
    return (
        f"WITH k(p, q) AS (VALUES {marks}) SELECT {columns} FROM k CROSS JOIN messages m"
        " ON m.position = k.p AND m.seq = k.q JOIN streams s ON s.stream = m.stream"
    )


def messages_at(db: sqlite3.Connection, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], KeptMessage]:
    found: dict[tuple[int, int], KeptMessage] = {}
    wanted = list(keys)
    for start in range(0, len(wanted), 400):
        chunk = wanted[start : start + 400]
        rows = db.execute(
            at_keys("m.position, m.seq, m.role, m.at, m.body, s.session_id", len(chunk)),
            [v for key in chunk for v in key],
        ).fetchall()
        for p, q, r, a, b, sid in rows:
            found[p, q] = kept(p, sid, StoredMessage(q, r, a, b))
    return found


def stored_messages(db: sqlite3.Connection, after: int, limit: int) -> list[tuple[int, str, StoredMessage]]:
    last = db.execute(
        "SELECT max(position) FROM (SELECT position FROM messages WHERE position > ? ORDER BY position, seq LIMIT ?)",
        (after, limit),
    ).fetchone()[0]
    if last is None:
        return []
    rows = db.execute(
        "SELECT m.position, s.session_id, m.seq, m.role, m.at, m.body FROM messages m"
        " JOIN streams s ON s.stream = m.stream WHERE m.position > ? AND m.position <= ?"
        " ORDER BY m.position, m.seq",
        (after, last),
    ).fetchall()
    return [(p, sid, StoredMessage(q, r, a, b)) for p, sid, q, r, a, b in rows]


def erase(db: sqlite3.Connection, session_id: str, hooks: list[EraseHook], path: str, busy_timeout: float) -> int:
    """Erase a deleted session's messages on the writer connection ``db`` (``EventStore.erase``)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT stream FROM streams WHERE session_id = ?", (session_id,)).fetchone()
        deleted = row is not None and any(
            isinstance(event_decoder().decode(data), SessionDeleted)
            for (data,) in db.execute("SELECT data FROM events WHERE stream = ? ORDER BY version DESC", (row[0],))
        )
        if not deleted:
            raise ValueError(f"session {session_id!r} is not deleted: only a deleted session's messages are erased")
        rows = db.execute(
            "SELECT position, seq, role, at, body FROM messages WHERE stream = ? ORDER BY position, seq", (row[0],)
        ).fetchall()
        if rows:
            found = [kept(p, session_id, StoredMessage(q, r, a, b)) for p, q, r, a, b in rows]
            for hook in hooks:
                hook.erasing(db, session_id, found)
            db.execute("DELETE FROM messages WHERE stream = ?", (row[0],))
        db.execute("COMMIT")
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
    if rows:
        _empty_wal(db, path, busy_timeout)
    return len(rows)


def _empty_wal(db: sqlite3.Connection, path: str, busy_timeout: float) -> None:
    """Copy the WAL into the file and cut it to nothing: the erased pages' earlier versions go with it. A reader in
    the middle of a read keeps an older snapshot alive: wait for it (the busy timeout), then say what is left."""
    deadline = time.monotonic() + busy_timeout
    while True:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            return
        if time.monotonic() >= deadline:
            raise StoreError(
                f"{path}: the erased messages are gone from the database, but a reader held the WAL for over"
                f" {busy_timeout:g} s, so earlier copies of its pages may still be in {path}-wal until the next"
                " checkpoint"
            )
        time.sleep(_WAIT)
