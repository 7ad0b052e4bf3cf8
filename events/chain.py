"""The log's integrity chain: each record carries a link that hashes the record with the link before it.

A link covers every stored column of a record - position, session, version, event id, recorded time and the
event's stored bytes - so ``verify`` recomputing it finds a changed record at its own position, a removed or
reordered one at the position where the chain breaks. A snapshot (or anything else derived from the log) can bind
itself to the log it reflects by keeping ``store.chain_at(position)``.

Two link functions, one per store format (``ChainRule`` says which applies where):

- ``link`` (BLAKE2b-128 over the msgpack of the record's columns): the SQLite and in-memory stores, and the records
  a PostgreSQL store wrote before its format 3;
- ``sql_link`` (SHA-256 truncated to 128 bits over the columns laid out at fixed widths, the session id length-
  prefixed and the data last): a function PostgreSQL computes itself (``events.postgres_sql.LINK``), so an append
  whose client does not know the log's end still goes in one exchange; a PostgreSQL store of format 3 links every
  record from the position where it was upgraded (older records keep their links, so what was bound to them holds).

What it does not do: the chain is not keyed (the store's secret lives in the same file), so someone who edits a
record *and* recomputes every link after it up to the head is not caught by the log alone; a value kept
elsewhere (a snapshot's binding, a copy of the head's link) catches that. Removing records at the very end of
the log leaves a shorter valid chain; the session versions in ``streams`` still show it (``verify`` checks them).
128 bits: a forger must match a given link (a second preimage, 2^128 work), so 16 bytes a record suffice.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from typing import Final

import msgspec

__all__ = ["GENESIS", "LINK_SIZE", "ChainRule", "StoredRecord", "link", "links", "sql_link"]

LINK_SIZE: Final = 16
GENESIS: Final = bytes(LINK_SIZE)
"""The link "before" the first record: what ``chain_at(0)`` returns."""

_encode = msgspec.msgpack.Encoder().encode
# position (int8), version (int4), event id (16 bytes), recorded time (int8), the session id's length in bytes
# (int4), all big-endian as PostgreSQL's int8send/int4send/uuid_send write them; then the session id, then the data.
_fixed = struct.Struct(">qi16sqi").pack


class StoredRecord(msgspec.Struct, frozen=True, gc=False):
    """A record as stored, bytes and all, with its link (None in a version-1 store that was not upgraded)."""

    position: int
    session_id: str
    version: int
    event_id: bytes
    recorded_at: int
    data: bytes
    chain: bytes | None


def link(previous: bytes, position: int, session_id: str, version: int, event_id: bytes, at: int, data: bytes) -> bytes:
    """The BLAKE2b link of one record, given the link of the record before it (``GENESIS`` for the first)."""
    body = _encode((position, session_id, version, event_id, at, data))  # msgpack: unambiguous field boundaries
    return hashlib.blake2b(previous + body, digest_size=LINK_SIZE).digest()


def sql_link(
    previous: bytes, position: int, session_id: str, version: int, event_id: bytes, at: int, data: bytes
) -> bytes:
    """The SHA-256 link of one record, as PostgreSQL computes it (``events.postgres_sql.LINK``)."""
    sid = session_id.encode()
    return hashlib.sha256(previous + _fixed(position, version, event_id, at, len(sid)) + sid + data).digest()[
        :LINK_SIZE
    ]


class ChainRule(msgspec.Struct, frozen=True):
    """Which link function made the link at each position: ``sql_link`` from ``sql_from`` on (None: never)."""

    sql_from: int | None = None

    def link(
        self, previous: bytes, position: int, session_id: str, version: int, event_id: bytes, at: int, data: bytes
    ) -> bytes:
        made = link if self.sql_from is None or position < self.sql_from else sql_link
        return made(previous, position, session_id, version, event_id, at, data)

    def links(self, previous: bytes, rows: Iterable[tuple[int, str, int, bytes, int, bytes]]) -> list[bytes]:
        """The links of consecutive records (position, session, version, event id bytes, recorded time, data)."""
        out = []
        for row in rows:
            previous = self.link(previous, *row)
            out.append(previous)
        return out


_BLAKE2B: Final = ChainRule()


def links(previous: bytes, rows: Iterable[tuple[int, str, int, bytes, int, bytes]]) -> list[bytes]:
    """The BLAKE2b links of consecutive records (the SQLite and in-memory stores' rule)."""
    return _BLAKE2B.links(previous, rows)
