"""The event store protocol: one small abstract base, one module per backend beside it.

A backend implements five steps (``_append``, ``read``, ``read_stream``, ``head``, ``_close``) and sets who
it is (``_identity``). Everything else - argument checks, the doorbell that wakes subscribers, catch-up then
live subscriptions, the context manager, turning stored rows into records and recognising a retried batch -
lives here once, so every backend behaves the same and the one contract suite in ``events.testing`` holds
them all to it.
"""

from __future__ import annotations

import abc
import unicodedata
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, Self, TypeVar, cast

import msgspec

from events.chain import ChainRule, StoredRecord
from events.codec import decode_event, new_event_id, now_ns
from events.content import KeptMessage, StoredMessage, prepared_content
from events.errors import CorruptEventError, EventIdConflict, StoreClosedError, StoreError
from events.model import EVENT_TYPES, MAX_SESSION_ID_BYTES, Event, LogEntry, Message, RecordedEvent
from events.subscription import Doorbell, Subscription

__all__ = [
    "ANY",
    "NO_STREAM",
    "AppendRequest",
    "EventStore",
    "PreparedAppend",
    "StoreIdentity",
    "Tip",
    "added_hook",
    "check_session_id",
    "record_from_row",
    "retried_positions",
]

ANY: Final = -1
"""Expected version: append whatever the stream's version is."""
NO_STREAM: Final = 0
"""Expected version: the session has no events yet."""

Clock = Callable[[], int]


class StoreIdentity(msgspec.Struct, frozen=True):
    """Who a store is: a stable id and a secret kept with the log (cursors are signed with it)."""

    store_id: str
    secret: bytes


Content = Sequence[Sequence[Message] | None]
"""The messages an append's events refer to, one entry per event (None: the event refers to none)."""


class AppendRequest(msgspec.Struct, frozen=True):
    """One session's part of ``EventStore.append_batch``: the arguments ``append`` takes."""

    session_id: str
    events: Sequence[Event]
    expected_version: int = ANY
    event_ids: Sequence[uuid.UUID] | None = None
    content: Content | None = None


class PreparedAppend(msgspec.Struct, frozen=True):
    """A checked request, as backends receive it: events as a list, one id per event, and the messages of each
    event that refers to some, encoded as the store keeps them (None: no event of the request does)."""

    session_id: str
    events: list[Event]
    expected_version: int
    event_ids: list[uuid.UUID]
    content: list[list[StoredMessage] | None] | None = None


