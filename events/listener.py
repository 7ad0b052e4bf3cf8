"""The PostgreSQL store's live tail: one thread per store that LISTENs for appends and rings the doorbell.

Imported only by ``events.postgres`` (it needs psycopg). The notification carries nothing: subscribers pull from
the log, and also look every ``poll_interval`` seconds, so a notification lost during a reconnect delays an
event but never loses it.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Callable
from typing import Final

import psycopg
from psycopg.pq import ConnStatus
from psycopg.rows import TupleRow

__all__ = ["FIRST_DELAY", "JOIN_TIMEOUT", "MAX_DELAY", "Listener"]

FIRST_DELAY: Final = 0.02
"""Seconds before the first retry of a lost connection; doubled on each failure up to ``MAX_DELAY``."""
MAX_DELAY: Final = 1.0
JOIN_TIMEOUT: Final = 10.0
"""Seconds ``stop`` waits for the thread (a connect in progress ends by its timeout)."""

log = logging.getLogger("events.postgres")


class Listener:
    """One thread per store: LISTENs on the store's channel on its own connection, rings on every NOTIFY.

    It reconnects with backoff when the server goes away (each failure logged: a warning for the first after a
    good connection, debug for the retries), and rings once after each (re)connect: appends made while nobody
    listened are then pulled from the log at once rather than at the next poll. ``stop`` joins the thread.
    """

    _IDLE_CHECK = 30.0  # seconds without traffic after which the listener asks whether the server is still there

    def __init__(self, conninfo: str, listen: bytes, ring: Callable[[], None]) -> None:
        self._conninfo = conninfo
        self._listen = listen
        self._ring = ring
        self._stopping = threading.Event()
        self._wake, self._waker = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name="acp-registry listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._waker.send(b"\0")
        self._thread.join(JOIN_TIMEOUT)
        if self._thread.is_alive():  # pragma: no cover - a connect that outlasts the bound (the thread is a daemon)
            log.warning("the LISTEN thread did not stop within %s s", JOIN_TIMEOUT)
        else:
            self._wake.close()
            self._waker.close()

    @property
    def thread(self) -> threading.Thread:
        """The listening thread (joined by ``stop``)."""
        return self._thread

    def _run(self) -> None:
        delay = FIRST_DELAY
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.add_notify_handler(lambda _: self._ring())
                    conn.execute(self._listen)
                    delay = FIRST_DELAY
                    self._ring()
                    self._pump(conn)
            except (psycopg.Error, OSError) as exc:  # the server went away or refused us; subscribers poll meanwhile
                if not self._stopping.is_set():
                    (log.warning if delay == FIRST_DELAY else log.debug)(
                        "the LISTEN connection failed (%s); retrying in %.2f s (subscribers poll meanwhile)",
                        " ".join(str(exc).split()),
                        delay,
                    )
            self._stopping.wait(delay)
            delay = min(delay * 2, MAX_DELAY)

    def _pump(self, conn: psycopg.Connection[TupleRow]) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(conn.pgconn.socket, selectors.EVENT_READ)
            selector.register(self._wake, selectors.EVENT_READ)
            while not self._stopping.is_set():
                if not selector.select(self._IDLE_CHECK):
                    conn.execute("SELECT 1")
                    continue
                conn.pgconn.consume_input()  # raises when the server closed the connection
                rang = False
                while conn.pgconn.notifies() is not None:
                    rang = True
                if rang:
                    self._ring()
                if conn.pgconn.status != ConnStatus.OK:
                    raise psycopg.OperationalError("the listening connection was lost")
