"""Following the log: each event folded into a ``Change`` (the session before and after it), for listeners.

The read model answers ``session/list``; the change stream needs more - every change, in log order, with the
state each one replaced - and it needs it in every process that subscribes, whoever wrote the event. A
``Follower`` tails the store (a subscription: catch-up, then live, woken by the store's doorbell) and folds each
event onto the session's previous state, which it remembers for recently touched sessions and otherwise asks
the read model for ("the session as of the position I have folded to"), or, past the read model's window, folds
from the session's own stream. It runs only while someone listens.

Writers never call listeners and never wait for the follower: a write only rings the doorbell. The follower's thread
wakes at the first write of a burst, then sleeps until the writes pause (``SETTLE_QUIET``, 2 ms, looking only at the
store's change token) or ``SETTLE_LIMIT`` (100 ms) passed, and folds and fans out what came in one batch: a burst
costs its writer no fold, no fan-out and no subscriber wake-up per write, however many listen. A write that stands
alone reaches listeners about ``SETTLE_QUIET`` after its commit. Under writes without a pause, folding and delivering
every change still shares the interpreter (and its GIL) with the writer (``benchmarks/change_stream.py``, the writer
rows). Its thread is joined when the last listener leaves and on ``close``, outside its lock; listeners registered
with ``on_close`` hear of the close. With ``live=False`` (deterministic tests and benchmarks) there is no thread:
``pump()`` folds whatever the log holds, in the caller's thread.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from events.errors import StoreError
from events.logger import Logger
from registry.fold import Change, Entry, fold
from registry.model import SessionState
from registry.readmodel import PastWindow, ReadModel

if TYPE_CHECKING:
    from events.store import EventStore
    from events.subscription import Subscription

__all__ = ["Follower", "Following", "Listener"]

log = Logger(__name__)

Listener = Callable[[Sequence[Change]], None]
"""Called with each batch of changes, in log order, from the follower's thread (or ``pump``'s caller). It must
be quick and must not raise: queue the changes and deliver them elsewhere (``registry.changes`` does)."""

_REMEMBERED: Final = 50_000  # sessions whose last state the follower keeps (the rest it looks up)
SETTLE_QUIET: Final = 0.002
"""Seconds without an append after which the follower folds what came: a change reaches the subscribers this
long after its write when it stands alone."""
SETTLE_LIMIT: Final = 0.1
"""The longest a change waits for its fold while appends go on without a pause."""
JOIN_TIMEOUT: Final = 5.0
"""Seconds a stop waits for the follower's thread to end."""


def _join(thread: threading.Thread | None) -> None:
    """Wait for a stopped follower thread, within ``JOIN_TIMEOUT`` (it polls its subscription every second)."""
    if thread is None or thread is threading.current_thread():
        return
    thread.join(JOIN_TIMEOUT)
    if thread.is_alive():  # pragma: no cover - a listener stuck in user code
        log.warning("the change follower did not stop within %s s (a listener is slow)", JOIN_TIMEOUT)


class Following:
    """A listener's registration: changes after ``position`` reach it; ``state_at`` rebuilds what came before."""

    def __init__(self, follower: Follower, listener: Listener, position: int) -> None:
        self._follower = follower
        self._listener = listener
        self.position = position
        """The last position folded when the listener was added: it gets every change after it."""

    def state_at(self, session_id: str, position: int) -> SessionState | None:
        """The session as it was at ``position`` (<= ``self.position``); None if it did not exist then."""
        return self._follower.state_at(session_id, position)

    def stop(self) -> None:
        """No more changes reach the listener (idempotent)."""
        self._follower.remove(self._listener)


