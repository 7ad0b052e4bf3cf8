"""Encoders and decoders, built once: msgpack for storage, JSON (one record per line) for interchange.

The decoders are built when first used: building one reads the annotations of every event kind (a large part of
what ``acp-registry list`` spent importing this package: docs/benchmarks.md), and a read of the read model decodes no
event.
"""

from __future__ import annotations

import functools
import itertools
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
    "event_decoder",
    "new_event_id",
    "now_ns",
]

_event_encoder = msgspec.msgpack.Encoder()
_json_encoder = msgspec.json.Encoder()


@functools.cache
def event_decoder() -> msgspec.msgpack.Decoder[Event]:
    """The one decoder of stored events (its ``decode`` bound once a batch by the stores' read loops)."""
    return msgspec.msgpack.Decoder(Event)


@functools.cache
def _json_decoder() -> msgspec.json.Decoder[RecordedEvent]:
    return msgspec.json.Decoder(RecordedEvent)


def encode_event(event: Event) -> bytes:
    """The storage form of one event (msgpack map, tagged)."""
    return _event_encoder.encode(event)


def decode_event(data: bytes, position: int, session_id: str | None = None, version: int | None = None) -> Event:
    """Decode a stored event; bad bytes raise ``CorruptEventError`` naming the position."""
    try:
        return event_decoder().decode(data)
    except (msgspec.DecodeError, TypeError) as exc:
        raise CorruptEventError(position, str(exc), session_id, version) from exc


def encode_record_json(record: RecordedEvent) -> bytes:
    """One line of the portable interchange form (no trailing newline)."""
    return _json_encoder.encode(record)


def decode_record_json(line: bytes | str) -> RecordedEvent:
    """Parse one interchange line; raises ``msgspec.ValidationError``/``DecodeError`` with the path."""
    return _json_decoder().decode(line)


def now_ns() -> int:
    """The default clock: wall time in epoch nanoseconds."""
    return time.time_ns()


_V7_BITS = 0x7 << 76 | 0x2 << 62  # version 7, RFC 9562 variant
_RAND_74 = (1 << 74) - 1  # rand_a (12 bits, above the version) and rand_b (62 bits, below the variant)
_RAND_62 = (1 << 62) - 1
_uuid_from_msgpack = msgspec.msgpack.Decoder(uuid.UUID).decode
_id_counter: list[itertools.count[int]] = []  # one counter, started at a random seed; a list so forks can swap it


def new_event_id() -> uuid.UUID:
    """A time-ordered UUID (version 7): ids of new events land at the end of the store's unique index.

    Random (v4) keys scatter inserts over the whole index and cap large logs' append rate. The 74 bits
    below the millisecond count on from a random seed per process (RFC 9562, section 6.2): ids never repeat
    within a process (``next`` on a counter is atomic under the GIL, so threads get distinct ids) and
    increase within a millisecond, and other processes start elsewhere. ``os.urandom`` and ``uuid.UUID(int=)``
    per id were most of the cost (docs/benchmarks.md).
    """
    bits = next(_id_counter[0]) & _RAND_74
    value = (time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF) << 80 | _V7_BITS | (bits >> 62) << 64 | (bits & _RAND_62)
    return _uuid_from_msgpack(b"\xc4\x10" + value.to_bytes(16, "big"))  # faster than uuid.UUID(int=...)


def _reseed() -> None:
    """A new seed: at import, and in a forked child, which would otherwise repeat its parent's ids."""
    _id_counter[:] = [itertools.count(int.from_bytes(os.urandom(10), "big"))]


_reseed()
if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_reseed)
