"""Counting a PostgreSQL store's round trips to the server (the tests that promise one or two use it)."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable

from events.postgres import PostgresStore
from events.postgres_hooks import Connection

__all__ = ["parsed", "round_trips"]


def _traced(store: PostgresStore, action: Callable[[], object], *, texts: bool = False) -> list[list[bytes]]:
    """The libpq protocol trace of ``action`` on the store's one pooled connection, a message a row (direction,
    length, type, ...); ``texts``: with statements sent unprepared, so that each ``Parse`` carries its text."""
    threshold = store.run(lambda conn: conn.prepare_threshold)

    def start(conn: Connection) -> None:
        conn.pgconn.trace(trace.fileno())
        if texts:
            conn.prepare_threshold = None

    def stop(conn: Connection) -> None:
        conn.pgconn.untrace()
        conn.prepare_threshold = threshold

    with tempfile.TemporaryFile() as trace:
        store.run(start)
        try:
            action()
        finally:
            store.run(stop)
        trace.seek(0)
        return [line.split(b"\t")[1:] for line in trace.read().splitlines() if line.count(b"\t") >= 2]


def parsed(store: PostgresStore, action: Callable[[], object]) -> list[bytes]:
    """Each statement ``action`` has the server execute, in order: its ``Parse`` message as traced (its name, text
    and parameter types)."""
    return [
        message[3]
        for message in _traced(store, action, texts=True)
        if message[0] == b"F" and message[2].startswith(b"Parse")
    ]


def round_trips(store: PostgresStore, action: Callable[[], object]) -> int:
    """How many times ``action`` sends to the server and then waits for its answer, on the store's one pooled
    connection: in libpq's protocol trace, each turn from client messages (``F``) to server messages (``B``). A
    pipeline's mid-way fetch is one (psycopg sends a Flush, not a Sync), as is its closing Sync."""
    directions = [message[0] for message in _traced(store, action)]
    return sum(1 for sent, then in itertools.pairwise(directions) if sent == b"F" and then == b"B")
