"""What is derived from the log, and how it is served: projections, cursors, the ACP surface."""

from registry.cursor import Cursor, CursorCodec
from registry.errors import (
    InvalidCursor,
    InvalidParams,
    MethodNotFound,
    RpcError,
    SessionDeletedError,
    SessionExists,
    SessionNotFound,
    rpc_error,
)
from registry.model import ListSessionsResult, SessionInfo, SessionState
from registry.paths import normalise_cwd
from registry.projection import Change, Projection
from registry.service import SessionRegistry

__all__ = [
    "Change",
    "Cursor",
    "CursorCodec",
    "InvalidCursor",
    "InvalidParams",
    "ListSessionsResult",
    "MethodNotFound",
    "Projection",
    "RpcError",
    "SessionDeletedError",
    "SessionExists",
    "SessionInfo",
    "SessionNotFound",
    "SessionRegistry",
    "SessionState",
    "normalise_cwd",
    "rpc_error",
]
