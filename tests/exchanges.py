"""Counting a PostgreSQL store's exchanges with the server (the tests that promise one round trip use it)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable

from events.postgres import PostgresStore

__all__ = ["round_trips"]


def round_trips(store: PostgresStore, action: Callable[[], object]) -> int:
    """How many exchanges ``action`` waits for on the store's one pooled connection: the ReadyForQuery messages the
    server sends, one per sync, as libpq's protocol trace shows them."""
    with tempfile.TemporaryFile() as trace:
        store.run(lambda conn: conn.pgconn.trace(trace.fileno()))
        try:
            action()
        finally:
            store.run(lambda conn: conn.pgconn.untrace())
        trace.seek(0)
        return trace.read().count(b"\tReadyForQuery\t")