class Follower:
    """Folds the store's log into changes for listeners, from the position it started at."""

    def __init__(self, store: EventStore, read_model: ReadModel, *, live: bool) -> None:
        self._store = store
        self._read_model = read_model
        self._live = live
        self._lock = threading.RLock()
        self._folded = threading.Condition(self._lock)
        self._listeners: list[Listener] = []
        self._on_close: dict[Listener, Callable[[], None]] = {}
        self._states: OrderedDict[str, SessionState | None] = OrderedDict()
        self._position = 0
        self._subscription: Subscription | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def position(self) -> int:
        return self._position

    def add(self, listener: Listener, on_close: Callable[[], None] | None = None) -> Following:
        """Register ``listener`` atomically at the position folded so far (the log's head when none listened);
        ``on_close`` is called once if the follower closes (its registry closed) while ``listener`` is there."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the change follower is closed")
            if not self._listeners:
                self._start()
            self._listeners.append(listener)
            if on_close is not None:
                self._on_close[listener] = on_close
            return Following(self, listener, self._position)

    def remove(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
            self._on_close.pop(listener, None)
            thread = self._stop() if not self._listeners else None
        _join(thread)  # outside the lock: the thread may be waiting for it

    def _start(self) -> None:
        self._position = self._read_model.catch_up()
        self._states.clear()
        if self._live:
            self._subscription = subscription = self._store.subscribe(after=self._position)
            self._thread = threading.Thread(
                target=self._run, args=(subscription,), name="acp-registry follower", daemon=True
            )
            self._thread.start()

    def _stop(self) -> threading.Thread | None:
        """Under the lock: end the subscription; returns the thread for the caller to join once it let go of the
        lock (joining while holding it would keep the thread from finishing a fold it is waiting to start)."""
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None
        thread, self._thread = self._thread, None
        return thread

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._listeners.clear()
            closers, self._on_close = list(self._on_close.values()), {}
            thread = self._stop()
        _join(thread)
        for on_close in closers:  # outside the lock, once the thread has stopped folding
            try:
                on_close()
            except Exception:
                log.exception("a change listener failed when told that the follower closed")

    @property
    def thread(self) -> threading.Thread | None:
        """The follower's thread while someone listens (for tests: it is joined when the last one leaves)."""
        return self._thread

    # -- folding --------------------------------------------------------------------------------------

    def pump(self, *, always: bool = False) -> int:
        """Fold everything the log holds now, in the caller's thread: what ``live=False`` relies on after each
        write, and what ``always`` does in either mode (``sync()``: the changes are queued before it returns;
        the thread skips what was folded here). Returns the position."""
        if self._live and not always:
            return self._position  # the thread folds: a writer never waits here for a fan-out under way
        with self._lock:
            if self._listeners:
                self._fold_to_head()
            return self._position

    def _fold_to_head(self) -> None:
        """Under the lock: fold what the log holds after the position folded so far."""
        head = self._store.head()
        if head > self._position:
            self._fold(list(self._store.scan(self._position, until=head)))

    def _run(self, subscription: Subscription) -> None:
        while not subscription.closed:
            try:
                records = subscription.poll(timeout=1.0)
                if records and self._listeners:
                    # Fold once the writes pause (or SETTLE_LIMIT after the first): a burst costs its writer no
                    # fold, no fan-out and no subscriber wake-up per write, whatever the number of listeners.
                    subscription.settle(SETTLE_QUIET, SETTLE_LIMIT)
                    records = records + subscription.poll(timeout=0)
                if records and self._acquire(subscription):
                    try:
                        if subscription is self._subscription:
                            self._fold(records)
                    finally:
                        self._lock.release()
            except Exception:
                if subscription.closed:
                    return
                log.exception("the change follower failed; retrying in a second")
                time.sleep(1.0)

    def _acquire(self, subscription: Subscription) -> bool:
        """Take the lock, or give up once ``subscription`` is closed (a stop is under way: no fold is wanted)."""
        while not self._lock.acquire(timeout=0.05):
            if subscription.closed:
                return False
        return True

    def _fold(self, entries: Sequence[Entry]) -> None:
        changes: list[Change] = []
        for begin in range(0, len(entries), 1000):  # fewer new sessions per slice than the follower remembers
            self._fold_slice(entries[begin : begin + 1000], changes)
        if changes:
            for listener in list(self._listeners):
                listener(changes)
        self._folded.notify_all()

    def wait(self, position: int, timeout: float | None = None) -> bool:
        """Block until every change up to ``position`` has reached the listeners (True), or ``timeout`` passed.
        Without listeners there is nothing to wait for. Someone waits: what the thread has not folded yet (it
        may be waiting for a burst to pause) is folded now, in the caller's thread."""
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return False
        try:
            if not self._listeners or not self._live:
                return True
            if self._position < position and self._subscription is not None:
                try:
                    self._fold_to_head()
                except StoreError as exc:  # the thread retries; wait for it
                    log.debug("could not fold up to %s here: %s", position, exc)
            return self._folded.wait_for(
                lambda: self._position >= position or not self._listeners or self._subscription is None, timeout
            )
        finally:
            self._lock.release()

    def _fold_slice(self, entries: Sequence[Entry], changes: list[Change]) -> None:
        start = self._position
        states = self._states
        for entry in entries:
            if entry.position <= self._position:
                continue
            session_id = entry.session_id
            if session_id in states:
                before = states[session_id]
                states.move_to_end(session_id)
            else:
                before = self.state_at(session_id, start)  # untouched since ``start``: as it was then
            self._position = entry.position
            after = fold(before, entry)
            if after is None:
                states[session_id] = before
            else:
                states[session_id] = after
                changes.append(Change(entry.position, before, after))
            if len(states) > _REMEMBERED:
                states.popitem(last=False)

    def state_at(self, session_id: str, position: int) -> SessionState | None:
        """The session at ``position``, from the read model, or folded from its own stream past the window."""
        read_model = self._read_model
        if read_model.position < position:
            try:
                read_model.catch_up(position)
            except StoreError as exc:  # e.g. a read-only file: the session's own stream still answers
                log.debug("the read model could not catch up to %s: %s", position, exc)
        if read_model.position >= position:
            found = read_model.state_at(session_id, position)
            if not isinstance(found, PastWindow):
                return found
        state: SessionState | None = None
        for record in self._store.read_stream(session_id):
            if record.position > position:
                break
            state = fold(state, record) or state
        return state