class EventStore(abc.ABC):
    """An append-only log of session events.

    Invariants every backend keeps (each has a test in the contract suite):
    positions strictly increase in commit order; a session's versions are 1..n without gaps; a batch is
    stored whole or not at all; an event id is stored at most once, forever.
    """

    #: How often a subscription looks for appends by other processes (None: only local appends happen).
    poll_interval: float | None = None
    #: Whether long message text is stored zstd-compressed (the text is the same either way; tests that look
    #: for text in the raw files turn it off).
    compress: bool = True
    _identity: StoreIdentity

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or now_ns
        self._doorbell = Doorbell()
        self._closed = False

    # -- the protocol -------------------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_version: int = ANY,
        *,
        event_ids: Sequence[uuid.UUID] | None = None,
        content: Content | None = None,
    ) -> list[int]:
        """Append ``events`` to the session's stream atomically and return their positions.

        ``expected_version`` is ``ANY``, ``NO_STREAM`` or the exact current version; a mismatch raises
        ``ConcurrencyError`` and writes nothing. Re-appending events whose ids are all stored already (a
        retry) returns the original positions and writes nothing; a stored id with other content raises
        ``EventIdConflict``.

        ``content`` gives, per event, the messages a ``SessionUpdated`` with a ``content`` reference refers to
        (its ``ContentRef`` must be ``events.content.content_ref`` of them): they are kept beside the log in the
        same transaction (``messages``), and erased with ``erase``. An empty entry for an event with a reference
        copies an event whose messages were erased before (``import`` of an export): nothing is kept for it.
        """
        self._check_open()
        ids = _check_append_args(session_id, events, expected_version, event_ids)
        kept = prepared_content(events, content, self.compress)
        self._check_writable()
        if kept is None:
            positions = self._append(session_id, list(events), expected_version, ids)
        else:
            positions = self._append_batch([PreparedAppend(session_id, list(events), expected_version, ids, kept)])[0]
        self._doorbell.ring()
        return positions

    def append_batch(self, requests: Sequence[AppendRequest]) -> list[list[int]]:
        """Append to several sessions in one transaction, atomically: every request is stored or none is.

        Each request keeps ``append``'s rules - its expected version, its ids' idempotency (a request whose ids
        are all stored already returns their original positions and writes nothing) - and a request for a
        session that an earlier request of the batch appended to sees that earlier request's events. The first
        request that fails raises its error (``ConcurrencyError``, ``EventIdConflict``...) and nothing of the
        batch is written. Returns each request's positions, in request order. For importers: one commit for
        thousands of sessions.
        """
        self._check_open()
        if isinstance(requests, str | bytes) or not isinstance(requests, Sequence):
            raise TypeError(f"requests must be a sequence of AppendRequest, not {type(requests).__name__}")
        prepared = []
        seen: set[uuid.UUID] = set()
        for n, request in enumerate(requests):
            if not isinstance(request, AppendRequest):
                raise TypeError(f"requests[{n}] is a {type(request).__name__}, not an AppendRequest")
            ids = _check_append_args(request.session_id, request.events, request.expected_version, request.event_ids)
            kept = prepared_content(request.events, request.content, self.compress, f"requests[{n}].")
            if request.event_ids is not None:  # generated ids are new by construction: only given ones can repeat
                if not seen.isdisjoint(ids):
                    raise ValueError(f"requests[{n}] repeats an event id of an earlier request in the batch")
                seen.update(ids)
            prepared.append(
                PreparedAppend(request.session_id, list(request.events), request.expected_version, ids, kept)
            )
        if not prepared:
            return []
        self._check_writable()
        positions = self._append_batch(prepared)
        self._doorbell.ring()
        return positions

    @abc.abstractmethod
    def read(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        """Events with position > ``after`` in position order, at most ``limit`` of them."""

    @abc.abstractmethod
    def read_stream(self, session_id: str, after_version: int = 0) -> list[RecordedEvent]:
        """One session's events with version > ``after_version``, in version order."""

    @abc.abstractmethod
    def head(self) -> int:
        """The position of the last committed event (0 for an empty log)."""

    @property
    def identity(self) -> StoreIdentity:
        """This store's stable id and secret (kept in the log's ``registry_meta``)."""
        return self._identity

    @property
    def read_only(self) -> bool:
        """True when this store was opened read-only (e.g. a file that is not writable): appends raise."""
        return False

    @abc.abstractmethod
    def chain_at(self, position: int) -> bytes | None:
        """The integrity chain's link at ``position`` (``events.chain.GENESIS`` at 0): a value that changes if
        any record up to ``position`` changes. None when no record is stored there, or the store has no chain (a
        version-1 store opened read-only). Something derived from the log as of ``position`` keeps it to tell
        later whether it still reflects this log."""

    @property
    def chain_rule(self) -> ChainRule:
        """Which link function made the chain at each position (``events.chain``): what ``verify`` recomputes."""
        return ChainRule()

    @abc.abstractmethod
    def stored_records(self, after: int = 0, limit: int = 10_000) -> list[StoredRecord]:
        """Records as stored (bytes and links, not decoded) after ``after`` in position order: for ``verify``."""

    # -- the messages kept beside the log -----------------------------------------------------------------

    @abc.abstractmethod
    def messages(self, session_id: str, *, until: int | None = None) -> list[KeptMessage]:
        """The messages kept for a session's events (those at positions up to ``until``), in log order: what its
        ``ContentRef``s refer to, [] for a session without any (or erased)."""

    @abc.abstractmethod
    def messages_at(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], KeptMessage]:
        """The messages kept under ``(position, seq)`` keys (those not kept, or erased, are left out)."""

    @abc.abstractmethod
    def stored_messages(self, after: int = 0, limit: int = 10_000) -> list[tuple[int, str, StoredMessage]]:
        """Messages as stored - (position, session id, message with its encoded body) - for events after
        ``after``, in (position, seq) order, at most about ``limit`` of them (whole events): for ``verify`` and for
        indexes derived from them."""

    def erase(self, session_id: str) -> int:
        """Take the text of a deleted session's messages off the disk, for good: when this returns, no byte of
        it is left in the store's files (SQLite: its rows deleted with ``secure_delete`` and the WAL emptied;
        PostgreSQL: deleted and vacuumed). The log's records stay whole - each keeps its ``ContentRef``, which
        the chain covers - so ``verify`` stays healthy. Only a session whose stream holds a ``SessionDeleted``
        can be erased (``ValueError`` otherwise: erasing is what a user's delete does). Returns how many messages
        were erased; erasing twice erases nothing the second time."""
        self._check_open()
        check_session_id(session_id)
        self._check_writable()
        return self._erase(session_id)

    def _erase(self, session_id: str) -> int:
        raise NotImplementedError(f"{type(self).__name__} keeps no messages to erase")

    def add_erase_hook(self, hook: Any) -> Callable[[], None]:
        """Have ``hook.erasing(connection, session_id, messages)`` run in every erasure before the messages go, so
        an index derived from them takes them out in the same transaction (the connection is the backend's own:
        ``events.sqlite_write.EraseHook``, ``events.postgres_hooks.EraseHook``; None in memory). Returns the
        remover. A store that keeps no messages has nothing to erase: the hook is never called."""
        return lambda: None

    def subscribe(self, after: int | None = None, *, batch: int = 1000) -> Subscription:
        """Every event after ``after`` (default: the current head), then live. No gap, no duplicate."""
        self._check_open()
        start = self.head() if after is None else _check_position("after", after)
        return Subscription(self, start, batch)

    def iter_events(self, after: int = 0, *, batch: int = 10_000) -> Iterator[RecordedEvent]:
        """The whole log after ``after``, read in batches (memory stays flat on large logs)."""
        while True:
            chunk = self.read(after, batch)
            yield from chunk
            if len(chunk) < batch:
                return
            after = chunk[-1].position

    def scan(self, after: int = 0, *, until: int | None = None, batch: int = 10_000) -> Iterator[LogEntry]:
        """The log after ``after`` (up to ``until``, inclusive) for a fold: position, session, version and event
        only. Backends override it with a leaner read; this default reads whole records."""
        _check_position("after", after)
        if until is not None:
            _check_position("until", until)
        for record in self.iter_events(after, batch=batch):
            if until is not None and record.position > until:
                return
            yield LogEntry(record.position, record.session_id, record.version, record.event)

    def close(self) -> None:
        """Release the store; subscriptions end. Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        self._close()
        self._doorbell.ring()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what backends implement ----------------------------------------------------------------------

    @abc.abstractmethod
    def _append(
        self, session_id: str, events: list[Event], expected_version: int, event_ids: list[uuid.UUID]
    ) -> list[int]:
        """Store one checked batch atomically (see ``append``)."""

    @abc.abstractmethod
    def _append_batch(self, requests: list[PreparedAppend]) -> list[list[int]]:
        """Store checked requests in one transaction, all or none (see ``append_batch``)."""

    def _close(self) -> None:
        """Release backend resources."""

    def _change_token(self) -> object:
        """What ``_wait_for_change`` compares against; taken before each read of a subscription, so that a change
        between the read and the wait is never missed."""
        return self._doorbell.generation

    def _wait_for_change(self, token: object, timeout: float | None) -> None:
        """Block until something may have changed since ``token`` or ``timeout`` passes (None: no bound). This
        default waits for the doorbell, at most ``poll_interval`` when other processes may append."""
        wait = self.poll_interval
        if timeout is not None:
            wait = timeout if wait is None else min(wait, timeout)
        self._doorbell.wait(cast(int, token), wait)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{type(self).__name__} is closed")

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self!r} is open read-only; nothing was appended")


_H = TypeVar("_H")


def added_hook(hooks: list[_H], lock: AbstractContextManager[object], hook: _H) -> Callable[[], None]:
    """Add ``hook`` to a backend's ``hooks`` under the ``lock`` its writes hold to run them; the remover returned
    takes it out again (calling it twice is harmless)."""
    with lock:
        hooks.append(hook)

    def remove() -> None:
        with lock:
            if hook in hooks:
                hooks.remove(hook)

    return remove


def check_session_id(session_id: str) -> None:
    """The store's rule for ids (``ValueError`` otherwise): non-empty, valid Unicode, at most
    ``MAX_SESSION_ID_BYTES`` UTF-8 bytes, no control characters."""
    if not session_id:
        raise ValueError("session_id must not be empty")
    try:
        size = len(session_id.encode())
    except UnicodeEncodeError:
        raise ValueError("session_id is not valid Unicode (it holds a lone surrogate)") from None
    if size > MAX_SESSION_ID_BYTES:
        raise ValueError(f"session_id is {size} bytes long; at most {MAX_SESSION_ID_BYTES} are allowed")
    if not session_id.isprintable() and any(unicodedata.category(c) == "Cc" for c in session_id):
        raise ValueError("session_id must not contain control characters (NUL, escapes, newlines)")


def _check_position(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int position, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _check_append_args(
    session_id: object, events: object, expected_version: object, event_ids: object
) -> list[uuid.UUID]:
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, not {type(session_id).__name__}")
    check_session_id(session_id)
    if isinstance(events, str | bytes) or not isinstance(events, Sequence):
        raise TypeError(f"events must be a sequence of events, not {type(events).__name__}")
    if not events:
        raise ValueError("events must not be empty: an append stores at least one event")
    for i, event in enumerate(events):
        if not isinstance(event, EVENT_TYPES):
            raise TypeError(f"events[{i}] is a {type(event).__name__}, not a session event")
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise TypeError(f"expected_version must be an int, not {type(expected_version).__name__}")
    if expected_version < ANY:
        raise ValueError(f"expected_version must be ANY (-1), NO_STREAM (0) or a version, got {expected_version}")
    if event_ids is None:
        return [new_event_id() for _ in events]
    if isinstance(event_ids, str | bytes) or not isinstance(event_ids, Sequence):
        raise TypeError(f"event_ids must be a sequence of UUIDs, not {type(event_ids).__name__}")
    if len(event_ids) != len(events):
        raise ValueError(f"event_ids has {len(event_ids)} ids for {len(events)} events")
    for i, event_id in enumerate(event_ids):
        if not isinstance(event_id, uuid.UUID):
            raise TypeError(f"event_ids[{i}] is a {type(event_id).__name__}, not a uuid.UUID")
    if len(set(event_ids)) != len(event_ids):
        raise ValueError("event_ids repeats an id within one batch")
    return list(event_ids)


_uuid_from_msgpack = msgspec.msgpack.Decoder(uuid.UUID).decode


def record_from_row(row: Sequence[object]) -> RecordedEvent:
    """A stored row (``schema.RECORD_COLUMNS``: position, session_id, version, event_id, recorded_at, data) as a
    record. ``event_id`` is 16 bytes (SQLite) or a UUID (PostgreSQL); a row that does not fit raises
    ``CorruptEventError`` naming its position."""
    position, session_id, version, event_id, recorded_at, data = row
    if isinstance(event_id, bytes) and len(event_id) == 16:
        event_id = _uuid_from_msgpack(b"\xc4\x10" + event_id)  # msgspec builds a UUID faster than uuid.UUID()
    if (
        not isinstance(position, int)
        or not isinstance(session_id, str)
        or not isinstance(version, int)
        or not isinstance(event_id, uuid.UUID)
        or not isinstance(recorded_at, int)
        or not isinstance(data, bytes)
    ):
        raise CorruptEventError(
            position if isinstance(position, int) else -1,
            "the record's columns have the wrong types",
            session_id if isinstance(session_id, str) else None,
            version if isinstance(version, int) else None,
        )
    return RecordedEvent(
        position, session_id, version, event_id, recorded_at, decode_event(data, position, session_id, version)
    )


def retried_positions(
    session_id: str,
    events: Sequence[Event],
    event_ids: Sequence[uuid.UUID],
    stored: Mapping[uuid.UUID, RecordedEvent],
) -> list[int] | None:
    """A batch some of whose ids are stored already (``stored``: the records found for its ids): the same batch
    again (a retry) or a conflict. None when none of its ids is stored.

    A retry returns the original positions. Anything else - a mix of stored and new ids, another
    session, other content - raises ``EventIdConflict`` and writes nothing.
    """
    if not stored:
        return None
    positions = []
    for event, event_id in zip(events, event_ids, strict=True):
        record = stored.get(event_id)
        if record is None:
            raise EventIdConflict(str(event_id), "this batch mixes ids stored already with new ones")
        if record.session_id != session_id:
            raise EventIdConflict(
                str(event_id), f"stored for session {record.session_id!r}, appended for {session_id!r}"
            )
        if record.event != event:
            raise EventIdConflict(str(event_id), f"stored at position {record.position} with other content")
        positions.append(record.position)
    return positions


class Tip:
    """The log's end as a writer's transaction moves it: the head position, its link, the next new stream number
    (None: not looked up yet). A unit of work that is rolled back restores the mark it saved."""

    __slots__ = ("head", "next_stream", "previous")

    def __init__(self, head: int, previous: bytes, next_stream: int | None) -> None:
        self.head = head
        self.previous = previous
        self.next_stream = next_stream

    def saved(self) -> tuple[int, bytes, int | None]:
        return self.head, self.previous, self.next_stream

    def restore(self, mark: tuple[int, bytes, int | None]) -> None:
        self.head, self.previous, self.next_stream = mark
