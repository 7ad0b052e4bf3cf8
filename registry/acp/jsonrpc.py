"""JSON-RPC 2.0 framing for ACP over stdio: one message per line, msgspec in and out.

Reading never holds more than ``MAX_MESSAGE_BYTES`` of a line: a longer one is skipped to its newline and
refused. Parsing never raises, whatever the bytes: a line that is not JSON is a -32700 parse error; one that is
JSON but not a request (no method, a wrong ``jsonrpc``, an id that is not a string or a number, params that are
neither an object nor an array), nests deeper than ``MAX_MESSAGE_DEPTH`` or is too long is a -32600 invalid
request. Each error carries the request's id whenever it can be read - from the decoded message, or, for a line
that could not be decoded, from its top-level ``"id"`` member (found by a small scanner that never recurses) -
and ``null`` otherwise, so a client waiting for an answer gets one. A valid notification, and a response sent
to us, get nothing. Batches are refused: each request in one gets its own -32600 with its id (in one array, as
JSON-RPC answers a batch), notifications in it get nothing.

Encoding keeps explicit nulls (``msgspec.UNSET`` fields are omitted, ``None`` is ``null``), which the ACP
tri-state updates need.
"""

from __future__ import annotations

import array
import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Final

import msgspec

from registry.commands import json_type
from registry.errors import INVALID_REQUEST, PARSE_ERROR, RpcError
from registry.limits import MAX_MESSAGE_BYTES, MAX_MESSAGE_DEPTH

__all__ = [
    "Incoming",
    "Invalid",
    "OverlongLine",
    "RequestId",
    "encode_batch",
    "encode_error",
    "encode_notification",
    "encode_result",
    "incoming",
    "parse",
    "read_lines",
]

RequestId = int | float | str | None

_HEAD: Final = 64 * 1024  # how much of an undecodable line is searched for its id
_CHUNK: Final = 1024 * 1024  # the rest of an over-long line is skipped this much at a time

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class Incoming(msgspec.Struct, frozen=True):
    """A parsed line: a request (``id`` given), a notification (no ``id``), or a response to us."""

    method: str | None
    params: Any
    id: RequestId
    has_id: bool
    is_response: bool = False


class Invalid(msgspec.Struct, frozen=True):
    """A line (or a batch member) that is not a request we serve: the error to answer it with, and the id."""

    id: RequestId
    error: RpcError


class OverlongLine(msgspec.Struct, frozen=True):
    """A line longer than the limit: its first bytes (to find an id in) and its whole length."""

    head: bytes
    size: int


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


# -- reading ----------------------------------------------------------------------------------------------


def read_lines(stream: BinaryIO, limit: int = MAX_MESSAGE_BYTES) -> Iterator[bytes | OverlongLine]:
    """Each line of ``stream`` without its newline, until EOF; a line over ``limit`` bytes as an ``OverlongLine``
    (skipped in chunks, so memory stays bounded by ``limit`` whatever the client sends)."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1]
            continue
        if len(line) <= limit:
            yield line  # the last line, without a newline before EOF
            return
        head, size = line[:_HEAD], len(line)
        while True:
            rest = stream.readline(_CHUNK)
            if not rest:
                break
            if rest.endswith(b"\n"):
                size += len(rest) - 1
                break
            size += len(rest)
        yield OverlongLine(head, size)


# -- parsing ----------------------------------------------------------------------------------------------


def parse(line: bytes | OverlongLine) -> Incoming | Invalid | list[Invalid]:
    """One line as a message, or the error to answer it with, or (for a batch) the errors to answer in an array
    (empty: answer nothing)."""
    if isinstance(line, OverlongLine):
        return Invalid(
            _salvage_id(line.head),
            RpcError(
                INVALID_REQUEST, f"invalid request: the line is {line.size} bytes; at most {MAX_MESSAGE_BYTES} are read"
            ),
        )
    too_deep = RpcError(INVALID_REQUEST, f"invalid request: the message nests deeper than {MAX_MESSAGE_DEPTH} levels")
    if _nesting(line) > MAX_MESSAGE_DEPTH:
        return Invalid(_salvage_id(line), too_deep)
    try:
        message = _decoder.decode(line)
    except msgspec.DecodeError as exc:
        return Invalid(_salvage_id(line), RpcError(PARSE_ERROR, f"parse error: {exc}"))
    except RecursionError:  # pragma: no cover - _nesting refuses these first; kept as the last guard
        return Invalid(_salvage_id(line), too_deep)
    if isinstance(message, list):
        return _batch(message)
    return _message(message)


def incoming(line: bytes | OverlongLine, refuse: Callable[[bytes], object]) -> Incoming | None:
    """One line as a peer that answers requests reads it (``serve``'s agent, the proxy facing its client): the
    message to handle, or None when there is nothing more to do - a blank line, a batch of notifications, or a
    refusal, which is handed to ``refuse`` to be written back in the line's place (an invalid message's error, a
    batch's array of errors)."""
    if isinstance(line, bytes) and not line.strip():
        return None
    message = parse(line)
    if isinstance(message, list):
        if message:
            refuse(encode_batch(message))
        return None
    if isinstance(message, Invalid):
        refuse(encode_error(message.id, message.error))
        return None
    return message


def _message(message: Any) -> Incoming | Invalid:
    if not isinstance(message, dict):
        return _invalid(None, f"a message must be a JSON object, not {json_type(message)}")
    has_id = "id" in message
    request_id = message.get("id")
    if has_id and not _is_id(request_id):
        return _invalid(None, f"id must be a string, a number or null, not {json_type(request_id)}")
    if message.get("jsonrpc") != "2.0":
        return _invalid(request_id, '"jsonrpc" must be "2.0"')
    if "method" not in message and ("result" in message or "error" in message):
        return Incoming(None, None, request_id, has_id, is_response=True)
    method = message.get("method")
    if "method" not in message:
        return _invalid(request_id, "method is missing")
    if not isinstance(method, str) or not method:
        kind = "an empty string" if method == "" else json_type(method)
        return _invalid(request_id, f"method must be a non-empty string, not {kind}")
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        return _invalid(request_id, f"params must be an object or an array, not {json_type(params)}")
    return Incoming(method, params, request_id, has_id)


def _batch(messages: list[Any]) -> Invalid | list[Invalid]:
    if not messages:
        return _invalid(None, "an empty batch")
    answers: list[Invalid] = []
    for item in messages:
        parsed = _message(item)
        if isinstance(parsed, Invalid):
            answers.append(parsed)
        elif parsed.has_id and not parsed.is_response:
            answers.append(_invalid(parsed.id, "batches are not supported: send one message per line"))
    return answers


def _invalid(request_id: RequestId, reason: str) -> Invalid:
    return Invalid(request_id, RpcError(INVALID_REQUEST, f"invalid request: {reason}"))


def _is_id(value: object) -> bool:
    return value is None or (isinstance(value, int | float | str) and not isinstance(value, bool))


# -- limits and ids without decoding -------------------------------------------------------------------


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes


def _nesting(line: bytes) -> int:
    """How deep arrays and objects nest in ``line``, counted without recursing (strings are skipped)."""
    if line.count(b"[") + line.count(b"{") <= MAX_MESSAGE_DEPTH:
        return 0  # cannot nest deeper than it has brackets: the common case, decided at C speed
    brackets = _STRING.sub(b"", line).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(array.array("b", brackets.translate(_STEPS))), default=0)


