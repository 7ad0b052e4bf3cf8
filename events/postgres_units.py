"""A group commit's unit (``events.group_commit``: one ``append`` or one ``append_batch``) written to the PostgreSQL
store in bulk, inside the transaction the writer holds the append lock in (``events.postgres_write``): each
request laid out after the log's end as it moves, its links chained on the client, every row in two statements."""

from __future__ import annotations

from collections.abc import Sequence

from events.chain import ChainRule
from events.errors import ConcurrencyError
from events.group_commit import Unit
from events.model import LogEntry
from events.postgres_hooks import Connection
from events.postgres_sql import Statements
from events.store import ANY, PreparedAppend, Tip, record_from_row, retried_positions

__all__ = ["message_columns", "write_unit"]


def write_unit(
    conn: Connection, sql: Statements, rule: ChainRule, at: int, tip: Tip, unit: Unit, written: list[LogEntry]
) -> list[list[int]]:
    """Write one unit's requests after ``tip`` (moved past them) with two look-ups (stored ids, streams) and two bulk
    statements, recorded at ``at``; the entries it writes are added to ``written``. A request whose ids are stored
    already answers their positions (a retry); a stale expected version raises ``ConcurrencyError``."""
    stored_rows = conn.execute(sql.select_ids, ([i for r, _ in unit for i in r.event_ids],), binary=True)
    stream_rows = conn.execute(sql.select_streams, (list({r.session_id for r, _ in unit}),), binary=True)
    stored = {record.event_id: record for record in map(record_from_row, stored_rows.fetchall())}
    streams: dict[str, tuple[int | None, int]] = {sid: (n, v) for sid, n, v in stream_rows.fetchall()}
    changed: dict[str, tuple[int, int]] = {}
    columns: tuple[list[object], ...] = ([], [], [], [], [], [], [], [])
    kept: tuple[list[object], ...] = ([], [], [], [], [], [])
    results = []
    entries: list[LogEntry] = []
    for request, blobs in unit:
        session_id = request.session_id
        known = {i: stored[i] for i in request.event_ids if i in stored}
        retried = retried_positions(session_id, request.events, request.event_ids, known)
        if retried is not None:
            results.append(retried)
            continue
        stream, actual = streams.get(session_id, (None, 0))
        if request.expected_version != ANY and request.expected_version != actual:
            raise ConcurrencyError(session_id, request.expected_version, actual)
        if stream is None:
            assert tip.next_stream is not None
            stream, tip.next_stream = tip.next_stream, tip.next_stream + 1
        head, count = tip.head, len(blobs)
        rows = [
            (head + n, session_id, actual + n, event_id.bytes, at, blob)
            for n, (event_id, blob) in enumerate(zip(request.event_ids, blobs, strict=True), 1)
        ]
        chain = rule.links(tip.previous, rows)
        values: tuple[Sequence[object], ...] = (
            [head + n for n in range(1, count + 1)],
            [stream] * count,
            [actual + n for n in range(1, count + 1)],
            request.event_ids,
            [at] * count,
            [session_id] * count,
            blobs,
            chain,
        )
        for column, more in zip(columns, values, strict=True):
            column.extend(more)
        if request.content is not None:
            for column, more in zip(kept, message_columns(request, head, stream), strict=True):
                column.extend(more)
        entries += [LogEntry(head + n, session_id, actual + n, event) for n, event in enumerate(request.events, 1)]
        streams[session_id] = changed[session_id] = (stream, actual + count)
        tip.head, tip.previous = head + count, chain[-1]
        results.append(list(range(head + 1, head + count + 1)))
    if changed:
        conn.execute(
            sql.upsert_streams,
            (list(changed), [n for n, _ in changed.values()], [v for _, v in changed.values()]),
        )
        conn.execute(sql.insert_events, columns)
        if kept[0]:
            conn.execute(sql.insert_messages, kept)
    written += entries
    return results


def message_columns(request: PreparedAppend, head: int, stream: int) -> tuple[list[object], ...]:
    """The ``messages`` rows of a request whose events follow ``head`` on ``stream``, as the columns of one bulk
    insert: position, seq, stream, role, at, body."""
    columns: tuple[list[object], ...] = ([], [], [], [], [], [])
    for position, messages in enumerate(request.content or (), head + 1):
        for m in messages or ():
            for column, value in zip(columns, (position, m.seq, stream, m.role, m.at, m.body), strict=True):
                column.append(value)
    return columns
