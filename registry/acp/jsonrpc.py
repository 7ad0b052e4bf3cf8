"""JSON-RPC 2.0 framing for ACP over stdio: one message per line, msgspec in and out.

Parsing never raises: a line that is not JSON becomes a -32700 error, one that is not a request a -32600,
and each says what was wrong. Encoding keeps explicit nulls (``msgspec.UNSET`` fields are omitted, ``None``
is ``null``), which the ACP tri-state updates need.
"""

from __future__ import annotations

from typing import Any

import msgspec

from registry.errors import INVALID_REQUEST, PARSE_ERROR, RpcError

__all__ = ["Incoming", "encode_error", "encode_notification", "encode_result", "parse"]

RequestId = int | str | None

_encoder = msgspec.json.Encoder()


class Incoming(msgspec.Struct, frozen=True):
    """A parsed line: a request (``id`` given), a notification (no ``id``), or a response to us."""

    method: str | None
    params: Any
    id: RequestId
    has_id: bool
    is_response: bool = False


class _Response(msgspec.Struct):
    id: RequestId
    result: Any
    jsonrpc: str = "2.0"


class _ErrorResponse(msgspec.Struct):
    id: RequestId
    error: RpcError
    jsonrpc: str = "2.0"


class _Notification(msgspec.Struct):
    method: str
    params: Any
    jsonrpc: str = "2.0"


def parse(line: bytes) -> Incoming | RpcError:
    """One line of input as a message, or the error to answer it with (id unknown: null)."""
    try:
        message = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        return RpcError(PARSE_ERROR, f"parse error: {exc}")
    if isinstance(message, list):
        return RpcError(INVALID_REQUEST, "invalid request: batches are not supported")
    if not isinstance(message, dict):
        return RpcError(INVALID_REQUEST, "invalid request: a message must be a JSON object")
    if message.get("jsonrpc") != "2.0":
        return RpcError(INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"')
    has_id = "id" in message
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str | None):
        return RpcError(INVALID_REQUEST, "invalid request: id must be a string, a number or null")
    method = message.get("method")
    if method is None and has_id and ("result" in message or "error" in message):
        return Incoming(None, None, request_id, True, is_response=True)
    if not isinstance(method, str) or not method:
        return RpcError(INVALID_REQUEST, "invalid request: method must be a non-empty string")
    return Incoming(method, message.get("params"), request_id, has_id)


def encode_result(request_id: RequestId, result: Any) -> bytes:
    return _encoder.encode(_Response(request_id, result))


def encode_error(request_id: RequestId, error: RpcError) -> bytes:
    return _encoder.encode(_ErrorResponse(request_id, error))


def encode_notification(method: str, params: Any) -> bytes:
    return _encoder.encode(_Notification(method, params))