_TOKEN = re.compile(
    rb'[ \t\r\n]*(?:("(?:[^"\\]|\\.)*")|([\[\]{}:,])'  # a string, or a structural character,
    rb"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null))",  # or a scalar
    re.S,
)


def _salvage_id(data: bytes) -> RequestId:
    """The ``id`` member of a top-level object in a line that does not decode (None when there is none to read).

    Scans tokens of the first ``_HEAD`` bytes, keeping track of depth only, and stops at the first byte that is
    not JSON: enough for ``{"jsonrpc": "2.0", "id": 7, "method": ..., "params": <anything>``.
    """
    end = min(len(data), _HEAD)
    depth, state, key, pos = 0, "start", b"", 0
    while pos < end:
        match = _TOKEN.match(data, pos, end)
        if match is None:
            return None
        pos = match.end()
        string, mark, scalar = match.groups()
        if depth > 1:  # inside a member's value: only its end matters
            if mark in (b"[", b"{"):
                depth += 1
            elif mark in (b"]", b"}"):
                depth -= 1
                state = "comma"
        elif state == "start" and mark == b"{":
            depth, state = 1, "key"
        elif state == "key" and string is not None:
            key, state = string, "colon"
        elif state == "colon" and mark == b":":
            state = "value"
        elif state == "value" and (string is not None or scalar is not None):
            if _decodes_to(key, "id"):
                value = _decode_or(string or scalar, _UNREADABLE)
                return value if _is_id(value) else None
            state = "comma"
        elif state == "value" and mark in (b"[", b"{"):
            depth = 2
        elif state == "comma" and mark == b",":
            state = "key"
        else:
            return None
    return None


_UNREADABLE: Final = object()


def _decodes_to(token: bytes, text: str) -> bool:
    return token == f'"{text}"'.encode() or (b"\\" in token and _decode_or(token, None) == text)


def _decode_or(token: bytes, default: Any) -> Any:
    try:
        return _decoder.decode(token)
    except msgspec.DecodeError:
        return default


# -- writing ----------------------------------------------------------------------------------------------


def encode_result(request_id: RequestId, result: Any) -> bytes:
    return _encoder.encode(_Response(request_id, result))


def encode_error(request_id: RequestId, error: RpcError) -> bytes:
    return _encoder.encode(_ErrorResponse(request_id, error))


def encode_batch(answers: list[Invalid]) -> bytes:
    """The array of error responses that answers a refused batch."""
    return _encoder.encode([_ErrorResponse(answer.id, answer.error) for answer in answers])


def encode_notification(method: str, params: Any) -> bytes:
    return _encoder.encode(_Notification(method, params))
