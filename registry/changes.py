"""The change stream: each change of the registry as the minimal ACP ``session_info_update`` a client needs.

``ListChange`` items say what happened to the list a client shows: ``Added`` (a new session), ``Updated`` (the
``session/update`` notification carrying a ``session_info_update`` with only the fields that changed: a new
value, or an explicit ``null`` for a clear), ``Removed`` (deleted). A list from ``session/list`` at position P
plus every item after P equals a fresh ``session/list``.

How items flow, and why:

* The stream is fed by the same projection changes that answer ``session/list`` (each carries the session
  before and after the event), so the two never disagree, and "what the subscriber last saw" is simply the
  state before the change: no per-subscriber copy of the list.
* Subscribing registers a listener at the projection's position H under the registry's lock, replays
  (P, H] from the log, then drains what the listener buffered: no gap, no duplicate.
* The registry's threads only append to a subscription's queue. Items reach the subscriber on its scheduler
  (by default a thread of its own; ``loop=`` delivers on an asyncio loop), one at a time, in log order for each
  session. A subscriber that raises is detached and logged, and one that falls ``max_pending`` items behind
  gets ``SubscriberTooSlow``: neither can stall the writer or other subscribers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import reactivex
from msgspec import UNSET, UnsetType
from reactivex import GroupedObservable, Observable, abc
from reactivex import operators as ops
from reactivex.disposable import Disposable, SingleAssignmentDisposable
from reactivex.scheduler import EventLoopScheduler
from reactivex.scheduler.eventloop import AsyncIOThreadSafeScheduler

from events.errors import RegistryError
from registry.model import SessionInfo, SessionState, format_time, session_info, visible_meta
from registry.projection import Change, fold

if TYPE_CHECKING:
    from registry.service import SessionRegistry

__all__ = [
    "Added",
    "ListChange",
    "Removed",
    "SessionInfoUpdate",
    "SessionNotification",
    "SubscriberTooSlow",
    "Updated",
    "diff",
    "encode_notification",
    "list_changes",
    "notifications",
]

log = logging.getLogger(__name__)


class SessionInfoUpdate(
    msgspec.Struct, omit_defaults=True, rename="camel", tag_field="sessionUpdate", tag="session_info_update"
):
    """ACP ``session_info_update``: UNSET fields are omitted (unchanged); ``None`` is sent as ``null`` (cleared)."""

    title: str | UnsetType | None = UNSET
    updated_at: str | UnsetType | None = UNSET
    meta: dict[str, Any] | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SessionNotification(msgspec.Struct, rename="camel"):
    """The params of an ACP ``session/update`` notification."""

    session_id: str
    update: SessionInfoUpdate


class _JsonRpcNotification(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: SessionNotification


class Added(msgspec.Struct, frozen=True):
    position: int
    session_id: str
    info: SessionInfo


class Updated(msgspec.Struct, frozen=True):
    position: int
    session_id: str
    notification: SessionNotification


class Removed(msgspec.Struct, frozen=True):
    position: int
    session_id: str


ListChange = Added | Updated | Removed


class SubscriberTooSlow(RegistryError):
    """A subscriber fell too far behind; its subscription was ended so the registry's memory stays bounded."""


_encoder = msgspec.json.Encoder()


def encode_notification(notification: SessionNotification) -> bytes:
    """The JSON-RPC ``session/update`` message, with explicit nulls kept (the official SDK drops them)."""
    return _encoder.encode(_JsonRpcNotification(method="session/update", params=notification))


def _shown_source(state: SessionState) -> str | None:
    return state.title_source.value if state.title is not None and state.title_source is not None else None


def diff(
    position: int, before: SessionState | None, after: SessionState | None, *, additional_directories: bool = True
) -> ListChange | None:
    """What a client that saw ``before`` must be told to see ``after``; None when nothing visible changed.

    Fields are compared as the client sees them (``updatedAt`` to the millisecond, ``_meta`` with the
    registry's keys), and only changed ones are formatted: this runs once per change and subscriber.
    """
    was = before is not None and not before.deleted
    now = after is not None and not after.deleted
    if not now:
        return Removed(position, before.session_id) if was and before is not None else None
    assert after is not None
    if not was:
        return Added(position, after.session_id, session_info(after, additional_directories=additional_directories))
    assert before is not None
    old_ms = None if before.updated_at is None else before.updated_at // 1_000_000
    new_ms = None if after.updated_at is None else after.updated_at // 1_000_000
    meta_changed = (
        before.messages != after.messages or before.meta != after.meta or _shown_source(before) != _shown_source(after)
    )
    if before.title == after.title and old_ms == new_ms and not meta_changed:
        return None
    update = SessionInfoUpdate(
        title=UNSET if before.title == after.title else after.title,
        updated_at=UNSET if old_ms == new_ms else (None if after.updated_at is None else format_time(after.updated_at)),
        meta=visible_meta(after) if meta_changed else UNSET,
    )
    return Updated(position, after.session_id, SessionNotification(after.session_id, update))


def _burst(group: GroupedObservable[str, Change]) -> Observable[list[Change]]:
    return group.pipe(ops.to_list())


def _merge(burst: Sequence[Change]) -> Change:
    """Changes of one session in a burst, as one: from the first one's before to the last one's after."""
    return Change(burst[-1].position, burst[0].before, burst[-1].after)


