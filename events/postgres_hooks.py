"""The contract between the PostgreSQL store's write path (``events.postgres_write``) and the work it runs in an
append's own transaction - the registry's read model (``registry.readmodel.postgres_fold``) is the one there is.
A hook queues statements in the append's pipeline; it never fetches on the way in the one-exchange path."""

from __future__ import annotations

from typing import Protocol

import psycopg
from psycopg.rows import TupleRow

from events.model import LogEntry

__all__ = ["CommitHook", "Connection"]

Connection = psycopg.Connection[TupleRow]


class CommitHook(Protocol):
    """Work done in an append's own transaction (see ``PostgresStore.add_commit_hook``)."""

    def look_up(self, conn: Connection, session_ids: list[str]) -> object:
        """Queue the statements whose answers ``in_transaction`` needs (pipeline mode: do not fetch them here);
        the append lock is held. Returns what ``in_transaction`` gets back as ``looked_up``."""
        ...

    def in_transaction(
        self, conn: Connection, looked_up: object, written: list[LogEntry], head_before: int, chain: bytes
    ) -> None:
        """Queue this transaction's writes: ``written`` are its new entries (positions after ``head_before``;
        none for a retry), ``chain`` the log's link at its last position."""
        ...

    def fold_known(self, written: list[LogEntry], head_before: int, chain: bytes) -> bool:
        """Prepare the writes for ``written`` without reading anything (the append goes in one exchange); False
        when the hook does not know enough, and the append reads first."""
        ...

    def write_known(self, conn: Connection) -> None:
        """Queue what ``fold_known`` prepared, with a guard that fails the transaction with serialization_failure
        if the hook's data moved meanwhile."""
        ...

    def committed(self) -> None:
        """The transaction that last ran ``in_transaction`` or ``write_known`` committed."""
        ...
