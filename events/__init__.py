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
from events.factory import open_store
from events.memory import MemoryStore
from events.model import (
    Event,
    ForkRef,
    LogEntry,
    RecordedEvent,
    SessionArchived,
    SessionCreated,
    SessionDeleted,
    SessionInfoChanged,
    SessionUnarchived,
    SessionUpdated,
    TitleSource,
)
from events.sqlite import SqliteStore
from events.store import ANY, NO_STREAM, AppendRequest, EventStore, StoreIdentity, Subscription

__distribution__ = "acp-session-registry"
"""Marks this ``events`` as ours: another distribution (the PyPI package ``Events``) installs a package of that
name, and ``import registry`` checks the mark."""

__all__ = [
    "ANY",
    "NO_STREAM",
    "AppendRequest",
    "ConcurrencyError",
    "CorruptEventError",
    "Event",
    "EventIdConflict",
    "EventStore",
    "ForkRef",
    "LogEntry",
    "MemoryStore",
    "RecordedEvent",
    "RegistryError",
    "SessionArchived",
    "SessionCreated",
    "SessionDeleted",
    "SessionInfoChanged",
    "SessionUnarchived",
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
