"""The truth: the session event log (vocabulary, codec, stores).

``import events`` stays light: each name loads its module when first read (PEP 562), so a process that opens a
SQLite store does not import the in-memory store, the hash chain (hashlib) or the PostgreSQL driver it never uses.
"""

from typing import TYPE_CHECKING, Any

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
    from events.urls import open_store

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

_MODEL = (
    "Event",
    "ForkRef",
    "LogEntry",
    "RecordedEvent",
    "SessionArchived",
    "SessionCreated",
    "SessionDeleted",
    "SessionInfoChanged",
    "SessionUnarchived",
    "SessionUpdated",
    "TitleSource",
)
_ERRORS = (
    "ConcurrencyError",
    "CorruptEventError",
    "EventIdConflict",
    "RegistryError",
    "StoreClosedError",
    "StoreError",
    "StoreFormatError",
)
_STORE = ("ANY", "NO_STREAM", "AppendRequest", "EventStore", "StoreIdentity", "Subscription")
_HOMES = {
    **dict.fromkeys(_MODEL, "events.model"),
    **dict.fromkeys(_ERRORS, "events.errors"),
    **dict.fromkeys(_STORE, "events.store"),
    "MemoryStore": "events.memory",
    "SqliteStore": "events.sqlite",
    "open_store": "events.urls",
}
"""Each public name -> the module it lives in, imported when the name is first read."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'events' has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
