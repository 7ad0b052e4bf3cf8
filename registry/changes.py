"""The change stream: each change of the registry as the minimal ACP ``session_info_update`` a client needs.

``ListChange`` items say what happened to the list a client shows: ``Added`` (a new session), ``Updated`` (the
``session/update`` notification carrying a ``session_info_update`` with only the fields that changed: a new
value, or an explicit ``null`` for a clear), ``Removed`` (deleted). A list from ``session/list`` at position P
plus every item after P equals a fresh ``session/list``. The items are ``registry.diffs``' (imported from there
or from ``registry``); this module only streams them.

How items flow, and why:

* The stream is fed by the same fold that answers ``session/list`` (each change carries the session before
  and after the event), so the two never disagree, and "what the subscriber last saw" is simply the state
  before the change: no per-subscriber copy of the list.
* Subscribing registers a listener with the registry's follower at the position H it has folded to
  (``registry.follow``, atomic), replays (P, H] from the log, then drains what the listener buffered: no gap,
  no duplicate. A subscribe whose replay fails unregisters its listener before the error reaches the
  subscriber: nothing stays registered, and a follower nobody needs stops.
* The follower's thread only appends to a subscription's queue (writers never touch it). Items reach the
  subscriber on its scheduler (by default a thread of its own, kept for the subscription's life and ended with
  it; ``loop=`` delivers on an asyncio loop), one at a time, in log order for each session. When the registry
  closes, what is queued is delivered, then ``on_completed``. A subscriber that raises is detached and logged,
  and one that falls ``max_pending`` items behind gets ``SubscriberTooSlow``: neither can stall the writer or
  other subscribers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

import reactivex
from reactivex import GroupedObservable, Observable, abc
from reactivex import operators as ops
from reactivex.disposable import Disposable, SingleAssignmentDisposable
from reactivex.internal.exceptions import DisposedException
from reactivex.scheduler import EventLoopScheduler
from reactivex.scheduler.eventloop import AsyncIOThreadSafeScheduler

from registry.diffs import (
    ListChange,
    SessionNotification,
    Updated,
    shown_as,
)
from registry.errors import SubscriberTooSlow
from registry.fold import Change, fold
from registry.model import SessionState

if TYPE_CHECKING:
    from events.store import EventStore
    from registry.follow import Following, Listener

__all__ = ["StreamOptions", "SubscriberTooSlow", "list_changes", "notifications"]

log = logging.getLogger(__name__)


def _burst(group: GroupedObservable[str, Change]) -> Observable[list[Change]]:
    return group.pipe(ops.to_list())


def _merge(burst: Sequence[Change]) -> Change:
    """Changes of one session in a burst, as one: from the first one's before to the last one's after."""
    return Change(burst[-1].position, burst[0].before, burst[-1].after)


class _Feed:
    """One subscription's queue of changes, drained on its scheduler one item at a time.

    ``transform`` turns a change into what the observer gets (None: nothing for this change); the drain calls the
    observer directly, without an operator chain per item, and detaches an observer that raises.
    """

    def __init__(
        self,
        observer: abc.ObserverBase[Any],
        scheduler: abc.SchedulerBase,
        max_pending: int,
        transform: Callable[[Change], Any] | None = None,
        *,
        owned: bool = False,
    ) -> None:
        self._observer = observer
        self._transform = transform
        self._scheduler = scheduler
        self._owned = owned  # the scheduler is this feed's own delivery thread: disposed when the feed ends
        self._max_pending = max_pending
        self._queue: deque[Change] = deque()
        self._lock = threading.Lock()
        self._draining = False
        self._held = True  # until the catch-up is in the queue
        self._stopped = False
        self.remove_listener: Callable[[], None] = lambda: None

    def on_changes(self, changes: Sequence[Change]) -> None:
        """Called by the registry, under its lock: queue only, never run subscriber code here."""
        with self._lock:
            if self._stopped:
                return
            self._queue.extend(changes)
            if len(self._queue) > self._max_pending:
                self._stopped = True
                self._queue.clear()
                overflow, start = True, False
            else:
                overflow, start = False, self._start_draining()
        if start:
            self._scheduler.schedule(self._drain)
        if overflow:
            self.remove_listener()
            self._scheduler.schedule(self._overflowed)

    def _overflowed(self, _scheduler: abc.SchedulerBase, _state: Any = None) -> None:
        too_slow = SubscriberTooSlow(f"the subscriber fell more than {self._max_pending} changes behind")
        try:
            self._observer.on_error(too_slow)
        finally:
            self._end_delivery()

    def close(self) -> None:
        """The registry closed: what is queued is delivered, then ``on_completed``, and the delivery ends."""
        with self._lock:
            if self._stopped:
                return
            self._held = False
        self._scheduler.schedule(self._completed)

    def _completed(self, scheduler: abc.SchedulerBase, _state: Any = None) -> None:
        self._drain(scheduler)
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            self._observer.on_completed()
        except Exception:
            log.exception("a change-stream subscriber raised on completion")
        finally:
            self._end_delivery()

    def _end_delivery(self) -> None:
        scheduler = self._scheduler
        if self._owned and isinstance(scheduler, EventLoopScheduler):
            # Its thread ends after the action it runs. The no-op first: a dispose while the thread runs an action
            # (from it or from another) would otherwise find it waiting afterwards, its wake-up spent.
            with contextlib.suppress(DisposedException):
                scheduler.schedule(_nothing)
            scheduler.dispose()

    def release(self, catch_up: Sequence[Change]) -> None:
        with self._lock:
            self._queue.extendleft(reversed(catch_up))
            self._held = False
            start = self._start_draining()
        if start:
            self._scheduler.schedule(self._drain)

    def _start_draining(self) -> bool:
        """Under the lock: whether the caller must schedule a drain (outside the lock: a scheduler may run it
        at once, in this thread)."""
        if not self._draining and not self._held and self._queue:
            self._draining = True
            return True
        return False

    def _drain(self, _scheduler: abc.SchedulerBase, _state: Any = None) -> None:
        while True:
            with self._lock:
                if self._stopped or not self._queue:
                    self._draining = False
                    return
                batch = list(self._queue)  # one lock round per batch, not per item
                self._queue.clear()
            transform, on_next = self._transform, self._observer.on_next
            for change in batch:
                if self._stopped:
                    return
                try:
                    if transform is None:
                        on_next(change)
                    else:
                        item = transform(change)
                        if item is not None:
                            on_next(item)
                except Exception:
                    log.exception("a change-stream subscriber raised; it has been detached")
                    self.stop()
                    return

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._queue.clear()
        self.remove_listener()
        self._end_delivery()


def _nothing(_scheduler: abc.SchedulerBase, _state: Any = None) -> None:
    pass


def _delivery_thread(target: Callable[[], None]) -> threading.Thread:
    return threading.Thread(target=target, name="acp-registry delivery", daemon=True)


class ChangeSource(Protocol):
    """What the stream needs of a registry: its store, whether it shows ``additionalDirectories``, and a way to
    start following its changes atomically (``SessionRegistry`` is one)."""

    @property
    def store(self) -> EventStore: ...

    @property
    def additional_directories(self) -> bool: ...

    def follow(self, listener: Listener, on_close: Callable[[], None] | None = None) -> Following: ...


def _catch_up(store: EventStore, following: Following, start: int) -> list[Change]:
    """The changes (start, following.position], each with the session's state before it, rebuilt from the log."""
    head = following.position
    states: dict[str, SessionState | None] = {}
    changes: list[Change] = []
    for entry in store.scan(start, until=head):
        session_id = entry.session_id
        if session_id not in states:
            states[session_id] = following.state_at(session_id, start)
        before = states[session_id]
        after = fold(before, entry)
        if after is not None:
            states[session_id] = after
            changes.append(Change(entry.position, before, after))
    return changes


