"""A subscription to a store's log: catch-up, then live, woken by the store's doorbell and always pulling from the
log after the last position it delivered (so an append between a read and a wait is never lost)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Protocol, Self

from events.model import RecordedEvent

__all__ = ["Doorbell", "Followed", "Subscription"]


class Doorbell:
    """Wakes waiting subscribers. Carries no data: a woken reader always pulls from the log."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    @property
    def generation(self) -> int:
        return self._generation

    def ring(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float | None) -> None:
        with self._cond:
            if self._generation == seen:
                self._cond.wait(timeout)


class Followed(Protocol):
    """What a subscription reads of its store (``events.store.EventStore`` is one)."""

    _doorbell: Doorbell

    @property
    def closed(self) -> bool: ...

    def read(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]: ...

    def _change_token(self) -> object: ...

    def _wait_for_change(self, token: object, timeout: float | None) -> None: ...


class Subscription:
    """Catch-up then live: pulls the log after the last position seen whenever the doorbell rings.

    The doorbell carries no events, so an append that lands between a read and the wait is never lost:
    the generation is taken before each read. One consumer thread per subscription; ``close`` may be
    called from any thread.
    """

    def __init__(self, store: Followed, after: int, batch: int) -> None:
        self._store = store
        self._position = after
        self._batch = batch
        self._closed = False
        self._closing = threading.Event()  # wakes a ``settle`` at once

    @property
    def position(self) -> int:
        """The last position delivered."""
        return self._position

    @property
    def closed(self) -> bool:
        return self._closed or self._store.closed

    def poll(self, timeout: float | None = None) -> list[RecordedEvent]:
        """The next events after ``position``, waiting up to ``timeout`` seconds (None: until some come
        or the subscription closes). Returns ``[]`` on timeout or close."""
        deadline = None if timeout is None else time.monotonic() + timeout
        store = self._store
        while not self.closed:
            token = store._change_token()
            events = store.read(self._position, self._batch)
            if events:
                self._position = events[-1].position
                return events
            remaining = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
            store._wait_for_change(token, remaining)
        return []

    def settle(self, quiet: float, limit: float) -> None:
        """Return once the log has had no append for ``quiet`` seconds, or ``limit`` seconds from now (or on
        close). For a consumer that batches: while a burst of appends goes on it sleeps instead of reading after
        each one. A look is the store's change token (a counter, and on SQLite one ``PRAGMA``), never a read."""
        store = self._store
        deadline = time.monotonic() + limit
        token = store._change_token()
        while not self.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if self._closing.wait(min(quiet, remaining)):
                return
            seen, token = token, store._change_token()
            if seen == token:
                return

    def __iter__(self) -> Iterator[RecordedEvent]:
        """Every event, blocking for the next; ends when the subscription or the store closes."""
        while not self.closed:
            yield from self.poll()

    def close(self) -> None:
        self._closed = True
        self._closing.set()
        self._store._doorbell.ring()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
