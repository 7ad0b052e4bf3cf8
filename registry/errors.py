"""The registry's errors, and the one place they become JSON-RPC error objects.

``RegistryError`` is the root of every error this library raises. It is defined with the log's errors
(``events.errors``), the lowest layer, so that the store's errors can share it; ``registry`` exports it as its
public home, and nothing else of that name exists.

    RegistryError
    ├── StoreError           -32603        the event store failed or refused (events.errors: its own subtree)
    ├── InvalidParams        -32602        wrong JSON-RPC params: types, relative paths, long titles
    │   └── InvalidCursor    -32602        data.reason: garbled | truncated | tampered | foreign | version | cwd
    ├── SessionNotFound      -32002        no such session (a LookupError)
    │   └── SessionDeletedError   -32002        the session was deleted; writes to it are refused
    ├── SessionExists        -32602        create with an id that is taken
    ├── MethodNotFound       -32601
    └── SubscriberTooSlow                  a change-stream subscriber fell too far behind and was ended

Everything else that escapes a handler is an internal error (-32603) whose message names its type only.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.errors import RegistryError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "InvalidCursor",
    "InvalidParams",
    "MethodNotFound",
    "RpcError",
    "SessionDeletedError",
    "SessionExists",
    "SessionNotFound",
    "SubscriberTooSlow",
    "rpc_error",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002


class InvalidParams(RegistryError, ValueError):
    """Params of a command or request are wrong; the message says which and why."""

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data


class InvalidCursor(InvalidParams):
    """A cursor that this registry cannot continue from. Never silently restarts at page 1."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"invalid cursor ({reason}): {detail}", {"reason": reason})
        self.reason = reason


class SessionNotFound(RegistryError, LookupError):
    def __init__(self, session_id: str, message: str | None = None) -> None:
        super().__init__(message or f"session {session_id!r} not found")
        self.session_id = session_id


class SessionDeletedError(SessionNotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(session_id, f"session {session_id!r} was deleted; it cannot be changed")


class SessionExists(RegistryError, ValueError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} exists already")
        self.session_id = session_id


class MethodNotFound(RegistryError, LookupError):
    def __init__(self, method: str) -> None:
        super().__init__(f"method {method!r} not found")
        self.method = method


class SubscriberTooSlow(RegistryError):
    """A subscriber fell too far behind; its subscription was ended so the registry's memory stays bounded."""


class RpcError(msgspec.Struct, omit_defaults=True):
    """A JSON-RPC error object, as it goes on the wire."""

    code: int
    message: str
    data: Any = msgspec.UNSET


def rpc_error(exc: BaseException) -> RpcError:
    """Map an exception to its JSON-RPC error: the one place codes are chosen."""
    if isinstance(exc, InvalidParams):
        return RpcError(INVALID_PARAMS, str(exc), exc.data if exc.data is not None else msgspec.UNSET)
    if isinstance(exc, SessionNotFound):
        return RpcError(RESOURCE_NOT_FOUND, str(exc), {"sessionId": exc.session_id})
    if isinstance(exc, SessionExists):
        return RpcError(INVALID_PARAMS, str(exc), {"sessionId": exc.session_id})
    if isinstance(exc, MethodNotFound):
        return RpcError(METHOD_NOT_FOUND, str(exc), {"method": exc.method})
    if isinstance(exc, RegistryError):
        return RpcError(INTERNAL_ERROR, str(exc))
    return RpcError(INTERNAL_ERROR, f"internal error ({type(exc).__name__})")
