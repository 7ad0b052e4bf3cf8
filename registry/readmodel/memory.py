"""The in-memory read model: the reference fold (``Projection``), caught up from any store's log.

It serves ``memory://`` (whose log lives in the same process anyway) and any store that keeps no tables (or a
read-only file whose tables lag), and it is what the table read models are held to in the property tests.
Start-up loads the newest kept snapshot that checks out and folds the rest of the log, so its cost grows with the
history: stores that can keep tables do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from registry.backend import Backend
from registry.filters import ListFilter
from registry.model import SessionState
from registry.projection import Projection, paused_gc
from registry.readmodel import DEFAULT_WINDOW, PAST_WINDOW, Page, PastWindow, ReadModel
from registry.readmodel.usage_tables import UsageFold, UsageGroup, UsageQuery, grouped, usage_rows
from registry.snapshot import load_snapshot

__all__ = ["MemoryReadModel"]


class MemoryReadModel(ReadModel):
    """A ``Projection`` of a store's log, folded in at open and caught up before each answer."""

    def __init__(self, backend: Backend, *, window: int = DEFAULT_WINDOW, from_snapshot: bool = True) -> None:
        self.window = window
        self._store = store = backend.store
        self._lock = threading.RLock()
        self._projection = Projection(window=window)
        self._usage: UsageFold | None = None
        if from_snapshot:  # the newest kept snapshot, if one checks out, saves folding the log up to it
            snapshot = load_snapshot(backend, store.head())
            if snapshot is not None:
                with paused_gc():
                    self._projection.restore(snapshot.sessions, snapshot.position)
        self.catch_up()

    @property
    def projection(self) -> Projection:
        """The fold itself (read it under ``lock``)."""
        return self._projection

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def position(self) -> int:
        return self._projection.position

    def catch_up(self, to: int | None = None) -> int:
        projection = self._projection
        if to is not None and projection.position >= to:
            return projection.position
        with self._lock:
            head = self._store.head()
            if projection.position < head:
                if head - projection.position > 1000:
                    with paused_gc():
                        projection.load(self._store.scan(projection.position, until=head), head=head)
                else:
                    for entry in self._store.scan(projection.position, until=head):
                        projection.apply(entry)
            return projection.position

    def window_floor(self) -> int:
        return self._projection.window_floor

    def page(self, *, as_of: int, after: tuple[int, str] | None, where: ListFilter, limit: int) -> Page:
        with self._lock:
            return self._projection.page(as_of=as_of, after=after, where=where, limit=limit)

    def get(self, session_id: str) -> SessionState | None:
        return self._projection.get(session_id)

    def forks(self, session_id: str) -> list[SessionState]:
        with self._lock:
            states = self._projection.states().values()
        return [s for s in states if s.parent is not None and s.parent.session_id == session_id]

    def state_at(self, session_id: str, position: int) -> SessionState | PastWindow | None:
        with self._lock:
            changed = self._projection.as_of(position)
            if changed is None:
                return PAST_WINDOW
            if session_id in changed:
                return changed[session_id]
            return self._projection.get(session_id)

    def count(self) -> int:
        with self._lock:
            return len(self._projection)

    def cwd_counts(self) -> dict[str, int]:
        with self._lock:
            return self._projection.cwd_counts()

    def archived_count(self, cwd: str | None = None) -> int:
        with self._lock:
            return self._projection.archived_count(cwd)

    def usage(self, query: UsageQuery) -> list[UsageGroup]:
        """Folded from the log on first use, then from where it left off (``usage_tables.UsageFold``)."""
        with self._lock:
            if self._usage is None:
                self._usage = UsageFold()
            position = self._projection.position
            if self._usage.position < position:
                for entry in self._store.scan(self._usage.position, until=position):
                    self._usage.apply(entry)
                self._usage.position = position
            rows = usage_rows(self._usage.totals)
        return grouped(rows, query)

    def states(self) -> Iterator[SessionState]:
        with self._lock:
            return iter(list(self._projection.states().values()))

    def rebuild(self) -> int:
        with self._lock:
            self._projection = Projection(window=self.window)
            self._usage = None
            return self.catch_up()
