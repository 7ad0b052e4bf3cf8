"""The truth: the session event log (vocabulary, codec, stores).

``import events`` stays light: each name loads its module when first read (PEP 562), so a process that opens a
SQLite store does not import the in-memory store, the hash chain (hashlib) or the PostgreSQL driver it never uses.
"""

from typing import TYPE_CHECKING

from events.exports import lazy_names

if TYPE_CHECKING:
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
        ContentRef,
        Event,
        ForkRef,
        LogEntry,
        Message,
        RecordedEvent,
        Role,
        SessionArchived,
        SessionCreated,
        SessionDeleted,
        SessionInfoChanged,
        SessionUnarchived,
        SessionUpdated,
        TitleSource,
        Usage,
    )
    from events.sqlite import SqliteStore
    from events.store import ANY, NO_STREAM, AppendRequest, EventStore, StoreIdentity
    from events.subscription import Subscription

__distribution__ = "acp-session-registry"
"""Marks this ``events`` as ours: another distribution (the PyPI package ``Events``) installs a package of that
name, and ``import registry`` checks the mark."""

__all__ = [
    "ANY",
    "NO_STREAM",
    "AppendRequest",
    "ConcurrencyError",
    "ContentRef",
    "CorruptEventError",
    "Event",
    "EventIdConflict",
    "EventStore",
    "ForkRef",
    "LogEntry",
    "MemoryStore",
    "Message",
    "RecordedEvent",
    "RegistryError",
    "Role",
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
    "Usage",
    "open_store",
]

_HOMES = {
    "ANY": "events.store",
    "NO_STREAM": "events.store",
    "AppendRequest": "events.store",
    "ConcurrencyError": "events.errors",
    "ContentRef": "events.model",
    "CorruptEventError": "events.errors",
    "Event": "events.model",
    "EventIdConflict": "events.errors",
    "EventStore": "events.store",
    "ForkRef": "events.model",
    "LogEntry": "events.model",
    "Message": "events.model",
    "MemoryStore": "events.memory",
    "RecordedEvent": "events.model",
    "Role": "events.model",
    "RegistryError": "events.errors",
    "SessionArchived": "events.model",
    "SessionCreated": "events.model",
    "SessionDeleted": "events.model",
    "SessionInfoChanged": "events.model",
    "SessionUnarchived": "events.model",
    "SessionUpdated": "events.model",
    "SqliteStore": "events.sqlite",
    "StoreClosedError": "events.errors",
    "StoreError": "events.errors",
    "StoreFormatError": "events.errors",
    "StoreIdentity": "events.store",
    "Subscription": "events.subscription",
    "TitleSource": "events.model",
    "Usage": "events.model",
    "open_store": "events.factory",
}
"""Each public name -> the module it lives in, imported when the name is first read."""


__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals(), __all__)
