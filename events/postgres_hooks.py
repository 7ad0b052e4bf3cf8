"""The contract between the PostgreSQL store's write path (``events.postgres_write``) and the work it runs in an
append's own transaction - the registry's read model (``registry.readmodel.postgres_fold``) is the one there is.
A hook queues statements in the append's pipeline; it never fetches on the way in the one-exchange path. For a
lone event it may instead write its part into the append's own statement (``at_end``), where the server finds the
event's position: then the append is one exchange whoever appended last."""

from __future__ import annotations

from typing import NamedTuple, Protocol

import psycopg
from psycopg.rows import TupleRow

from events.content import KeptMessage
from events.model import Event, LogEntry

__all__ = ["AtEnd", "CommitHook", "Connection", "EraseHook", "KnownPart"]

Connection = psycopg.Connection[TupleRow]


class AtEnd(NamedTuple):
    """A hook's part of a lone event's one-statement append (``events.postgres_sql.Statements.at_end``), prepared
    without the event's position: SQL the store writes into its statement (each piece the same bytes object every
    time: the store builds a statement once per set of pieces), and the parameters it names (``%(name)s``, prefixed
    by the hook; the store's own ``%(session)s`` may be used)."""

    guard: bytes
    """A boolean over the statement's snapshot, taken once the append lock is granted; ``tip`` (``position``,
    ``chain``) is the log's end before the append, ``cur`` (``stream``, ``version``) the session's stream before
    it. Nothing is written unless it holds."""
    writes: bytes
    """CTEs (``name AS (...)``, comma-separated) over ``ev`` (the event's ``position`` and ``chain``; no row when
    nothing was written)."""
    answer: bytes
    """An expression the statement answers (``placed`` gets its value)."""
    params: dict[str, object]


class KnownPart(NamedTuple):
    """A hook's writes for an append sent from the log's end its process knows (``fold_known``), written into the
    store's own statement of that append (``events.postgres_sql.Statements.known``) rather than queued after it:
    one statement fewer for psycopg to send and the server to run. Each piece the same bytes object every time."""

    guard: bytes
    """A boolean over the statement's snapshot, taken once the append lock is granted: nothing is written (the
    events neither) unless it holds, and the store then reads the log's end first."""
    writes: bytes
    """CTEs (``name AS (...)``, comma-separated), each writing only when ``(SELECT ok FROM ok)`` (the guards)."""
    params: dict[str, object]


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

    def known_part(self) -> KnownPart | None:
        """What ``fold_known`` prepared as a part of the append's own statement; None: the store queues
        ``write_known``'s statements instead."""
        ...

    def at_end(self, session_id: str, version: int | None, event: Event) -> AtEnd | None:
        """This hook's part of the one-statement append of ``event`` to ``session_id`` at ``version`` (None: any,
        the stream's next - the hook's guard then says which it assumed), wherever the log ends; None when it
        cannot prepare one (the append then reads first and calls ``look_up``)."""
        ...

    def placed(self, position: int, answer: object) -> None:
        """The one-statement append wrote the event at ``position``; ``answer`` is the value of the hook's
        ``AtEnd.answer`` (``committed`` follows)."""
        ...

    def committed(self) -> None:
        """The transaction that last ran ``in_transaction``, ``write_known``, ``known_part``'s or ``at_end``'s part
        committed."""
        ...


class EraseHook(Protocol):
    """Work done in an erasure's transaction (``PostgresStore.add_erase_hook``): ``messages`` are the rows about to
    be deleted, read back, for an index derived from them to take them out; ``vacuum`` runs after the commit, on
    the same connection in autocommit, to take the dead rows of the hook's own tables (for the session's
    ``stream``) off the disk."""

    def erasing(self, conn: Connection, session_id: str, messages: list[KeptMessage]) -> None: ...

    def vacuum(self, conn: Connection, stream: int) -> None: ...