def _raw_changes(
    source: ChangeSource,
    after: int | None,
    delivery: Callable[[], abc.SchedulerBase],
    max_pending: int,
    transform: Callable[[Change], Any] | None = None,
    *,
    owned: bool = False,
) -> Observable[Any]:
    """Changes after ``after`` (default: from now on), then live, delivered on the scheduler ``delivery`` makes for
    each subscription (``transform``ed; ``owned``: that scheduler is the subscription's own, disposed when it
    ends)."""

    def subscribe(observer: abc.ObserverBase[Any], _default: abc.SchedulerBase | None = None) -> abc.DisposableBase:
        feed = _Feed(observer, delivery(), max_pending, transform, owned=owned)
        following = source.follow(feed.on_changes, feed.close)
        feed.remove_listener = following.stop
        start = following.position if after is None else after
        if start > following.position:
            following.stop()
            raise ValueError(f"after={start} is beyond the log's head ({following.position})")
        try:
            caught_up = _catch_up(source.store, following, start) if start < following.position else []
        except BaseException:
            following.stop()  # a failed subscribe leaves nothing registered (and stops an unneeded follower)
            raise
        feed.release(caught_up)
        return Disposable(feed.stop)

    return reactivex.create(subscribe)


def _isolated(source: Observable[Any]) -> Observable[Any]:
    """Detach (and log) a subscriber whose ``on_next`` raises, whichever thread called it."""

    def subscribe(observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None) -> abc.DisposableBase:
        subscription = SingleAssignmentDisposable()
        failed = False

        def on_next(item: Any) -> None:
            nonlocal failed
            if failed:
                return
            try:
                observer.on_next(item)
            except Exception:
                failed = True
                log.exception("a change-stream subscriber raised; it has been detached")
                subscription.dispose()

        subscription.disposable = source.subscribe(
            on_next, observer.on_error, observer.on_completed, scheduler=scheduler
        )
        return subscription

    return reactivex.create(subscribe)


