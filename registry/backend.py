"""The read side's backend: one object per open store that owns everything the registry keeps beside its log.

The registry derives data from each log - the read model, kept snapshots, the importers' state, integrity evidence
- and asks a few questions of the log itself (its size on disk, how many events lie up to a position). Where and
how differs per store; a ``Backend`` answers all of it for one store, and is built once where the store is opened
(``registry.backends.backend_for``, the one function that knows the store classes). Everything that works on
derived data - read models, snapshots, time travel, ``verify`` - receives it, and never looks it up.

This class is also the backend of a store the registry knows nothing about: the read model is folded in memory,
snapshots and import state are files in the user's cache and state directories under the store's id, integrity
evidence lives as long as this object, and events are counted by scanning. ``registry.backends`` has the kinds
that keep more (SQLite, PostgreSQL) or less (``memory://``); each is held to ``registry.testing.ReadModelContract``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from events.logger import Logger
from registry.evidence import IntegrityEvent, describe
from registry.user_dirs import user_dir

if TYPE_CHECKING:
    from pathlib import Path

    from events.store import EventStore
    from registry.readmodel import ReadModel
    from registry.search.index import SearchIndex

__all__ = ["SNAPSHOT_JOIN_TIMEOUT", "Backend"]

log = Logger("registry.evidence")

SNAPSHOT_JOIN_TIMEOUT: Final = 30.0
"""Seconds ``join_background`` waits, in all, for the snapshots being written in the background."""


def _user_dir(kind: Literal["state", "cache"]) -> Path:
    from pathlib import Path  # noqa: PLC0415 - pathlib stays out of a process that only reads a SQLite store

    return Path(user_dir(kind))


def same_finding(a: IntegrityEvent, b: IntegrityEvent) -> bool:
    """Whether two integrity events record the same finding (found at different times)."""
    return (a.seen_by, a.position, a.chain, a.head) == (b.seen_by, b.position, b.chain, b.head)


class Backend:
    """What the registry keeps beside one store's log, and where: a store it knows nothing about."""

    name = "other"
    """``sqlite``, ``postgresql``, ``memory`` or ``other``, for people and tests."""
    contiguous = False
    """Whether the store's positions run 1, 2, 3... without gaps (then events are counted without reading)."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self._kept: list[IntegrityEvent] = []
        self._threads: set[threading.Thread] = set()
        self._threads_lock = threading.Lock()

    @property
    def store(self) -> EventStore:
        return self._store

    @property
    def location(self) -> str:
        """The store as messages name it (a file's path, a server's schema, a URL)."""
        return repr(self._store)

    # -- the read model -------------------------------------------------------------------------------

    def tables(self, *, window: int, catch_up: bool) -> ReadModel | None:
        """The read model kept as tables in the store (created or rebuilt as needed), or None: fold in memory
        (a store that keeps no tables, or a read-only file whose tables cannot serve)."""
        return None

    def search_index(self) -> SearchIndex:
        """The full-text index of the messages kept beside the log, its erase hook on the store (so a user's delete
        takes the words out of it too). Here: FTS5 tables in memory, built from the store on the first search."""
        from registry.search.index import SqliteSearchIndex  # noqa: PLC0415 - search loads only where it is used

        return SqliteSearchIndex(self._store)

    def seal_key(self) -> bytes:
        """The key the tables' rows are sealed with (``readmodel.keys.Seal``). Here: derived from the store's own
        secret - tables every host shares must be checked by every host, so the key lives with the store."""
        return hashlib.blake2b(self._store.identity.secret, digest_size=32, person=b"acp-rm-seal-key").digest()

    def current_seal_key(self) -> bytes:
        """``seal_key`` as the store keeps it now, read again where it may have changed under this process (a key
        file replaced after it was lost). Here: it cannot, it is the store's."""
        return self.seal_key()

    # -- files beside the log -------------------------------------------------------------------------

    def snapshot_dir(self) -> Path | None:
        """Where kept snapshots live (None: nowhere, they are not kept)."""
        return _user_dir("cache") / "snapshots" / self._store.identity.store_id

    def import_state_path(self) -> Path | None:
        """Where the importers keep their state between passes (None: in memory only)."""
        return _user_dir("state") / f"import-state-{self._store.identity.store_id}.msgpack"

    # -- the log --------------------------------------------------------------------------------------

    def log_bytes(self) -> int | None:
        """The log's size on disk (None: not known from here)."""
        return None

    def events_up_to(self, position: int) -> int:
        """How many events the log holds at positions ``<= position``."""
        if self.contiguous:
            return min(position, self._store.head())
        return sum(1 for _ in self._store.scan(0, until=position))

    # -- integrity evidence (``registry.evidence``) ---------------------------------------------------

    def record_integrity(self, event: IntegrityEvent) -> None:
        """Keep ``event`` in the store (once: the same finding again is not added); raises where it cannot."""
        if not any(same_finding(event, known) for known in self._kept):
            self._kept.append(event)

    def integrity_events(self) -> list[IntegrityEvent]:
        """The integrity events recorded in the store, oldest first (acknowledged ones included)."""
        return list(self._kept)

    def acknowledge(self) -> int:
        """Mark every integrity event acknowledged; returns how many were not yet."""
        fresh = sum(not event.acknowledged for event in self._kept)
        self._kept[:] = [msgspec.structs.replace(event, acknowledged=True) for event in self._kept]
        return fresh

    def record(self, event: IntegrityEvent) -> None:
        """Record ``event`` in the store (``record_integrity``) and state it on stderr; a store that cannot be
        written (read-only) only states it."""
        try:
            self.record_integrity(event)
            kept = "recorded in the store"
        except Exception as exc:  # a read-only store: the finding is at least stated
            kept = f"NOT recorded in the store ({exc})"
        log.warning(
            "%s: integrity: %s; %s - `acp-registry verify` reports it until `acp-registry verify --acknowledge`",
            self.location,
            describe(event),
            kept,
        )

    # -- work in the background -----------------------------------------------------------------------

    def in_background(self, work: Callable[[], None], name: str) -> None:
        """Run ``work`` on a daemon thread of its own (a snapshot kept without making a writer wait), joined by
        ``join_background``."""

        def run() -> None:
            try:
                work()
            finally:
                with self._threads_lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._threads_lock:
            self._threads.add(thread)
        thread.start()

    def join_background(self, timeout: float = SNAPSHOT_JOIN_TIMEOUT) -> bool:
        """Wait for the work running in the background (a read model's ``close``), at most ``timeout`` seconds in
        all; False (and a warning) when some is still running then."""
        with self._threads_lock:
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        running = sum(thread.is_alive() for thread in threads)
        if running:
            Logger("registry.readmodel.tables").warning(
                "a snapshot was still being written after %s s; it is left to finish or be tidied", timeout
            )
        return not running
