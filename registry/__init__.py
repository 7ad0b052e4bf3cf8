"""What is derived from the log, and how it is served: the ``SessionRegistry`` facade, its read model, the ACP
shapes it answers with, the change stream's items, and the errors.

The public surface is ``__all__`` below (a test lists it, so a change to it is a visible decision). Modules not
re-exported here (``registry.readmodel``, ``registry.projection``, ``registry.cursor``, ``registry.snapshot``,
...) are importable on their own and documented, but their insides may change between versions.
``import registry`` stays light: reactivex loads with the first change stream, psycopg with the first
PostgreSQL store.
"""

__version__ = "0.2.0"

from events.errors import RegistryError
from registry.diffs import Added, ListChange, Removed, SessionInfoUpdate, SessionNotification, Updated
from registry.errors import (
    InvalidCursor,
    InvalidParams,
    MethodNotFound,
    RpcError,
    SessionDeletedError,
    SessionExists,
    SessionNotFound,
    SubscriberTooSlow,
    rpc_error,
)
from registry.follow import Following
from registry.model import ListSessionsResult, SessionInfo, SessionState
from registry.paths import normalise_cwd
from registry.projection import Change
from registry.service import SessionRegistry

__all__ = [
    "Added",
    "Change",
    "Following",
    "InvalidCursor",
    "InvalidParams",
    "ListChange",
    "ListSessionsResult",
    "MethodNotFound",
    "RegistryError",
    "Removed",
    "RpcError",
    "SessionDeletedError",
    "SessionExists",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionNotFound",
    "SessionNotification",
    "SessionRegistry",
    "SessionState",
    "SubscriberTooSlow",
    "Updated",
    "normalise_cwd",
    "rpc_error",
]
