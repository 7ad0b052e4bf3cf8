"""The live set of sessions, folded from the log (``registry.fold``), with the indexes ``session/list`` pages are
read from: the in-memory reference read model. Each event is applied in O(log n): one dict update and at most one
remove/insert in the global index and in its cwd's index (``SortedList``s of sort keys).

Consistent walks: states are immutable, so the projection keeps, for the last ``window`` events, the state
each event replaced (its undo log). The list as of an earlier position P is then the current index minus the
sessions changed since P, plus those sessions as they were at P: exact, without copying anything.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import heapq
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING

from registry.filters import ListFilter, bound
from registry.fold import Change, Entry, fold
from registry.model import UNDATED_RANK, SessionState, sort_key
from registry.readmodel import Page

if TYPE_CHECKING:
    from sortedcontainers import SortedList

__all__ = ["Projection", "paused_gc"]

SortKey = tuple[int, str]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic GC while a bulk load allocates millions of acyclic objects it would walk again and again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


IndexName = tuple[str | None, str | None, bool]
"""A list index: (cwd, agent, archived), at most one of cwd and agent set."""


def _index_names(state: SessionState) -> tuple[IndexName, ...]:
    """The indexes a live session is in."""
    archived = state.archived
    if state.agent is None:
        return ((None, None, archived), (state.cwd, None, archived))
    return ((None, None, archived), (state.cwd, None, archived), (None, state.agent, archived))


def _new_index(keys: Iterable[SortKey]) -> SortedList[SortKey]:
    from sortedcontainers import SortedList  # noqa: PLC0415 - only the in-memory fold keeps indexes: not a read on tables

    return SortedList(keys)


class _AsOf:
    """The sessions changed after a position, each as it was at that position (None: not yet created)."""

    __slots__ = ("changed", "end", "extras")

    def __init__(self) -> None:
        self.changed: dict[str, SessionState | None] = {}
        self.end = 0
        self.extras: dict[ListFilter, list[tuple[SortKey, SessionState]]] = {}


class Projection:
    """Sessions by id, plus the recency indexes; knows the log position it reflects."""

    def __init__(self, *, window: int = 100_000) -> None:
        if window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
        self.position = 0
        self.window = window
        self._sessions: dict[str, SessionState] = {}
        # The list indexes, by (cwd, agent, archived) with at most one of cwd and agent set: every live session
        # is in the global index, its cwd's and (when it has one) its agent's, each split by ``archived``.
        self._indexes: dict[IndexName, SortedList[SortKey]] = {}
        # Undo log: the state each recent event replaced, oldest first, from index _undo_start on.
        self._undo_positions: list[int] = []
        self._undo: list[tuple[str, SessionState | None]] = []
        self._undo_start = 0
        self._undo_floor = 0  # every event after this position is in the undo log
        self._as_of_cache: dict[int, _AsOf] = {}
        self._stale = False  # the indexes lag the states (after a bulk load or a restore)

    # -- reading --------------------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionState | None:
        """The session's state, deleted ones included (a tombstone keeps its last state)."""
        return self._sessions.get(session_id)

    def __len__(self) -> int:
        """Live sessions."""
        self._fresh()
        return sum(len(self._indexes.get((None, None, archived), ())) for archived in (False, True))

    def sessions(self) -> Iterator[SessionState]:
        """Every live session, in list order."""
        self._fresh()
        sessions = self._sessions
        return (sessions[key[1]] for key in self._ordered(ListFilter(archived="include"), None))

    def states(self) -> dict[str, SessionState]:
        """All sessions by id, deleted ones included (a copy)."""
        return dict(self._sessions)

    def cwd_counts(self) -> dict[str, int]:
        self._fresh()
        counts: dict[str, int] = {}
        for (cwd, _agent, _archived), index in self._indexes.items():
            if cwd is not None and index:
                counts[cwd] = counts.get(cwd, 0) + len(index)
        return counts

    def archived_count(self, cwd: str | None = None) -> int:
        """Live archived sessions (in ``cwd``)."""
        self._fresh()
        return len(self._indexes.get((cwd, None, True), ()))

    @property
    def window_floor(self) -> int:
        """Walks started at or after this position are exact."""
        return self._undo_floor

    def _ordered(self, where: ListFilter, after: SortKey | None) -> Iterable[SortKey]:
        """The sort keys after ``after`` of the index that serves ``where`` (an agent's, a cwd's or the global
        one; both halves merged for ``include``). The other filters are the caller's to apply."""
        cwd, agent = (None, where.agent) if where.agent is not None else (where.cwd, None)
        if where.archived == "include":
            return heapq.merge(self._keys((cwd, agent, False), after), self._keys((cwd, agent, True), after))
        return self._keys((cwd, agent, where.archived == "only"), after)

    def _keys(self, name: IndexName, after: SortKey | None) -> Iterable[SortKey]:
        index = self._indexes.get(name)
        if index is None:
            return ()
        return index if after is None else index.irange(minimum=after, inclusive=(False, True))

    def page(self, *, as_of: int, after: SortKey | None, where: ListFilter, limit: int) -> Page:
        """Up to ``limit`` sessions following ``after`` in the list ``where`` selects as it was
         at position ``as_of``.

        Within the consistency window the page is exact. Past it, the walk goes on in the current list in
        the same order, leaving out every session changed since ``as_of`` (so none is shown twice).
        """
        self._fresh()
        current: Iterable[SortKey] = self._ordered(where, after)
        sessions = self._sessions
        served = "agent" if where.agent is not None else "cwd"
        if any(name != served for name in bound(where).narrowing):  # the index served one filter: test the others
            current = (key for key in current if where.matches(sessions[key[1]]))
        as_of_state = self._as_of(as_of)
        if as_of_state is None:
            stream: Iterator[SessionState] = (s for s in (sessions[key[1]] for key in current) if s.position <= as_of)
        elif not as_of_state.changed:
            stream = (sessions[key[1]] for key in current)
        else:
            changed = as_of_state.changed
            unchanged = ((key, sessions[key[1]]) for key in current if key[1] not in changed)
            extras = self._extras(as_of_state, where)
            if after is not None:
                extras = extras[bisect.bisect_right(extras, after, key=lambda pair: pair[0]) :]
            stream = (s for _, s in heapq.merge(unchanged, extras, key=lambda pair: pair[0]))
        states = list(islice(stream, limit + 1))
        more = len(states) > limit
        return Page(states[:limit], more, as_of_state is not None)

    def as_of(self, position: int) -> dict[str, SessionState | None] | None:
        """The state at ``position`` of every session changed since (None: not yet created), or None when
        ``position`` is past the consistency window. Sessions not in it are as they are now."""
        entry = self._as_of(position)
        return None if entry is None else entry.changed

    def _as_of(self, position: int) -> _AsOf | None:
        """Sessions changed after ``position`` with their state at it; None past the window."""
        if position >= self.position:
            return _AsOf()
        if position < self._undo_floor:
            return None
        entry = self._as_of_cache.get(position)
        if entry is None:
            if len(self._as_of_cache) >= 16:
                self._as_of_cache.pop(next(iter(self._as_of_cache)))
            entry = self._as_of_cache[position] = _AsOf()
            entry.end = bisect.bisect_right(self._undo_positions, position, lo=self._undo_start)
        if entry.end < len(self._undo):
            changed = entry.changed
            for session_id, before in self._undo[entry.end :]:
                if session_id not in changed:
                    changed[session_id] = before
            entry.end = len(self._undo)
            entry.extras.clear()
        return entry

    @staticmethod
    def _extras(entry: _AsOf, where: ListFilter) -> list[tuple[SortKey, SessionState]]:
        """The changed sessions that were live at the position (and in the list ``where``), in their order then."""
        extras = entry.extras.get(where)
        if extras is None:
            extras = sorted(
                ((sort_key(s), s) for s in entry.changed.values() if s is not None and where.matches(s)),
                key=lambda pair: pair[0],
            )
            entry.extras[where] = extras
        return extras

    # -- folding --------------------------------------------------------------------------------------

    def apply(self, record: Entry) -> Change | None:
        """Fold one event in (events at or below ``position`` are skipped: already applied)."""
        if record.position <= self.position:
            return None
        self._fresh()
        self.position = record.position
        before = self._sessions.get(record.session_id)
        after = fold(before, record)
        if after is None:
            return None
        self._set(before, after)
        self._remember(record.position, record.session_id, before)
        return Change(record.position, before, after)

    def _set(self, before: SessionState | None, after: SessionState) -> None:
        self._sessions[after.session_id] = after
        old_key = None if before is None or before.deleted else sort_key(before)
        new_key = None if after.deleted else sort_key(after)
        if old_key == new_key and (before is None or before.archived is after.archived):
            return
        indexes = self._indexes
        if old_key is not None:
            assert before is not None
            for name in _index_names(before):
                indexes[name].remove(old_key)
        if new_key is not None:
            for name in _index_names(after):
                index = indexes.get(name)
                if index is None:
                    index = indexes[name] = _new_index(())
                index.add(new_key)

    def _remember(self, position: int, session_id: str, before: SessionState | None) -> None:
        if self.window == 0:
            self._undo_floor = position
            return
        self._undo_positions.append(position)
        self._undo.append((session_id, before))
        if len(self._undo) - self._undo_start > self.window:
            self._undo_start += 1
            self._undo_floor = self._undo_positions[self._undo_start - 1]
            if self._undo_start >= max(self.window, 1024):
                del self._undo_positions[: self._undo_start]
                del self._undo[: self._undo_start]
                self._undo_start = 0
                self._as_of_cache.clear()  # cached indexes into the undo log moved

    def load(self, records: Iterable[Entry], *, head: int | None = None) -> int:
        """Fold many events at once (a cold rebuild or a long tail): states first, the indexes sorted once, when
        they are next read (so a fold in many chunks sorts once, not once a chunk).

        Only events within ``window`` of ``head`` (the log's head, when known) go into the undo log. The cyclic
        GC is paused meanwhile: the states hold no cycles, and it would otherwise walk them over and over.
        Returns how many events were read.
        """
        remember_from = 0 if head is None else head - self.window
        sessions = self._sessions
        count = 0
        with paused_gc():
            for record in records:
                count += 1
                if record.position <= self.position:
                    continue
                self.position = record.position
                before = sessions.get(record.session_id)
                after = fold(before, record)
                if after is None:
                    continue
                sessions[record.session_id] = after
                self._stale = True
                if record.position > remember_from:
                    self._remember(record.position, record.session_id, before)
                else:
                    self._undo_floor = record.position
        return count

    def _fresh(self) -> None:
        """Rebuild the indexes if a bulk load or a restore left them behind the states."""
        if not self._stale:
            return
        # Sorting once is far faster than inserting one key at a time; the key is ``sort_key``, and the index
        # names ``_index_names``, inlined (dicts by plain strings: hashing a name tuple per state costs more).
        everything: tuple[list[SortKey], list[SortKey]] = ([], [])
        by_cwd: dict[str, tuple[list[SortKey], list[SortKey]]] = {}
        by_agent: dict[str, tuple[list[SortKey], list[SortKey]]] = {}
        undated = UNDATED_RANK
        for state in self._sessions.values():
            if state.deleted:
                continue
            updated = state.updated_at
            key = (undated if updated is None else -(updated // 1_000_000), state.session_id)
            archived = state.archived
            everything[archived].append(key)
            keys = by_cwd.get(state.cwd)
            if keys is None:
                keys = by_cwd[state.cwd] = ([], [])
            keys[archived].append(key)
            agent = state.agent
            if agent is not None:
                keys = by_agent.get(agent)
                if keys is None:
                    keys = by_agent[agent] = ([], [])
                keys[archived].append(key)
        lists: dict[IndexName, list[SortKey]] = {}
        for archived in (False, True):
            lists[(None, None, archived)] = everything[archived]
            for cwd, pair in by_cwd.items():
                lists[(cwd, None, archived)] = pair[archived]
            for agent, pair in by_agent.items():
                lists[(None, agent, archived)] = pair[archived]
        self._indexes = {name: _new_index(keys) for name, keys in lists.items()}
        self._stale = False

    def restore(self, states: Iterable[SessionState], position: int) -> None:
        """Start from a snapshot's states at ``position`` (the undo window then starts there)."""
        self._sessions = {s.session_id: s for s in states}
        self.position = position
        self._undo_floor = position
        self._undo_positions, self._undo, self._undo_start = [], [], 0
        self._as_of_cache.clear()
        self._stale = True  # indexed by the next load() or read, once

    def __eq__(self, other: object) -> bool:
        """Same position, same sessions (deleted ones included); indexes are derived from them."""
        if not isinstance(other, Projection):
            return NotImplemented
        return self.position == other.position and self._sessions == other._sessions

    __hash__ = None  # type: ignore[assignment]

    def check_indexes(self) -> None:
        """Assert the indexes match the states (for tests)."""
        self._fresh()
        for name, index in self._indexes.items():
            assert list(index) == sorted(
                sort_key(s) for s in self._sessions.values() if not s.deleted and name in _index_names(s)
            )
        assert {name for s in self._sessions.values() if not s.deleted for name in _index_names(s)} <= set(
            self._indexes
        )
