"""The error tree. Each error carries the facts a caller needs to act on it.

    RegistryError
    └── StoreError                   the event store failed or refused
        ├── ConcurrencyError         expected version did not match; nothing was written
        ├── EventIdConflict          an event id was reused for different content (also a ValueError)
        ├── CorruptEventError        a stored record does not decode; names its position
        ├── StoreFormatError         not a registry store, of a newer schema, empty (not asked to create),
        │                            damaged or truncated; left untouched
        └── StoreClosedError         the store was used after close()

Driver exceptions (sqlite3, psycopg) are translated into these at one boundary in each backend.
The registry adds its own below ``RegistryError`` (see ``registry.errors``).
"""

from __future__ import annotations

__all__ = [
    "ConcurrencyError",
    "CorruptEventError",
    "EventIdConflict",
    "RegistryError",
    "StoreClosedError",
    "StoreError",
    "StoreFormatError",
]


class RegistryError(Exception):
    """Base of every error this library raises on purpose."""


class StoreError(RegistryError):
    """The event store failed or refused an operation."""


class ConcurrencyError(StoreError):
    """An append's expected version did not match the session's stream; nothing was written."""

    def __init__(self, session_id: str, expected: int, actual: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        super().__init__(f"session {session_id!r}: expected version {_describe(expected)}, stream is at {actual}")


def _describe(expected: int) -> str:
    return {-1: "any", 0: "0 (no stream yet)"}.get(expected, str(expected))


class EventIdConflict(StoreError, ValueError):
    """An event id already stored was appended again with other content or to another session."""

    def __init__(self, event_id: str, reason: str) -> None:
        self.event_id = event_id
        self.reason = reason
        super().__init__(f"event id {event_id}: {reason}")


class CorruptEventError(StoreError):
    """A stored record could not be decoded. The log is not skipped over silently."""

    def __init__(self, position: int, reason: str, session_id: str | None = None, version: int | None = None) -> None:
        self.position = position
        self.reason = reason
        self.session_id = session_id
        self.version = version
        where = "" if session_id is None else f" (session {session_id!r} version {version})"
        super().__init__(f"event at position {position}{where} is corrupt: {reason}")


class StoreFormatError(StoreError):
    """The file is not a registry store (or is empty, damaged or truncated), or was written by a newer schema; it was
    left untouched."""

    def __init__(self, location: str, reason: str) -> None:
        self.location = location
        self.reason = reason
        super().__init__(f"{location}: {reason}")


class StoreClosedError(StoreError):
    """The store was used after ``close()``."""
