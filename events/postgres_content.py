"""The PostgreSQL store's messages kept beside the log (``events.content``): reading them back, and erasing a
deleted session's for good. A plain ``VACUUM`` leaves deleted rows' bytes in the pages' free space, so the messages
table is partitioned by session (``events.schema.MESSAGE_BUCKETS``) and an erasure rewrites the partition that held
the session (``rewrite``: ``VACUUM FULL``, again while a transaction somewhere still sees the erased rows)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import psycopg

from events.codec import decode_event
from events.content import KeptMessage, StoredMessage, kept
from events.errors import StoreError
from events.model import SessionDeleted
from events.postgres_hooks import EraseHook
from events.postgres_sql import Statements

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    Connection = psycopg.Connection[TupleRow]

__all__ = ["erase", "messages", "messages_at", "rewrite", "stored_messages"]

_LAST_POSITION: Final = 2**63 - 1
_HELD: Final = re.compile(r"(\d+) dead row versions cannot be removed yet")
_WAIT: Final = 0.1  # seconds between two rewrites while a transaction still sees the erased rows


def messages(sql: Statements, session_id: str, until: int | None, conn: Connection) -> list[KeptMessage]:
    upper = _LAST_POSITION if until is None else until
    rows = conn.execute(sql.messages, (upper, session_id), binary=True).fetchall()
    return [kept(p, session_id, StoredMessage(q, r, a, bytes(b))) for p, q, r, a, b in rows]


def messages_at(
    sql: Statements, keys: Sequence[tuple[int, int]], conn: Connection
) -> dict[tuple[int, int], KeptMessage]:
    params = ([p for p, _ in keys], [q for _, q in keys])
    rows = conn.execute(sql.messages_at, params, binary=True).fetchall()
    return {(p, q): kept(p, sid, StoredMessage(q, r, a, bytes(b))) for p, q, r, a, b, sid in rows}


def stored_messages(sql: Statements, after: int, limit: int, conn: Connection) -> list[tuple[int, str, StoredMessage]]:
    rows = conn.execute(sql.stored_messages, (after, limit, after), binary=True).fetchall()
    return [(p, sid, StoredMessage(q, r, a, bytes(b))) for p, sid, q, r, a, b in rows]


def erase(
    sql: Statements, session_id: str, hooks: tuple[EraseHook, ...], timeout: float, location: str, conn: Connection
) -> int:
    """Erase a deleted session's messages (``EventStore.erase``) on ``conn`` (autocommit)."""
    with conn.transaction():
        row = conn.execute(sql.stream_of, (session_id,)).fetchone()
        stream = None if row is None else row[0]
        deleted = stream is not None and any(
            isinstance(decode_event(bytes(data), 0), SessionDeleted)
            for (data,) in conn.execute(sql.stream_data, (stream,), binary=True)
        )
        if not deleted:
            raise ValueError(f"session {session_id!r} is not deleted: only a deleted session's messages are erased")
        rows = conn.execute(sql.stream_messages, (stream,), binary=True).fetchall()
        partitions: set[str] = set()
        if rows:
            found = [kept(p, session_id, StoredMessage(q, r, a, bytes(b))) for p, q, r, a, b in rows]
            for hook in hooks:
                hook.erasing(conn, session_id, found)
            partitions = {name for (name,) in conn.execute(sql.delete_messages, (stream,))}
    for name in partitions:  # a regclass's text: already a quoted, schema-qualified name
        rewrite(conn, name, timeout, location)
    if rows and stream is not None:
        for hook in hooks:
            hook.vacuum(conn, stream)
    return len(rows)


def rewrite(conn: Connection, name: str, timeout: float, location: str) -> None:
    """``VACUUM FULL`` of the table ``name`` (a quoted, qualified name), so that deleted rows leave its files, and
    again while a transaction still running somewhere in the database keeps some of them alive (its snapshot may
    still see them: PostgreSQL copies such rows into the new file), for ``timeout`` seconds at most; then a
    ``StoreError`` saying what is left and why."""
    held: list[int] = []

    def heard(notice: psycopg.errors.Diagnostic) -> None:
        for text in (notice.message_primary, notice.message_detail):
            found = _HELD.search(text or "")
            if found:
                held.append(int(found.group(1)))

    conn.add_notice_handler(heard)
    try:
        deadline = time.monotonic() + timeout
        while True:
            held.clear()
            conn.execute(b"VACUUM (FULL, VERBOSE) " + name.encode())
            if not any(held):
                return
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{location}: the erased rows are deleted, but {max(held)} of them stay in {name}'s files while a"
                    f" transaction that began before the erasure runs (for over {timeout:g} s); the next VACUUM after"
                    " it ends takes them"
                )
            time.sleep(_WAIT)  # a transaction somewhere holds the old rows visible: look again once it may have ended
    finally:
        conn.remove_notice_handler(heard)
