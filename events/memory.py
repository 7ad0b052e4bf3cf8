"""The in-process store: for tests, demos and hosts that keep nothing across restarts."""

from __future__ import annotations

import bisect
import os
import threading
import uuid

from events.codec import decode_event, encode_event
from events.errors import ConcurrencyError
from events.model import Event, RecordedEvent
from events.store import ANY, Clock, EventStore, StoreIdentity, retried_positions

__all__ = ["MemoryStore"]


class MemoryStore(EventStore):
    """A log in a list. Events go through the storage codec so that they behave as a durable store's."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(clock)
        self._lock = threading.Lock()
        self._log: list[RecordedEvent] = []
        self._positions: list[int] = []
        self._streams: dict[str, list[RecordedEvent]] = {}
        self._by_id: dict[uuid.UUID, RecordedEvent] = {}
        self._identity = StoreIdentity(str(uuid.uuid4()), os.urandom(32))

    def _append(
        self, session_id: str, events: list[Event], expected_version: int, event_ids: list[uuid.UUID]
    ) -> list[int]:
        # Round-trip through storage bytes: a memory store must not hand out the caller's objects.
        stored = [decode_event(encode_event(e), 0) for e in events]
        with self._lock:
            known = {i: r for i in event_ids if (r := self._by_id.get(i)) is not None}
            retried = retried_positions(session_id, stored, event_ids, known)
            if retried is not None:
                return retried
            stream = self._streams.setdefault(session_id, [])
            actual = len(stream)
            if expected_version != ANY and expected_version != actual:
                if not stream:
                    del self._streams[session_id]
                raise ConcurrencyError(session_id, expected_version, actual)
            at = self._clock()
            head = self._log[-1].position if self._log else 0
            records = [
                RecordedEvent(
                    position=head + n,
                    session_id=session_id,
                    version=actual + n,
                    event_id=event_id,
                    recorded_at=at,
                    event=event,
                )
                for n, (event, event_id) in enumerate(zip(stored, event_ids, strict=True), start=1)
            ]
            self._log.extend(records)
            self._positions.extend(r.position for r in records)
            stream.extend(records)
            for r in records:
                self._by_id[r.event_id] = r
            return [r.position for r in records]

    def read(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        self._check_open()
        with self._lock:
            start = bisect.bisect_right(self._positions, after)
            stop = len(self._log) if limit is None else start + limit
            return self._log[start:stop]

    def read_stream(self, session_id: str, after_version: int = 0) -> list[RecordedEvent]:
        self._check_open()
        with self._lock:
            return self._streams.get(session_id, [])[after_version:]

    def head(self) -> int:
        self._check_open()
        with self._lock:
            return self._log[-1].position if self._log else 0
