"""The read model: the projection that answers ``session/list``, kept where each store keeps it.

It is derived data, always: only the fold of the log writes it, it knows the log position it reflects (its
checkpoint), and it can be rebuilt from the log at any time. Three implementations, one contract:

* ``TableReadModel`` (``sqlite.py``, ``postgres.py``): indexed tables beside the log in the same SQLite file or
  PostgreSQL schema. A process answers its first page with one indexed query, whatever the history's size, and
  every process on the store shares it. Rows carry the log position range in which each version of a session
  was current, so a page "as of P" is served exactly for any P within the window, in any process.
* ``MemoryReadModel`` (``memory.py``): the in-memory ``Projection``, the reference fold; it serves ``memory://``,
  any other store, and a read-only SQLite file whose tables lag its log.

A read model is caught up, never trusted: ``catch_up()`` folds whatever the log holds past the checkpoint
(another process's appends, a writer killed between its append and its fold, an older version of this library
that appended without folding) before an answer is given, in one transaction with the checkpoint.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, Self

from registry.model import Archived, SessionState
from registry.projection import Page

if TYPE_CHECKING:
    from events.store import EventStore

__all__ = ["DEFAULT_WINDOW", "PAST_WINDOW", "PastWindow", "ReadModel", "open_read_model"]

DEFAULT_WINDOW: Final = 100_000


class PastWindow:
    """The answer of ``state_at`` for a position the read model no longer keeps: fold the log instead."""

    _instance: PastWindow | None = None

    def __new__(cls) -> Self:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "PAST_WINDOW"


PAST_WINDOW: Final = PastWindow()


class ReadModel(abc.ABC):
    """Sessions folded from one store's log, as of a checkpoint position. Thread-safe."""

    #: Log positions a walk may span and still be served exactly (see ``window_floor``).
    window: int

    @abc.abstractmethod
    def catch_up(self, to: int | None = None) -> int:
        """Fold the log into the read model up to at least ``to`` (None: the log's head); returns the checkpoint."""

    @property
    @abc.abstractmethod
    def position(self) -> int:
        """The checkpoint as this process last saw it (a lower bound of the current one)."""

    @abc.abstractmethod
    def window_floor(self) -> int:
        """Walks that started at or after this position are served exactly."""

    @abc.abstractmethod
    def page(
        self,
        *,
        as_of: int,
        after: tuple[int, str] | None,
        cwd: str | None,
        limit: int,
        archived: Archived = "exclude",
        agent: str | None = None,
    ) -> Page:
        """Up to ``limit`` live sessions after the sort key ``after`` in the list (of ``cwd``, ``archived``, and
        ``agent``) as of position ``as_of`` (<= the checkpoint); past the window, the current list without the
        sessions changed since ``as_of``. The filters are applied before the limit, from indexes."""

    @abc.abstractmethod
    def get(self, session_id: str) -> SessionState | None:
        """The session at the checkpoint (deleted ones included), or None."""

    @abc.abstractmethod
    def state_at(self, session_id: str, position: int) -> SessionState | PastWindow | None:
        """The session as it was at ``position`` (<= the checkpoint): None if it did not exist yet,
        ``PAST_WINDOW`` if the read model no longer knows."""

    @abc.abstractmethod
    def count(self) -> int:
        """Live sessions at the checkpoint."""

    @abc.abstractmethod
    def cwd_counts(self) -> dict[str, int]:
        """Live sessions per cwd at the checkpoint."""

    @abc.abstractmethod
    def states(self) -> Iterator[SessionState]:
        """Every session at the checkpoint, deleted ones included, in no particular order (for ``verify``)."""

    @abc.abstractmethod
    def rebuild(self) -> int:
        """Throw the derived data away and fold it again from the whole log; returns the checkpoint."""

    def close(self) -> None:
        """Release connections; the store stays open."""

    @property
    def kind(self) -> str:
        """What keeps it, for people: ``tables`` or ``memory``."""
        return "memory"


def open_read_model(
    store: EventStore, *, window: int = DEFAULT_WINDOW, kind: str | None = None, catch_up: bool = True
) -> ReadModel:
    """The read model a store keeps: tables for SQLite and PostgreSQL, the in-memory fold otherwise.

    ``kind="memory"`` forces the in-memory fold (a reference, or a comparison in benchmarks). A read-only SQLite
    file whose tables are missing or behind its log is folded in memory, with a warning. ``catch_up=False``
    opens tables as they are (``verify`` looks at them before anything folds into them).
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be an int >= 0, got {window!r}")
    if kind not in (None, "memory", "tables"):
        raise ValueError(f"kind must be 'memory' or 'tables', got {kind!r}")
    from registry.readmodel.memory import MemoryReadModel  # noqa: PLC0415 - each backend loads only when used

    if kind != "memory":
        from events.sqlite import SqliteStore  # noqa: PLC0415

        if isinstance(store, SqliteStore):
            from registry.readmodel.sqlite import SqliteReadModel  # noqa: PLC0415

            tables = SqliteReadModel.open(store, window=window, catch_up=catch_up)
            if tables is not None:
                return tables
        elif type(store).__name__ == "PostgresStore":  # no psycopg import unless such a store is open
            from registry.readmodel.postgres import PostgresReadModel  # noqa: PLC0415

            return PostgresReadModel(store, window=window, catch_up=catch_up)  # type: ignore[arg-type]
        elif kind == "tables":
            raise ValueError(f"{type(store).__name__} keeps no read-model tables")
    return MemoryReadModel(store, window=window)
