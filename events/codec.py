"""Encoders and decoders, built once: msgpack for storage, JSON (one record per line) for interchange."""

from __future__ import annotations

import os
import time
import uuid

import msgspec

from events.errors import CorruptEventError
from events.model import Event, RecordedEvent

__all__ = [
    "decode_event",
    "decode_record_json",
    "encode_event",
    "encode_record_json",
    "new_event_id",
    "now_ns",
]

_event_encoder = msgspec.msgpack.Encoder()
_event_decoder = msgspec.msgpack.Decoder(Event)
_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder(RecordedEvent)


def encode_event(event: Event) -> bytes:
    """The storage form of one event (msgpack map, tagged)."""
    return _event_encoder.encode(event)


def decode_event(data: bytes, position: int, session_id: str | None = None, version: int | None = None) -> Event:
    """Decode a stored event; bad bytes raise ``CorruptEventError`` naming the position."""
    try:
        return _event_decoder.decode(data)
    except (msgspec.DecodeError, TypeError) as exc:
        raise CorruptEventError(position, str(exc), session_id, version) from exc


def encode_record_json(record: RecordedEvent) -> bytes:
    """One line of the portable interchange form (no trailing newline)."""
    return _json_encoder.encode(record)


def decode_record_json(line: bytes | str) -> RecordedEvent:
    """Parse one interchange line; raises ``msgspec.ValidationError``/``DecodeError`` with the path."""
    return _json_decoder.decode(line)


def now_ns() -> int:
    """The default clock: wall time in epoch nanoseconds."""
    return time.time_ns()


def new_event_id() -> uuid.UUID:
    """A time-ordered UUID (version 7): ids of new events land at the end of the store's unique index.

    Random (v4) keys scatter inserts over the whole index and cap large logs' append rate.
    """
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | rand
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return uuid.UUID(int=value)
