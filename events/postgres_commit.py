"""How a PostgreSQL append's transaction goes to the server - BEGIN, its statements and COMMIT in one pipeline, one
sync - and when its caller hears of it: the commit modes.

Commit modes (``PostgresStore(commit=...)``):

- ``in-lock`` (the default): COMMIT waits for its WAL flush with the lock held. An event is visible to anyone
  only once it is durable.
- ``flush-barrier``: the append transaction commits with ``synchronous_commit = off`` - the lock is released
  without waiting for the flush - and a second transaction in the same exchange (a logical message, committed
  with the session's ``synchronous_commit``) waits for a flush that covers it; the caller hears of the append
  only then. Concurrent barriers share flushes, and a durable later commit implies every earlier one (WAL order),
  so no acknowledged append is ever lost. The price: between the COMMIT and the flush, other processes and hosts
  can read the event (and are NOTIFYed of it, NOTIFY goes at COMMIT); a server crash in that window loses it
  although it was seen. After the restart its positions are given to other events, so a subscriber elsewhere
  that had passed them skips those (it asks for ``> last``), a kept snapshot taken past them is reported as a
  log shorter than seen (``registry.evidence``), and a walk or cursor as of such a position reads other events
  there. The read model, in the same database, loses the same tail and stays consistent with the log. It pays
  where the flush is most of the time the lock is held (a slow disk), which is not the default's case
  (``docs/scale.md``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final, Literal

import psycopg
from psycopg.pq import TransactionStatus

from events.postgres_hooks import Connection
from events.postgres_sql import Statements

__all__ = ["COMMIT_MODES", "CommitMode", "Committer"]

CommitMode = Literal["flush-barrier", "in-lock"]
COMMIT_MODES: Final[tuple[CommitMode, ...]] = ("flush-barrier", "in-lock")


class Committer:
    """An append's transaction in one pipeline, in one of the commit modes."""

    def __init__(self, statements: Statements, commit: CommitMode = "in-lock") -> None:
        if commit not in COMMIT_MODES:
            raise ValueError(f"commit must be one of {', '.join(COMMIT_MODES)}, not {commit!r}")
        self._sql = statements
        self.barrier = commit == "flush-barrier"
        """The flush barrier: the caller hears of an append once a flush covers it (``flush-barrier``)."""

    @contextlib.contextmanager
    def committing(self, conn: Connection, *, implicit: bool = False) -> Iterator[psycopg.Pipeline]:
        """The append's transaction in one pipeline: BEGIN, what the block queues and COMMIT go out together, and
        the pipeline's end is the only sync - one round trip unless the block fetches a result on the way (psycopg's
        own transaction block syncs on entering and on leaving a pipeline: a lone append took four). A
        ``psycopg.Rollback`` raised in the block rolls back instead. psycopg learns that a transaction is open only
        from a sync: sync the pipeline it yields before opening ``conn.transaction()`` (a savepoint) in the block,
        or psycopg takes it for the outer transaction and commits it there.

        ``implicit`` (a block that fetches nothing on the way; not with the flush barrier): no BEGIN and COMMIT -
        on the pool's autocommit connections the statements a pipeline sends before its sync are one implicit
        transaction, which the server commits at the sync or rolls back whole at the first error: two messages fewer
        an append (the time that saves: ``benchmarks/bounds.toml``).

        The server's error, met in the block or at the pipeline's end, is raised once the pipeline is left (so
        psycopg does not log the aborted pipeline's own error as a warning on the way out), after a ROLLBACK: it
        ends an aborted transaction, and psycopg's rollback also forgets the statements it meant to prepare in the
        messages the server skipped (else "prepared statement _pg3_9 does not exist" on their next use - after an
        implicit transaction too, which leaves the connection idle: a BEGIN first gives the rollback something to
        end; caught by the concurrent writers test).

        With the flush barrier, the transaction commits without waiting for its WAL flush (the append lock is
        released at once), and a second transaction in the same exchange waits for a flush that covers it
        (``flush``): the caller hears of the append only once it is durable."""
        assert not (implicit and self.barrier), "the flush barrier needs its explicit COMMIT"
        failed: psycopg.Error | None = None  # the server's error, met by a statement of the block or at the sync
        try:
            with conn.pipeline() as pipeline:
                if not implicit:
                    conn.execute(b"BEGIN", prepare=False)
                    if self.barrier:
                        conn.execute(self._sql.commit_unflushed, prepare=False)
                try:
                    yield pipeline
                except psycopg.Rollback:
                    conn.execute(b"ROLLBACK", prepare=False)
                    return
                except psycopg.Error as exc:
                    failed = exc
                else:
                    if not implicit:
                        conn.execute(b"COMMIT", prepare=False)
                        self.flush(conn)
        except psycopg.Error as exc:
            if failed is None:
                failed = exc
        finally:
            if not conn.closed:
                status = conn.info.transaction_status
                if failed is not None and status == TransactionStatus.IDLE:
                    conn.execute(b"BEGIN", prepare=False)
                    status = TransactionStatus.INTRANS
                if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):  # not a broken connection
                    conn.rollback()
        if failed is not None:
            raise failed

    def flush(self, conn: Connection) -> None:
        """The flush barrier: a transaction that writes a WAL record (a logical message, no table) and commits
        with the session's ``synchronous_commit`` (on, unless the user chose otherwise), so it returns once the
        WAL up to its commit record is flushed - and with it every commit before it, this connection's append
        too. Concurrent barriers share one flush. Queued in the caller's pipeline, if any."""
        if self.barrier:
            with conn.pipeline():
                conn.execute(b"BEGIN", prepare=False)
                conn.execute(self._sql.flush)
                conn.execute(b"COMMIT", prepare=False)
