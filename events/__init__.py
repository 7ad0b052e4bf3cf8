"""The truth: the session event log (vocabulary, codec, stores)."""

from events.errors import (
    ConcurrencyError,
    CorruptEventError,
    EventIdConflict,
    RegistryError,
    StoreClosedError,
    StoreError,
    StoreFormatError,
)
from events.memory import MemoryStore
from events.model import (
    Event,
    RecordedEvent,
    SessionCreated,
    SessionDeleted,
    SessionInfoChanged,
    SessionUpdated,
    TitleSource,
)
from events.sqlite import SqliteStore
from events.store import ANY, NO_STREAM, EventStore, StoreIdentity, Subscription
from events.urls import open_store

__all__ = [
    "ANY",
    "NO_STREAM",
    "ConcurrencyError",
    "CorruptEventError",
    "Event",
    "EventIdConflict",
    "EventStore",
    "MemoryStore",
    "RecordedEvent",
    "RegistryError",
    "SessionCreated",
    "SessionDeleted",
    "SessionInfoChanged",
    "SessionUpdated",
    "SqliteStore",
    "StoreClosedError",
    "StoreError",
    "StoreFormatError",
    "StoreIdentity",
    "Subscription",
    "TitleSource",
    "open_store",
]
