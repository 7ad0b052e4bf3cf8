"""Counting a PostgreSQL store's round trips to the server (the tests that promise one or two use it)."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable

from events.postgres import PostgresStore

__all__ = ["round_trips"]


def round_trips(store: PostgresStore, action: Callable[[], object]) -> int:
    """How many times ``action`` sends to the server and then waits for its answer, on the store's one pooled
    connection: in libpq's protocol trace, each turn from client messages (``F``) to server messages (``B``). A
    pipeline's mid-way fetch is one (psycopg sends a Flush, not a Sync), as is its closing Sync."""
    with tempfile.TemporaryFile() as trace:
        store.run(lambda conn: conn.pgconn.trace(trace.fileno()))
        try:
            action()
        finally:
            store.run(lambda conn: conn.pgconn.untrace())
        trace.seek(0)
        directions = [line.split(b"\t")[1] for line in trace.read().splitlines() if line.count(b"\t") >= 2]
    return sum(1 for sent, then in itertools.pairwise(directions) if sent == b"F" and then == b"B")
