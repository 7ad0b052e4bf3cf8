"""The registry's errors, and the one place they become JSON-RPC error objects (``rpc_error``).

``RegistryError`` is the root of every error this library raises on purpose. It is defined with the log's errors
(``events.errors``), the lowest layer, so that the store's errors can share it; ``registry`` exports it as its
public home, and nothing else of that name exists. Like attrs, an error also subclasses the builtin a caller
would catch without knowing ours (``ValueError`` for a wrong value, ``LookupError`` for a missing thing).

    RegistryError                    code    where, and what
    ├── StoreError                   -32603  events.errors: the event store failed or refused (its own subtree:
    │                                        ConcurrencyError, EventIdConflict, CorruptEventError,
    │                                        StoreFormatError, StoreClosedError)
    ├── InvalidParams (ValueError)   -32602  wrong params of a command or request: types, relative paths, long titles;
    │                                        data.field names the field (every -32602 has it)
    │   └── InvalidCursor            -32602  data.field "cursor", data.reason: garbled | truncated | tampered |
    │                                        foreign | version | cwd | archived | agent
    ├── SessionNotFound (LookupError) -32002 no such session; data.sessionId
    │   └── SessionDeletedError      -32002  the session was deleted; writes to it are refused
    ├── SessionExists (ValueError)   -32602  create with an id that is taken; data.field "sessionId", data.sessionId
    ├── MethodNotFound (LookupError) -32601  data.method
    ├── SubscriberTooSlow            -32603  a change-stream subscriber fell too far behind and was ended
    ├── ReadModelFault               -32010  the read model cannot answer and could not be rebuilt or folded
    │                                        in memory either (derived data, never the log); data.remedy
    ├── SnapshotError (ValueError)   -32603  registry.snapshot: a kept snapshot cannot be used (it is ignored)
    ├── ImportStateError (ValueError) -32603 registry.importers.state: the import state is a folder or a symlink
    └── SchemaError (ValueError)     -32603  registry.importers.databases: an agent's database is laid out otherwise

Everything else that escapes a handler is an internal error (-32603) whose message names its type only. The
command line's own errors (``registry.cli.errors``) are exit codes of the application, never raised by the
library's API, and stay outside the tree. The framing errors of ``registry.acp.jsonrpc`` (-32700, -32600) are
not exceptions: a line is answered with them, using the constants defined here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from events.errors import RegistryError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "READ_MODEL_FAULT",
    "RESOURCE_NOT_FOUND",
    "InvalidCursor",
    "InvalidParams",
    "MethodNotFound",
    "ReadModelFault",
    "RpcError",
    "SessionDeletedError",
    "SessionExists",
    "SessionNotFound",
    "SubscriberTooSlow",
    "accepts",
    "rpc_error",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
READ_MODEL_FAULT = -32010
"""A server error of the implementation-defined range: the read model (derived data) cannot answer now."""

_T = TypeVar("_T")


class InvalidParams(RegistryError, ValueError):
    """Params of a command or request are wrong; the message says which and why, ``field`` names the field as the
    request spells it (``cwd``, ``prompt[0].text``, ``_meta``; ``params`` for the whole) and ``data`` adds facts."""

    def __init__(self, message: str, data: dict[str, Any] | None = None, *, field: str = "params") -> None:
        super().__init__(message)
        self.field = field
        self.data: dict[str, Any] = {"field": field, **(data or {})}


def accepts(check: Callable[[_T], object], value: _T) -> bool:
    """Whether ``check`` takes ``value``: raises no ``InvalidParams`` (a value left out, not refused with the rest)."""
    try:
        check(value)
    except InvalidParams:
        return False
    return True


class InvalidCursor(InvalidParams):
    """A cursor that this registry cannot continue from. Never silently restarts at page 1."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"invalid cursor ({reason}): {detail}", {"reason": reason}, field="cursor")
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


class ReadModelFault(RegistryError):
    """The read model's tables cannot serve: a row or blob that does not decode, a table, column, index or
    ``rm_meta`` row that is missing. Derived data, never the log: it is rebuilt from the log (or the log is folded
    in memory) and the answer given (``registry.readmodel.guard``); this error escapes only when that failed too,
    and names the remedy, ``acp-registry rebuild``."""


class RpcError(msgspec.Struct, omit_defaults=True):
    """A JSON-RPC error object, as it goes on the wire."""

    code: int
    message: str
    data: Any = msgspec.UNSET


def rpc_error(exc: BaseException) -> RpcError:
    """Map an exception to its JSON-RPC error: the one place codes are chosen."""
    if isinstance(exc, InvalidParams):
        return RpcError(INVALID_PARAMS, str(exc), exc.data)
    if isinstance(exc, SessionNotFound):
        return RpcError(RESOURCE_NOT_FOUND, str(exc), {"sessionId": exc.session_id})
    if isinstance(exc, SessionExists):
        return RpcError(INVALID_PARAMS, str(exc), {"field": "sessionId", "sessionId": exc.session_id})
    if isinstance(exc, MethodNotFound):
        return RpcError(METHOD_NOT_FOUND, str(exc), {"method": exc.method})
    if isinstance(exc, ReadModelFault):
        return RpcError(READ_MODEL_FAULT, str(exc), {"remedy": "acp-registry rebuild"})
    if isinstance(exc, RegistryError):
        return RpcError(INTERNAL_ERROR, str(exc))
    return RpcError(INTERNAL_ERROR, f"internal error ({type(exc).__name__})")
