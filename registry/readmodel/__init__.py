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
that appended without folding) before an answer is given, in one transaction with the checkpoint. The tables are
checked at the boundary - their schema against the one declared in ``schema.py`` when they open, each row and
blob when it is read (``keys.Seal``, ``guard.py``) - and a fault rebuilds them from the log or folds the
log in memory instead (``guard.GuardedReadModel``); ``check.py`` compares everything they hold with the log for
``verify``. Which read model a store keeps is its backend's answer (``registry.backend``), and
``guard.open_read_model(backend)`` opens it.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, Self

import msgspec

from registry.errors import ReadModelFault
from registry.filters import ListFilter
from registry.model import SessionState, sort_key

if TYPE_CHECKING:
    from registry.readmodel.usage_tables import UsageGroup, UsageQuery

__all__ = ["DEFAULT_WINDOW", "PAST_WINDOW", "Page", "PastWindow", "ReadModel", "ReadModelFault", "StoredTables"]

DEFAULT_WINDOW: Final = 100_000


class Page(msgspec.Struct, frozen=True):
    """One page of the list, as every read model answers it (the in-memory ``Projection`` too)."""

    states: list[SessionState]
    more: bool
    """More sessions follow the page (as of the same position)."""
    consistent: bool
    """The page is exactly the list as of the walk's position (False: past the consistency window)."""


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
    def page(self, *, as_of: int, after: tuple[int, str] | None, where: ListFilter, limit: int) -> Page:
        """Up to ``limit`` live sessions after the sort key ``after`` in the list ``where`` selects (its ``cwd``,
        ``archived`` and ``agent``) as of position ``as_of`` (<= the checkpoint); past the window, the current list
        without the sessions changed since ``as_of``. The filters are applied before the limit, from indexes."""

    def pages(self, *, as_of: int, where: ListFilter, limit: int) -> Iterator[Page]:
        """The whole list ``where`` selects as of ``as_of``, page by page as ``session/list`` walks it (each page
        after the last key of the one before): what ``verify`` and the tests compare with the fold."""
        after = None
        while True:
            page = self.page(as_of=as_of, after=after, where=where, limit=limit)
            yield page
            if not page.more:
                return
            after = sort_key(page.states[-1])

    def first_page(self, *, where: ListFilter, limit: int) -> tuple[int, Page]:
        """The first page of a walk: caught up to the log's head, and the position it is as of. A backend may
        answer it with one query (PostgreSQL: the freshness check and the page in one statement)."""
        as_of = self.catch_up()
        return as_of, self.page(as_of=as_of, after=None, where=where, limit=limit)

    @abc.abstractmethod
    def get(self, session_id: str) -> SessionState | None:
        """The session at the checkpoint (deleted ones included), or None."""

    def last_seen(self, session_id: str) -> SessionState | None:
        """The session as this process last saw it - maybe older than the checkpoint: what a command decides from
        on its first try, which the append's expected version refuses if another writer moved the session since.
        A shared store's read model answers it without a round trip when it can."""
        return self.get(session_id)

    @abc.abstractmethod
    def forks(self, session_id: str) -> list[SessionState]:
        """The sessions forked from ``session_id`` at the checkpoint (deleted ones included), in no particular
        order: one indexed look-up where the read model keeps tables."""

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
    def archived_count(self, cwd: str | None = None) -> int:
        """Live archived sessions at the checkpoint (in ``cwd``): counted from the ``archived`` index's range."""

    @abc.abstractmethod
    def usage(self, query: UsageQuery) -> list[UsageGroup]:
        """The daily usage totals at the checkpoint that ``query`` selects, summed by its group, model and currency
        (``usage_tables``: the tables' ``rm_usage``, or the log folded in memory), in group order."""

    @abc.abstractmethod
    def states(self) -> Iterator[SessionState]:
        """Every session at the checkpoint, deleted ones included, in no particular order (for ``verify``)."""

    @abc.abstractmethod
    def rebuild(self) -> int:
        """Throw the derived data away and fold it again from the whole log; returns the checkpoint."""

    def reseal(self) -> bool:
        """Whether tables that failed their seal serve again with the key the store keeps now: another process
        made a new key where the one this process read was lost, and rebuilt them with it - then this one takes
        it up instead of rebuilding them back (two processes never rebuild each other's tables in turn)."""
        return False

    def close(self) -> None:
        """Release connections; the store stays open."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def tables(self) -> StoredTables | None:
        """The tables it answers from, as stored (None: it keeps none, the log is folded in memory)."""
        return None

    @property
    def kind(self) -> str:
        """What keeps it, for people: ``tables`` or ``memory``."""
        return "memory" if self.tables is None else "tables"


class StoredTables(abc.ABC):
    """A read model's tables as they are stored - what ``verify`` compares with the log and ``rebuild`` says it
    replaced. Read, never repaired: nothing here rebuilds or catches up."""

    @abc.abstractmethod
    def schema_problems(self) -> list[str]:
        """How the tables depart from the schema this version makes ([]: not at all)."""

    @abc.abstractmethod
    def stored(self, table: str) -> Iterator[tuple[Any, ...]]:
        """Every row of ``table`` as stored (``tables.CURRENT_COLUMNS`` / ``PAST_COLUMNS``)."""

    @abc.abstractmethod
    def stored_meta(self) -> dict[str, int]:
        """``rm_meta`` as stored."""

    @abc.abstractmethod
    def storage_problems(self) -> list[str]:
        """What the database itself finds wrong with the tables and their indexes."""

    @abc.abstractmethod
    def checkpoint_matches_log(self) -> bool:
        """Whether the checkpoint is a position of this log with the chain link recorded there."""
