"""Search cursors: opaque, signed, bound to the store, to the query and to every filter of the search.

A page of hits after the first is the same search as of the same log position (messages kept later are not
matched), skipping the hits already returned. Layout before base64url (no padding)::

    version (1 byte) | body (msgpack array) | HMAC-SHA256(key, all before)[:16]

The key is derived from the store's secret for this use only, so a ``session/list`` cursor is never taken for a
search cursor or the reverse. Every way a cursor can be wrong raises ``InvalidCursor`` with a reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final

import msgspec

from events.store import StoreIdentity
from registry.errors import InvalidCursor

__all__ = ["SearchCursor", "SearchCursors"]

_VERSION: Final = 1
_MAC: Final = 16


class SearchCursor(msgspec.Struct, frozen=True):
    """Where a walk of hits is: the log position it searches as of, and how many hits it has returned."""

    position: int
    offset: int


class _Body(msgspec.Struct, array_like=True, frozen=True):
    store: bytes
    search: bytes
    position: int
    offset: int


class SearchCursors:
    """Encodes and checks the cursors of one store's searches."""

    def __init__(self, identity: StoreIdentity) -> None:
        key = hashlib.blake2b(identity.secret, digest_size=32, person=b"acp-search-curs").digest()
        self._mac = hmac.new(key, digestmod=hashlib.sha256)
        self._store = hashlib.blake2b(identity.store_id.encode(), digest_size=8).digest()
        self._decoder = msgspec.msgpack.Decoder(_Body)

    @staticmethod
    def bound_to(*parts: object) -> bytes:
        """A fingerprint of a search: its query and filters, as one value a cursor must carry again."""
        return hashlib.blake2b(msgspec.msgpack.encode(parts), digest_size=12).digest()

    def _sign(self, data: bytes) -> bytes:
        mac = self._mac.copy()
        mac.update(data)
        return mac.digest()[:_MAC]

    def encode(self, cursor: SearchCursor, search: bytes) -> str:
        data = bytes([_VERSION]) + msgspec.msgpack.encode(_Body(self._store, search, cursor.position, cursor.offset))
        return base64.urlsafe_b64encode(data + self._sign(data)).rstrip(b"=").decode()

    def decode(self, token: object, search: bytes) -> SearchCursor:
        if not isinstance(token, str) or not token or len(token) > 512:
            raise InvalidCursor("shape", "a search cursor is a short string that a previous page of hits gave")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise InvalidCursor("encoding", "the cursor is not one this registry made") from None
        if len(raw) < 1 + _MAC or raw[0] != _VERSION:
            raise InvalidCursor("version", "the cursor is not a search cursor of this version")
        data, mac = raw[:-_MAC], raw[-_MAC:]
        if not hmac.compare_digest(self._sign(data), mac):
            raise InvalidCursor("signature", "the cursor was changed, or made by another store or for a list")
        try:
            body = self._decoder.decode(data[1:])
        except msgspec.DecodeError:
            raise InvalidCursor("body", "the cursor's body does not decode") from None
        if body.store != self._store:
            raise InvalidCursor("store", "the cursor belongs to another store")
        if body.search != search:
            raise InvalidCursor("query", "the cursor belongs to another query or other filters; start again")
        if body.position < 0 or body.offset < 0:
            raise InvalidCursor("body", "the cursor holds a negative position or offset")
        return SearchCursor(body.position, body.offset)
