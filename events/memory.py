"""The in-process store: for tests, demos and hosts that keep nothing across restarts."""

from __future__ import annotations

import bisect
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from events.chain import GENESIS, StoredRecord, link
from events.codec import decode_event, encode_event
from events.content import KeptMessage, StoredMessage, kept
from events.errors import ConcurrencyError
from events.model import Event, RecordedEvent, SessionDeleted
from events.store import ANY, Clock, EventStore, PreparedAppend, StoreIdentity, added_hook, retried_positions

__all__ = ["MemoryStore"]


class MemoryStore(EventStore):
    """A log in a list. Events go through the storage codec so that they behave as a durable store's."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(clock)
        self._lock = threading.Lock()
        self._log: list[RecordedEvent] = []
        self._stored: list[StoredRecord] = []  # the same records as bytes, with their links
        self._positions: list[int] = []
        self._streams: dict[str, list[RecordedEvent]] = {}
        self._by_id: dict[uuid.UUID, RecordedEvent] = {}
        self._content: dict[int, list[StoredMessage]] = {}  # by the position of the event that refers to them
        self._erase_hooks: list[Any] = []
        self._identity = StoreIdentity(str(uuid.uuid4()), os.urandom(32))

    def _append(
        self, session_id: str, events: list[Event], expected_version: int, event_ids: list[uuid.UUID]
    ) -> list[int]:
        return self._append_batch([PreparedAppend(session_id, events, expected_version, event_ids)])[0]

    def _append_batch(self, requests: list[PreparedAppend]) -> list[list[int]]:
        # Round-trip through storage bytes: a memory store must not hand out the caller's objects.
        encoded = [[encode_event(e) for e in r.events] for r in requests]
        with self._lock:
            size = len(self._log)
            try:
                return [self._write(request, blobs) for request, blobs in zip(requests, encoded, strict=True)]
            except BaseException:
                self._truncate(size)  # a batch is stored whole or not at all
                raise

    def _write(self, request: PreparedAppend, blobs: list[bytes]) -> list[int]:
        session_id, event_ids = request.session_id, request.event_ids
        stored = [decode_event(blob, 0) for blob in blobs]
        known = {i: r for i in event_ids if (r := self._by_id.get(i)) is not None}
        retried = retried_positions(session_id, stored, event_ids, known)
        if retried is not None:
            return retried
        actual = len(self._streams.get(session_id, ()))
        if request.expected_version != ANY and request.expected_version != actual:
            raise ConcurrencyError(session_id, request.expected_version, actual)
        stream = self._streams.setdefault(session_id, [])
        at = self._clock()
        head = self._log[-1].position if self._log else 0
        previous = self._stored[-1].chain if self._stored else GENESIS
        assert previous is not None
        if request.content is not None:
            for n, messages in enumerate(request.content, start=head + 1):
                if messages:
                    self._content[n] = messages
        for n, (event, event_id, blob) in enumerate(zip(stored, event_ids, blobs, strict=True), start=1):
            record = RecordedEvent(head + n, session_id, actual + n, event_id, at, event)
            previous = link(previous, head + n, session_id, actual + n, event_id.bytes, at, blob)
            self._stored.append(StoredRecord(head + n, session_id, actual + n, event_id.bytes, at, blob, previous))
            self._log.append(record)
            self._positions.append(record.position)
            stream.append(record)
            self._by_id[event_id] = record
        return list(range(head + 1, head + 1 + len(stored)))

    def _truncate(self, size: int) -> None:
        """Forget every record after the first ``size``: the undo of a failed batch."""
        for record in self._log[size:]:
            stream = self._streams[record.session_id]
            stream.pop()
            if not stream:
                del self._streams[record.session_id]
            del self._by_id[record.event_id]
            self._content.pop(record.position, None)
        del self._log[size:], self._stored[size:], self._positions[size:]

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

    def chain_at(self, position: int) -> bytes | None:
        self._check_open()
        if position == 0:
            return GENESIS
        with self._lock:
            at = bisect.bisect_left(self._positions, position)
            return self._stored[at].chain if at < len(self._positions) and self._positions[at] == position else None

    def stored_records(self, after: int = 0, limit: int = 10_000) -> list[StoredRecord]:
        self._check_open()
        with self._lock:
            start = bisect.bisect_right(self._positions, after)
            return self._stored[start : start + limit]

    def messages(self, session_id: str, *, until: int | None = None) -> list[KeptMessage]:
        self._check_open()
        with self._lock:
            records = list(self._streams.get(session_id, ()))
            found = [(r.position, self._content.get(r.position)) for r in records]
        return [
            kept(position, session_id, m)
            for position, stored in found
            if stored and (until is None or position <= until)
            for m in stored
        ]

    def messages_at(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], KeptMessage]:
        self._check_open()
        found: dict[tuple[int, int], KeptMessage] = {}
        with self._lock:
            for position, seq in keys:
                stored = self._content.get(position)
                if stored is not None and 0 <= seq < len(stored):
                    at = bisect.bisect_left(self._positions, position)
                    found[position, seq] = kept(position, self._log[at].session_id, stored[seq])
        return found

    def stored_messages(self, after: int = 0, limit: int = 10_000) -> list[tuple[int, str, StoredMessage]]:
        self._check_open()
        rows: list[tuple[int, str, StoredMessage]] = []
        with self._lock:
            for position in sorted(p for p in self._content if p > after):
                if len(rows) >= limit:
                    break
                at = bisect.bisect_left(self._positions, position)
                rows += [(position, self._log[at].session_id, m) for m in self._content[position]]
        return rows

    def add_erase_hook(self, hook: Any) -> Callable[[], None]:
        """Call ``hook.erasing(None, session_id, messages)`` before a session's messages are erased (an index
        derived from them takes them out). Returns the remover."""
        return added_hook(self._erase_hooks, self._lock, hook)

    def _erase(self, session_id: str) -> int:
        with self._lock:
            records = self._streams.get(session_id, [])
            if not any(isinstance(r.event, SessionDeleted) for r in records):
                raise ValueError(f"session {session_id!r} is not deleted: only a deleted session's messages are erased")
            hooks = list(self._erase_hooks)
        messages = self.messages(session_id)
        for hook in hooks:
            hook.erasing(None, session_id, messages)
        with self._lock:
            return sum(len(self._content.pop(r.position, ())) for r in records)
