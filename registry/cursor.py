"""Cursors: opaque, versioned, signed, bound to the store and to the filter that produced them.

A cursor holds the log position its walk started at (later pages are served as of that position) and the
sort key of the last session it returned. Layout before base64url (no padding)::

    version (1 byte) | body length (2 bytes, big-endian) | body (msgpack array) | HMAC-SHA256(secret, all before)[:16]

The body is ``store | scope | position | rank | session_id | the other filters' parts``: the store by a fingerprint
of its id (so a cursor from another store is told apart from a tampered one), and each list filter's part
(``registry.filters.Filter.part``) in the order ``FILTERS`` declares them - the first, ``cwd``'s, is the scope,
after the store; the others follow the sort key. A filter added later adds its part at the end, so a cursor made
before it existed still decodes, its part the default (the list without the filter: what that cursor walked). A
cursor replayed with another value of a filter is refused with that filter's name as the reason (``cwd``,
``archived``, ``agent``, ...). Every way a cursor can be wrong raises ``InvalidCursor`` with a reason; none restarts
a walk.

Version 2 (this one) sorts by ``updatedAt`` to the millisecond, as the wire shows it, and carries session ids of
any allowed length; a version-1 cursor is refused with reason ``version`` (its sort key means another order).
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import hmac
import operator
from typing import Any, Final

import msgspec

from events.store import StoreIdentity
from registry.errors import InvalidCursor
from registry.filters import FILTERS, ListFilter, bound

__all__ = ["CURSOR_VERSION", "Cursor", "CursorCodec"]

CURSOR_VERSION: Final = 2
_MAC_BYTES: Final = 16
_HEADER: Final = 3  # version, body length
_MAX_BODY: Final = 0xFFFF


class Cursor(msgspec.Struct, frozen=True):
    """Where a walk is: started at ``position``, last returned sort key ``(rank, session_id)``."""

    position: int
    rank: int
    session_id: str


_SCOPE, *_TAIL = FILTERS
_Body: Final = msgspec.defstruct(
    "_Body",
    [
        ("store", bytes),
        (_SCOPE.name, type(_SCOPE.part_default)),
        ("position", int),
        ("rank", int),
        ("session_id", str),
        *((f.name, type(f.part_default), f.part_default) for f in _TAIL),
    ],
    array_like=True,
    frozen=True,
    omit_defaults=True,
)
"""A cursor's body, laid out from the filters' declarations (the module docstring)."""

_parts_of: Final = operator.attrgetter(*(f.name for f in FILTERS))
_encoder = msgspec.msgpack.Encoder()
# URL-safe base64 (RFC 4648's base64url, as base64.urlsafe_b64encode makes it) through binascii, which this module
# uses anyway: base64's module would be one more for every page's cursor.
_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE: Final = bytes.maketrans(b"-_", b"+/")


@functools.cache
def _decoder() -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(_Body)  # built with the first cursor read, not with the first page


def _fingerprint(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:8]


class CursorCodec:
    """Makes and checks the cursors of one store."""

    def __init__(self, identity: StoreIdentity) -> None:
        self._store = _fingerprint(identity.store_id)
        # HMAC-SHA256 keyed once; each cursor copies the keyed object (hmac.digest sets a keyed MAC up through
        # OpenSSL for every call, which costs more than a copy: docs/benchmarks.md).
        self._keyed = hmac.new(identity.secret, digestmod=hashlib.sha256)

    def _mac(self, data: bytes) -> bytes:
        mac = self._keyed.copy()
        mac.update(data)
        return mac.digest()[:_MAC_BYTES]

    def encode(self, cursor: Cursor, where: ListFilter) -> str:
        """A token for ``cursor``, bound to this store and to the list ``where`` selects."""
        scope, *tail = bound(where).parts
        body = _encoder.encode(_Body(self._store, scope, cursor.position, cursor.rank, cursor.session_id, *tail))
        if len(body) > _MAX_BODY:  # pragma: no cover - session ids are at most 1 KiB
            raise ValueError("a cursor body must fit in 64 KiB")
        data = bytes((CURSOR_VERSION,)) + len(body).to_bytes(2, "big") + body
        return binascii.b2a_base64(data + self._mac(data), newline=False).translate(_URLSAFE).rstrip(b"=").decode()

    def decode(self, token: str, where: ListFilter) -> Cursor:
        """The cursor a token holds, if this store made it for the list ``where`` selects; else ``InvalidCursor``."""
        if len(token) % 4 == 1:  # a character that holds no whole byte: a cut-short token (then "truncated" below)
            token = token[:-1]
        try:
            raw = binascii.a2b_base64(token.encode("ascii").translate(_FROM_URLSAFE) + b"=" * (-len(token) % 4))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise InvalidCursor("garbled", "not a cursor this registry issued (bad characters)") from None
        if not raw:
            raise InvalidCursor("truncated", "the cursor is cut short")
        if raw[0] != CURSOR_VERSION:
            if 0 < raw[0] < 16:  # the shape of a cursor from an earlier or a later version of this library
                raise InvalidCursor(
                    "version", f"cursor version {raw[0]} is not supported (this registry makes {CURSOR_VERSION})"
                )
            raise InvalidCursor("garbled", "not a cursor this registry issued")
        if len(raw) < _HEADER:
            raise InvalidCursor("truncated", "the cursor is cut short")
        size = _HEADER + int.from_bytes(raw[1:_HEADER], "big") + _MAC_BYTES
        if len(raw) < size:
            raise InvalidCursor("truncated", "the cursor is cut short")
        if len(raw) > size:
            raise InvalidCursor("garbled", "the cursor has trailing bytes")
        data, mac = raw[: size - _MAC_BYTES], raw[size - _MAC_BYTES :]
        try:
            body = _decoder().decode(data[_HEADER:])
        except msgspec.DecodeError:
            raise InvalidCursor("garbled", "the cursor's contents do not decode") from None
        if body.store != self._store:
            raise InvalidCursor("foreign", "the cursor was issued by another registry store")
        if not hmac.compare_digest(mac, self._mac(data)):
            raise InvalidCursor("tampered", "the cursor's signature does not match its contents")
        parts = bound(where).parts
        if _parts_of(body) != parts:
            for f, part in zip(FILTERS, parts, strict=True):
                if getattr(body, f.name) != part:
                    raise InvalidCursor(f.name, f"the cursor belongs to a walk with another {f.name} filter")
        return Cursor(body.position, body.rank, body.session_id)