class StreamOptions(TypedDict, total=False):
    """How a change stream is delivered (``list_changes``, ``notifications``; see ``list_changes``)."""

    coalesce: float | None
    scheduler: abc.SchedulerBase | None
    loop: asyncio.AbstractEventLoop | None
    max_pending: int


def list_changes(
    source: ChangeSource,
    after: int | None = None,
    *,
    coalesce: float | None = None,
    scheduler: abc.SchedulerBase | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    max_pending: int = 1_000_000,
    include_archived: bool = False,
) -> Observable[ListChange]:
    """``Added`` / ``Updated`` / ``Removed`` items after ``after``, then live (see the module docstring).

    The default list leaves archived sessions out: an archive is ``Removed``, an unarchive ``Added``;
    ``include_archived`` lists them, and (un)archiving is then an ``Updated`` ``_meta`` change.

    Each subscription gets its own delivery scheduler: ``scheduler`` if given (e.g. a ``TestScheduler``), an
    asyncio loop's (``loop=``), or else a thread of its own. ``coalesce`` (seconds): the changes of one session
    within that time of its first one merge into one minimal diff against what the subscriber last received
    (set then cleared -> ``null``; set then restored -> nothing); its timers run on the same scheduler, so
    delivery stays serialised.
    """
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        raise ValueError(f"after must be a log position (an int >= 0), got {after!r}")
    if coalesce is not None and not coalesce > 0:
        raise ValueError(f"coalesce must be a positive number of seconds, got {coalesce!r}")
    # Each change's diff made once however many subscribers receive it (they share the change objects).
    to_item = shown_as(source.additional_directories, include_archived)

    def delivery() -> abc.SchedulerBase:
        if scheduler is not None:
            return scheduler
        if loop is not None:
            return AsyncIOThreadSafeScheduler(loop)
        # A thread of its own for the subscription's life (disposed when it ends): starting one per burst cost
        # more than the delivery itself (docs/benchmarks.md).
        return EventLoopScheduler(_delivery_thread, exit_if_empty=False)

    owned = scheduler is None and loop is None
    if coalesce is None:
        # The common path: each change's diff made once, handed straight to the observer (one reactivex layer:
        # each layer wraps the observer once more, a call per item and subscriber).
        return _raw_changes(source, after, delivery, max_pending, to_item, owned=owned)
    window = coalesce

    def build(_scheduler: abc.SchedulerBase | None) -> Observable[ListChange]:
        made = delivery()  # the coalescing timers run on the subscription's delivery scheduler
        stream = _raw_changes(source, after, lambda: made, max_pending, owned=owned).pipe(
            ops.group_by_until(
                lambda change: change.after.session_id,
                None,
                lambda _group: reactivex.timer(window, scheduler=made),
            ),
            ops.flat_map(_burst),
            ops.map(_merge),
        )
        items = stream.pipe(ops.map(to_item), ops.filter(lambda item: item is not None))
        return _isolated(items)

    return reactivex.defer(build)


def notifications(
    source: ChangeSource, after: int | None = None, **options: Unpack[StreamOptions]
) -> Observable[SessionNotification]:
    """Only the ACP ``session/update`` notifications (the ``Updated`` items), ready for the wire."""

    def only_updates(item: ListChange) -> bool:
        return isinstance(item, Updated)

    def notification(item: ListChange) -> SessionNotification:
        assert isinstance(item, Updated)
        return item.notification

    # A client holding the session hears of its archive in ``_meta``.
    items = list_changes(source, after, include_archived=True, **options)
    updates: Observable[ListChange] = items.pipe(ops.filter(only_updates))
    return updates.pipe(ops.map(notification))
