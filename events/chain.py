"""The log's integrity chain: each record carries a link that hashes the record with the link before it.

``link(previous, ...)`` covers every stored column of a record - position, session, version, event id, recorded
time and the event's stored bytes - so ``verify`` recomputing it finds a changed record at its own position, a
removed or reordered one at the position where the chain breaks. A snapshot (or anything else derived from the
log) can bind itself to the log it reflects by keeping ``store.chain_at(position)``.

What it does not do: the chain is not keyed (the store's secret lives in the same file), so someone who edits a
record *and* recomputes every link after it up to the head is not caught by the log alone; a value kept
elsewhere (a snapshot's binding, a copy of the head's link) catches that. Removing records at the very end of
the log leaves a shorter valid chain; the session versions in ``streams`` still show it (``verify`` checks them).
BLAKE2b-128: a forger must match a given link (a second preimage, 2^128 work), so 16 bytes a record suffice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final, NamedTuple

import msgspec

__all__ = ["GENESIS", "LINK_SIZE", "StoredRecord", "link", "links"]

LINK_SIZE: Final = 16
GENESIS: Final = bytes(LINK_SIZE)
"""The link "before" the first record: what ``chain_at(0)`` returns."""

_encode = msgspec.msgpack.Encoder().encode


class StoredRecord(NamedTuple):
    """A record as stored, bytes and all, with its link (None in a version-1 store that was not upgraded)."""

    position: int
    session_id: str
    version: int
    event_id: bytes
    recorded_at: int
    data: bytes
    chain: bytes | None


def link(previous: bytes, position: int, session_id: str, version: int, event_id: bytes, at: int, data: bytes) -> bytes:
    """The link of one record, given the link of the record before it (``GENESIS`` for the first)."""
    body = _encode((position, session_id, version, event_id, at, data))  # msgpack: unambiguous field boundaries
    return hashlib.blake2b(previous + body, digest_size=LINK_SIZE).digest()


def links(previous: bytes, rows: Iterable[tuple[int, str, int, bytes, int, bytes]]) -> list[bytes]:
    """The links of consecutive records (position, session, version, event id bytes, recorded time, data)."""
    out = []
    for row in rows:
        previous = link(previous, *row)
        out.append(previous)
    return out
