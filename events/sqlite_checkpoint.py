"""SQLite's WAL checkpoints on a thread of their own, for stores with ``synchronous="normal"`` or ``"off"``."""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable
from typing import Final, Literal

from events.logger import Logger

__all__ = ["BACKSTOP_PAGES", "Checkpointer"]

log = Logger("events.sqlite")

BACKSTOP_PAGES: Final = 10_000  # the writer checkpoints itself only this far behind: the WAL stays < ~40 MB


class Checkpointer:
    """Copies the WAL back into the database file on a thread of its own, so that no append waits for it.

    SQLite runs this checkpoint inside the commit that fills the 1000th WAL page; with
    ``synchronous="normal"`` that was a large share of all append time, spent in a few appends (the checkpoint
    syncs the WAL and the database file: docs/benchmarks.md). A PASSIVE checkpoint never blocks writers or readers
    and is crash-safe like the inline one. SQLite starts the WAL file over only after a checkpoint copied
    all of it, which a background checkpoint rarely manages while appends go on, so the writer's own
    auto-checkpoint stays as a backstop at ``BACKSTOP_PAGES`` (it also covers a failed background run).
    Not used with ``synchronous="full"``: there every commit waits for an fsync anyway, the inline
    checkpoint is a small share of append time, and while the WAL file grows past 1000 pages each commit's
    fsync is slower. The thread starts with the first request and ends with the store.
    """

    def __init__(self, path: str, synchronous: Literal["full", "normal", "off"], busy_timeout: float) -> None:
        # No reference to the store: a store dropped without ``close`` is still collected (and ends the thread).
        self._connect: Callable[[], sqlite3.Connection] = functools.partial(
            sqlite3.connect, path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        self._path = path
        self._synchronous = synchronous  # a checkpoint syncs as its connection is told to
        self._wanted = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        """Checkpoint soon. The caller holds the store's write lock."""
        if self._stopping:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"checkpoint {self._path}", daemon=True)
            self._thread.start()
        self._wanted.set()

    def stop(self, wait: bool = True) -> None:
        self._stopping = True
        self._wanted.set()
        if wait and self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        db = None
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._stopping:
                    return
                try:
                    if db is None:
                        db = self._connect()
                        db.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    log.warning("%s: background checkpoint failed; appends will checkpoint (%s)", self._path, exc)
        finally:
            if db is not None:
                db.close()
