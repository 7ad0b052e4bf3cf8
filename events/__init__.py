"""The truth: the session event log (vocabulary, codec, stores).

The public names are the ``from ... import NAME as NAME`` lines of the ``TYPE_CHECKING`` block below, declared once: a
type checker reads them, and at run time ``__all__`` and each name's module follow from them (``events.exports``).
``import events`` stays light: each name loads its module when first read (PEP 562), so a process that opens a SQLite
store does not import the in-memory store, the hash chain (hashlib) or the PostgreSQL driver it never uses.
"""

import typing as _typing

from events.exports import lazy_names as _lazy_names

__distribution__ = "acp-session-registry"
"""Marks this ``events`` as ours: another distribution (the PyPI package ``Events``) installs a package of that
name, and ``import registry`` checks the mark."""

if _typing.TYPE_CHECKING:
    __all__: list[str]  # the names below, in ruff's order (events.exports)
    from events.errors import ConcurrencyError as ConcurrencyError
    from events.errors import CorruptEventError as CorruptEventError
    from events.errors import EventIdConflict as EventIdConflict
    from events.errors import RegistryError as RegistryError
    from events.errors import StoreClosedError as StoreClosedError
    from events.errors import StoreError as StoreError
    from events.errors import StoreFormatError as StoreFormatError
    from events.factory import open_store as open_store
    from events.memory import MemoryStore as MemoryStore
    from events.model import ContentRef as ContentRef
    from events.model import Event as Event
    from events.model import ForkRef as ForkRef
    from events.model import LogEntry as LogEntry
    from events.model import Message as Message
    from events.model import RecordedEvent as RecordedEvent
    from events.model import Role as Role
    from events.model import SessionArchived as SessionArchived
    from events.model import SessionCreated as SessionCreated
    from events.model import SessionDeleted as SessionDeleted
    from events.model import SessionInfoChanged as SessionInfoChanged
    from events.model import SessionPinned as SessionPinned
    from events.model import SessionUnarchived as SessionUnarchived
    from events.model import SessionUpdated as SessionUpdated
    from events.model import TitleSource as TitleSource
    from events.model import Usage as Usage
    from events.model import UserMark as UserMark
    from events.sqlite import SqliteStore as SqliteStore
    from events.store import ANY as ANY
    from events.store import NO_STREAM as NO_STREAM
    from events.store import AppendRequest as AppendRequest
    from events.store import EventStore as EventStore
    from events.store import StoreIdentity as StoreIdentity
    from events.subscription import Subscription as Subscription
else:  # each name loads its module when first read (events.exports)
    __getattr__, __dir__ = _lazy_names(__name__, __file__, globals())
