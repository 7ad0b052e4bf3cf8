"""Group commit: concurrent appenders in one process share one durable transaction.

A durable commit costs a disk flush, a few milliseconds that do not grow with what the transaction holds. So
the threads of a host that append at the same moment queue their work; the first one becomes the leader and
commits everything queued in one transaction, then hands the lead to the next waiter, and everyone's work that
was in the group is acknowledged only after that commit returned. While a leader waits for the disk, the next
group gathers by itself: there is no timer and no added latency for a lone appender.

The store's ``commit`` function decides what each piece of work's outcome is (positions, or the exception it
raises for that work alone, so a conflicting member fails without its neighbours); an exception from
``commit`` itself (the transaction failed) is every member's outcome, each member raising its own copy (caused by
the original), never one object in several threads.
"""

from __future__ import annotations

import abc
import threading
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar, cast

from events.codec import encode_event
from events.model import Event
from events.store import EventStore, PreparedAppend

__all__ = ["GroupCommit", "GroupCommitStore", "Unit"]

Unit = list[tuple[PreparedAppend, list[bytes]]]
"""One ``append`` or ``append_batch`` of a ``GroupCommitStore``: its requests, each with its events encoded."""

W = TypeVar("W")  # one appender's work
R = TypeVar("R")  # its result


def _own_copy(exc: BaseException) -> BaseException:
    """A copy of ``exc`` for one member's thread to raise (its cause: the original, with the leader's traceback):
    one object raised in several threads at once would have its traceback rewritten under each of them."""
    fresh = type(exc).__new__(type(exc), *exc.args)  # the same type and attributes, without running __init__
    fresh.args = exc.args
    if hasattr(exc, "__dict__"):
        fresh.__dict__.update(exc.__dict__)
    fresh.__traceback__ = None
    fresh.__cause__ = exc
    return fresh


class _Slot(Generic[W, R]):
    __slots__ = ("error", "lead", "ready", "result", "work")

    def __init__(self, work: W) -> None:
        self.work = work
        self.result: R | None = None
        self.error: BaseException | None = None
        self.lead = False  # woken to lead the next group, not with an outcome
        self.ready = threading.Event()


class GroupCommit(Generic[W, R]):
    """Runs ``commit(works) -> list[result or exception]`` for groups of concurrently submitted work."""

    def __init__(self, commit: Callable[[list[W]], list[R | BaseException]]) -> None:
        self._commit = commit
        self._lock = threading.Lock()
        self._queue: list[_Slot[W, R]] = []
        self._leading = False

    def submit(self, work: W) -> R:
        """Commit ``work`` (with whatever else is queued) and return its result, or raise its exception."""
        slot: _Slot[W, R] = _Slot(work)
        with self._lock:
            self._queue.append(slot)
            lead = not self._leading
            self._leading = True
        if not lead:
            slot.ready.wait()
        if lead or slot.lead:
            self._lead()
        if slot.error is not None:
            raise slot.error
        return cast(R, slot.result)  # no error: the commit set the result

    def _lead(self) -> None:
        with self._lock:
            group, self._queue = self._queue, []
        try:
            try:
                outcomes = self._commit([slot.work for slot in group])
                if len(outcomes) != len(group):
                    raise RuntimeError(f"a group commit gave {len(outcomes)} outcomes for {len(group)} appends")
            except BaseException as exc:  # the transaction failed: nothing of the group was committed
                outcomes = [_own_copy(exc) for _ in group]  # one exception object per thread that raises it
            for slot, outcome in zip(group, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    slot.error = outcome
                else:
                    slot.result = outcome
        finally:
            with self._lock:
                if self._queue:
                    following = self._queue[0]
                    following.lead = True
                    following.ready.set()
                else:
                    self._leading = False
            for slot in group:
                slot.ready.set()


class GroupCommitStore(EventStore):
    """A store whose appends share durable transactions through a ``GroupCommit``: it encodes each append's events
    on the appender's thread and queues them as one ``Unit``; a backend sets ``_group`` (built on its
    ``_commit_group``) and writes the units of a group in one transaction."""

    _group: GroupCommit[Unit, list[list[int]]]

    @abc.abstractmethod
    def _commit_group(self, units: list[Unit]) -> list[list[list[int]] | BaseException]:
        """Write ``units`` in one transaction: each one's positions, or the exception that fails it alone."""

    def _append(
        self, session_id: str, events: list[Event], expected_version: int, event_ids: list[uuid.UUID]
    ) -> list[int]:
        request = PreparedAppend(session_id, events, expected_version, event_ids)
        return self._group.submit([(request, [encode_event(e) for e in events])])[0]

    def _append_batch(self, requests: list[PreparedAppend]) -> list[list[int]]:
        return self._group.submit([(r, [encode_event(e) for e in r.events]) for r in requests])
