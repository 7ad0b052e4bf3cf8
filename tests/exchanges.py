"""Counting a PostgreSQL store's round trips to the server (the tests that promise one or two use it)."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable

from events.postgres import PostgresStore

__all__ = ["round_trips", "statements"]


def _traced(store: PostgresStore, action: Callable[[], object]) -> list[list[bytes]]:
    """The libpq protocol trace of ``action`` on the store's one pooled connection, a message a row (direction,
    length, type, ...)."""
    with tempfile.TemporaryFile() as trace:
        store.run(lambda conn: conn.pgconn.trace(trace.fileno()))
        try:
            action()
        finally:
            store.run(lambda conn: conn.pgconn.untrace())
        trace.seek(0)
        return [line.split(b"\t")[1:] for line in trace.read().splitlines() if line.count(b"\t") >= 2]


def statements(store: PostgresStore, action: Callable[[], object]) -> int:
    """How many statements ``action`` has the server execute (the ``Execute`` messages it sends)."""
    return sum(1 for message in _traced(store, action) if message[0] == b"F" and message[2].startswith(b"Execute"))


def round_trips(store: PostgresStore, action: Callable[[], object]) -> int:
    """How many times ``action`` sends to the server and then waits for its answer, on the store's one pooled
    connection: in libpq's protocol trace, each turn from client messages (``F``) to server messages (``B``). A
    pipeline's mid-way fetch is one (psycopg sends a Flush, not a Sync), as is its closing Sync."""
    directions = [message[0] for message in _traced(store, action)]
    return sum(1 for sent, then in itertools.pairwise(directions) if sent == b"F" and then == b"B")