class _Feed:
    """One subscription's queue of projection changes, drained on its scheduler one item at a time."""

    def __init__(self, observer: abc.ObserverBase[Change], scheduler: abc.SchedulerBase, max_pending: int) -> None:
        self._observer = observer
        self._scheduler = scheduler
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
                overflow = True
            else:
                overflow = False
                self._kick()
        if overflow:
            self.remove_listener()
            self._scheduler.schedule(
                lambda _s, _st: self._observer.on_error(
                    SubscriberTooSlow(f"the subscriber fell more than {self._max_pending} changes behind")
                )
            )

    def release(self, catch_up: Sequence[Change]) -> None:
        with self._lock:
            self._queue.extendleft(reversed(catch_up))
            self._held = False
            self._kick()

    def _kick(self) -> None:
        if not self._draining and not self._held and self._queue:
            self._draining = True
            self._scheduler.schedule(self._drain)

    def _drain(self, _scheduler: abc.SchedulerBase, _state: Any = None) -> None:
        while True:
            with self._lock:
                if self._stopped or not self._queue:
                    self._draining = False
                    return
                batch = list(self._queue)  # one lock round per batch, not per item
                self._queue.clear()
            for change in batch:
                if self._stopped:
                    return
                try:
                    self._observer.on_next(change)
                except Exception:
                    log.exception("a change-stream subscriber raised; it has been detached")
                    self.stop()
                    return

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._queue.clear()
        self.remove_listener()


def _catch_up(
    registry: SessionRegistry, start: int, head: int, known: dict[str, SessionState | None] | None
) -> list[Change]:
    """The changes (start, head], each with the session's state before it, rebuilt from the log.

    ``known`` holds the state at ``start`` of every session changed since (from the projection's undo log);
    None past its window, when each session's own stream is folded up to ``start`` instead.
    """
    states: dict[str, SessionState | None] = {}
    changes: list[Change] = []
    for record in registry.store.iter_events(start):
        if record.position > head:
            break
        session_id = record.session_id
        if session_id not in states:
            states[session_id] = _state_at(registry, session_id, start, head, known)
        before = states[session_id]
        after = fold(before, record)
        if after is not None:
            states[session_id] = after
            changes.append(Change(record.position, before, after))
    return changes


def _state_at(
    registry: SessionRegistry, session_id: str, start: int, head: int, known: dict[str, SessionState | None] | None
) -> SessionState | None:
    if known is not None:
        if session_id in known:
            return known[session_id]
        current = registry._projection.get(session_id)
        if current is None or current.position <= head:
            return current  # no change applied since ``start``: it is as it was then
    state: SessionState | None = None  # fold the session's own stream up to ``start``
    for earlier in registry.store.read_stream(session_id):
        if earlier.position > start:
            break
        state = fold(state, earlier) or state
    return state


def _raw_changes(
    registry: SessionRegistry, after: int | None, delivery: abc.SchedulerBase, max_pending: int
) -> Observable[Change]:
    """Projection changes after ``after`` (default: from now on), then live, delivered on ``delivery``."""

    def subscribe(observer: abc.ObserverBase[Change], _default: abc.SchedulerBase | None = None) -> abc.DisposableBase:
        feed = _Feed(observer, delivery, max_pending)
        with registry._lock:
            head = registry.position
            start = head if after is None else after
            if start > head:
                head = registry.sync()
                if start > head:
                    raise ValueError(f"after={start} is beyond the log's head ({head})")
            feed.remove_listener = registry.add_listener(feed.on_changes)
            known = registry._projection.as_of(start)
            known = None if known is None else dict(known)
        feed.release(_catch_up(registry, start, head, known) if start < head else [])
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


def list_changes(
    registry: SessionRegistry,
    after: int | None = None,
    *,
    coalesce: float | None = None,
    scheduler: abc.SchedulerBase | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    max_pending: int = 1_000_000,
) -> Observable[ListChange]:
    """``Added`` / ``Updated`` / ``Removed`` items after ``after``, then live (see the module docstring).

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
    directories = registry.additional_directories

    def to_item(change: Change) -> ListChange | None:
        return diff(change.position, change.before, change.after, additional_directories=directories)

    def build(_scheduler: abc.SchedulerBase | None) -> Observable[ListChange]:
        if scheduler is not None:
            delivery: abc.SchedulerBase = scheduler
        elif loop is not None:
            delivery = AsyncIOThreadSafeScheduler(loop)
        else:
            delivery = EventLoopScheduler(exit_if_empty=True)
        source = _raw_changes(registry, after, delivery, max_pending)
        if coalesce is not None:
            window = coalesce
            source = source.pipe(
                ops.group_by_until(
                    lambda change: change.after.session_id,
                    None,
                    lambda _group: reactivex.timer(window, scheduler=delivery),
                ),
                ops.flat_map(_burst),
                ops.map(_merge),
            )
        items = source.pipe(ops.map(to_item), ops.filter(lambda item: item is not None))
        return _isolated(items)

    return reactivex.defer(build)


def notifications(
    registry: SessionRegistry, after: int | None = None, **options: Any
) -> Observable[SessionNotification]:
    """Only the ACP ``session/update`` notifications (the ``Updated`` items), ready for the wire."""

    def only_updates(item: ListChange) -> bool:
        return isinstance(item, Updated)

    def notification(item: ListChange) -> SessionNotification:
        assert isinstance(item, Updated)
        return item.notification

    updates: Observable[ListChange] = list_changes(registry, after, **options).pipe(ops.filter(only_updates))
    return updates.pipe(ops.map(notification))
