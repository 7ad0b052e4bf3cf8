"""What the proxy reads of the messages it relays, without decoding more than it needs.

An agent's line is peeked into ``AgentLine``: the envelope only, its ``params`` / ``result`` / ``error`` kept as
raw JSON bytes (``msgspec.Raw``), so a large ``session/update`` costs one scan and is relayed as the very bytes
the agent wrote; a response is re-encoded with the client's id around the agent's raw result. Lines nesting deeper
than the limit and lines that are not JSON-RPC are refused with ``registry.acp.jsonrpc``'s rules, the ones
``serve`` applies.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET, UnsetType

from registry.acp.jsonrpc import Incoming, Invalid, OverlongLine, RequestId, parse
from registry.errors import INVALID_REQUEST, RpcError
from registry.limits import MAX_MESSAGE_DEPTH

__all__ = [
    "CANCEL",
    "AgentLine",
    "TitleUpdate",
    "encode_error",
    "encode_request",
    "encode_response",
    "peek_agent",
    "title_update",
]


CANCEL: Final = "$/cancel_request"
"""ACP's notification cancelling a request (either way): its ``requestId`` is an id of the side that sent the
request, so a hop that gave the request an id of its own names that id when it passes the cancel on."""


class AgentLine(msgspec.Struct):
    """One line from the agent: a request to the client (method and id), a notification (method), or a
    response (id and result or error)."""

    jsonrpc: Any = None
    id: Any = UNSET
    method: Any = UNSET
    params: msgspec.Raw = msgspec.Raw()
    result: msgspec.Raw = msgspec.Raw()
    error: msgspec.Raw = msgspec.Raw()


class _Response(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: Any
    result: msgspec.Raw


class _ErrorResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: Any
    error: msgspec.Raw


class _Request(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: Any
    method: str
    params: Any = UNSET  # UNSET: no params member at all


class _Update(msgspec.Struct, rename="camel"):
    session_id: str
    update: dict[str, Any]


_decoder: Final = msgspec.json.Decoder(AgentLine)
_update_decoder: Final = msgspec.json.Decoder(_Update)
_encoder: Final = msgspec.json.Encoder()


def peek_agent(line: bytes | OverlongLine) -> AgentLine | Invalid:
    """The envelope of an agent's line, or why it is not relayed (with the id it answers, when one is readable)."""
    if isinstance(line, OverlongLine) or line.count(b"[") + line.count(b"{") > MAX_MESSAGE_DEPTH:
        checked = parse(line)  # the same limits as serve: too long, too deep
        if isinstance(checked, Invalid):
            return checked
        if isinstance(checked, list):
            return Invalid(None, RpcError(INVALID_REQUEST, "a batch from the agent"))
    assert isinstance(line, bytes)  # an over-long line is always refused above
    try:
        message = _decoder.decode(line)
    except msgspec.DecodeError as exc:
        checked = parse(line)
        if isinstance(checked, Invalid):
            return checked
        return Invalid(None, RpcError(INVALID_REQUEST, f"not a JSON-RPC message ({exc})"))
    if message.jsonrpc != "2.0":
        return Invalid(_id_or_none(message.id), RpcError(INVALID_REQUEST, '"jsonrpc" must be "2.0"'))
    if message.id is not UNSET and not _is_id(message.id):
        return Invalid(None, RpcError(INVALID_REQUEST, "the id is not a string, a number or null"))
    if message.method is not UNSET and (not isinstance(message.method, str) or not message.method):
        return Invalid(_id_or_none(message.id), RpcError(INVALID_REQUEST, "the method is not a non-empty string"))
    if message.method is UNSET and message.id is UNSET:
        return Invalid(None, RpcError(INVALID_REQUEST, "neither a method nor an id"))
    if message.method is UNSET and not (len(message.result) or len(message.error)):
        return Invalid(_id_or_none(message.id), RpcError(INVALID_REQUEST, "a response without result or error"))
    return message


class TitleUpdate(NamedTuple):
    session_id: str
    title: str | None
    alone: bool
    """Whether the update says nothing but the title."""


def title_update(message: AgentLine) -> TitleUpdate | None:
    """The session, title and whether that is all of a ``session_info_update`` that sets or clears a title; None
    otherwise."""
    try:
        update = _update_decoder.decode(message.params)
    except msgspec.DecodeError:
        return None
    body = update.update
    if body.get("sessionUpdate") != "session_info_update" or "title" not in body:
        return None
    title = body["title"]
    if title is not None and not isinstance(title, str):
        return None
    return TitleUpdate(update.session_id, title, body.keys() <= {"sessionUpdate", "title"})


def encode_response(request_id: RequestId, message: AgentLine) -> bytes:
    """The agent's response with the client's id, its result or error bytes unchanged."""
    if len(message.result):
        return _encoder.encode(_Response(id=request_id, result=message.result))
    return _encoder.encode(_ErrorResponse(id=request_id, error=message.error))


def encode_error(request_id: RequestId, error: RpcError) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "error": error})


def encode_request(request_id: int, incoming: Incoming | tuple[str, Any]) -> bytes:
    """A request to the agent under the proxy's id: a client's (``Incoming``) or the proxy's own."""
    if isinstance(incoming, Incoming):
        method, params = incoming.method, incoming.params
    else:
        method, params = incoming
    assert method is not None
    return _encoder.encode(_Request(id=request_id, method=method, params=UNSET if params is None else params))


def _is_id(value: object) -> bool:
    return value is None or (isinstance(value, int | float | str) and not isinstance(value, bool))


def _id_or_none(value: object) -> RequestId:
    return value if _is_id(value) and not isinstance(value, UnsetType) else None  # type: ignore[return-value]
