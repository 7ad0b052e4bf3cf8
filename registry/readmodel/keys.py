"""How a read model's rows are sealed (``Seal``: each row's state blob is its keyed MAC, then the state), opened
and checked against their key columns (``checked_states``), and the key they are sealed with as one process holds
it (``HeldKey``; the key is the backend's: ``Backend.seal_key``).

A process reads the key once. Where the store keeps it in a file of its own (SQLite's ``<file>.seal-key``) that
file may be lost while the process serves: the next process to open the store makes a new key and rebuilds the
tables with it. A process that holds the old key then finds tables sealed with another one - and must take the new
key up rather than rebuild the tables back with its own, or two processes would rebuild the whole read model in
turn at each of their writes. So a fold writes rows only into tables sealed with the key it holds (``check``), a
fault of the seal first asks whether the key the store keeps now opens them (``adopt``), and a rebuild seals with
the key the store keeps now (``take_up``), never with one that was lost.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from typing import Final

import msgspec

from events.errors import StoreError
from registry.backend import Backend
from registry.errors import ReadModelFault
from registry.model import SessionState, sort_key
from registry.model import rank as rank_of

__all__ = ["PLACE", "SEAL", "HeldKey", "Keyed", "Seal", "checked_row", "checked_states"]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(SessionState)
_encode = _encoder.encode
_decode = _decoder.decode
SEAL: Final = 8
"""Bytes sealing each row's state blob: its keyed BLAKE2b-64, then the msgpack of the state."""
PLACE: Final = 8
"""The position's bytes at a blob's end: a big-endian int64 after msgpack's int64 mark (``_INT64``)."""
_INT64: Final = b"\xd3"
_OUTSIDE: Final = 1 + PLACE  # the blob's bytes the seal does not cover: the position, its mark and value
_SHORTEST: Final = SEAL + _OUTSIDE  # a blob no longer than this holds no state
_place = struct.Struct(">cq").pack
_NOT_SEALED: Final = "a session's state in the read model does not match its seal (edited or damaged)"
_OPENED: Final = 4096
"""Opened blobs whose states a ``Seal`` keeps (a few pages' worth; about 2 MB)."""


Keyed = tuple[int, str, bytes]
"""A page row: rank, session id, encoded state."""


class Seal:
    """Each row's state blob is its seal - a BLAKE2b MAC keyed with a secret the store keeps apart from the tables
    (``Backend.seal_key``) - then the msgpack of the state, which ends with the state's position (its last field, as
    msgpack's int64: its mark, then 8 bytes). The seal covers every byte before the position, so the blob of a state
    whose position only the server knows is sealed without it (``unplaced``) and the server appends its value
    (``int8send``, in the append's own statement): a blob edited or damaged - its seal recomputed too, without the
    key - is found when it is read, never served; the position is the row's ``valid_from``, which the pages trust as
    they did, and ``verify`` compares with the fold. ``key_id`` names the key in ``rm_meta`` (tables sealed with
    another key are rebuilt at open).

    The states of the blobs opened last are kept by the blob's bytes, seal included (``_OPENED`` of them): the very
    bytes checked once are not checked, nor decoded, again - a page read again (a client polling the first page)
    costs a dict look-up a state, less than the unkeyed CRC-32 and the decode did. So are the page rows checked
    last (``checked_rows``, by the row: rank, session id and blob), once their key columns matched their state.
    """

    def __init__(self, key: bytes) -> None:
        self._mac = hashlib.blake2b(key=key, digest_size=SEAL, person=b"acp-rm-seal")  # copied per blob: keyed once
        self.key_id = int.from_bytes(hashlib.blake2b(key, digest_size=8, person=b"acp-rm-key-id").digest(), "big") >> 1
        self._opened: dict[object, SessionState] = {}
        self.checked_rows: dict[Keyed, SessionState] = {}
        """Kept by ``checked_states``."""

    def seal(self, state: SessionState) -> bytes:
        """A row's state blob."""
        position = state.position
        head = _encode(state)[: -_int_size(position)]  # the state's encoding but its last field, the position
        mac = self._mac.copy()
        mac.update(head)
        return b"".join((mac.digest(), head, _place(_INT64, position)))  # the position as msgpack's int64

    def unplaced(self, state: SessionState) -> bytes:
        """A row's state blob but its last ``PLACE`` bytes, the position's value (``state.position`` is not in it)."""
        head = _encode(state)[: -_int_size(state.position)]
        mac = self._mac.copy()
        mac.update(head)
        return b"".join((mac.digest(), head, _INT64))

    def open_at(self, blob: bytes, valid_from: int) -> SessionState:
        """``open``, for a row read with its ``valid_from``: where a state is read to decide what to append (a
        command's state, a fork's source) or to fold, its position - outside the seal - must be the row's."""
        state = self.open(blob)
        if state.position != valid_from:
            raise ReadModelFault(
                f"the read model's row of {state.session_id!r} does not match its state (edited or damaged)"
            )
        return state

    def _checked(self, blob: object) -> memoryview:
        if not isinstance(blob, bytes):  # a column edited into text or a number
            raise ReadModelFault(f"a session's state in the read model is a {type(blob).__name__}, not a blob")
        view = memoryview(blob)
        mac = self._mac.copy()
        mac.update(view[SEAL:-_OUTSIDE])
        if len(blob) <= _SHORTEST or mac.digest() != blob[:SEAL]:
            raise ReadModelFault(_NOT_SEALED)
        return view[SEAL:]

    def unsealed(self, blob: bytes) -> bytes:
        """The msgpack of the state in a row's blob (what a kept snapshot holds), once its seal is checked."""
        return bytes(self._checked(blob))

    def open(self, blob: bytes) -> SessionState:
        """A row's state; one whose seal does not match or that does not decode is a ``ReadModelFault`` (never the
        log's problem)."""
        opened = self._opened
        state = opened.get(blob)
        if state is not None:
            return state
        if type(blob) is not bytes or len(blob) <= _SHORTEST:
            self._checked(blob)  # raises, saying why
        view = memoryview(blob)  # ``_checked`` inlined: this is every page's inner loop
        mac = self._mac.copy()
        mac.update(view[SEAL:-_OUTSIDE])
        if mac.digest() != blob[:SEAL]:
            raise ReadModelFault(_NOT_SEALED)
        try:
            state = _decode(view[SEAL:])
        except msgspec.DecodeError as exc:  # ValidationError included
            raise ReadModelFault(f"a session's state in the read model does not decode ({exc})") from None
        if len(opened) >= _OPENED:
            opened.clear()  # a walk past the first pages: start again (dropping the oldest one by one costs more)
        opened[blob] = state
        return state


def _int_size(value: int) -> int:
    """The bytes of msgpack's shortest form of a non-negative integer (msgspec's): where a state's encoding ends."""
    if value < 0:
        raise ValueError(f"a log position is never negative ({value})")
    return 1 if value < 0x80 else 2 if value < 0x100 else 3 if value < 0x10000 else 5 if value < 0x1_0000_0000 else 9


def checked_row(state: SessionState, rank: int, session_id: str) -> SessionState:
    """``state`` if a row's key columns are its own (a row edited apart from its state is a ``ReadModelFault``)."""
    if state.session_id != session_id or sort_key(state)[0] != rank:
        raise ReadModelFault(f"the read model's row of {session_id!r} does not match its state (edited or damaged)")
    return state


def checked_states(rows: Iterable[Keyed], seal: Seal) -> list[SessionState]:
    """The states of page rows, each opened by ``seal`` and checked against its row's key columns (``checked_row``
    names the fault); a row checked before - the very same rank, session id and blob - is one look-up."""
    states = []
    checked = seal.checked_rows
    for row in rows:  # every page's inner loop
        state = checked.get(row)
        if state is None:
            rank, session_id, blob = row
            state = seal.open(blob)
            if state.session_id != session_id or rank_of(state.updated_at) != rank:
                checked_row(state, rank, session_id)  # raises
            if len(checked) >= _OPENED:
                checked.clear()
            checked[row] = state
        states.append(state)
    return states


class HeldKey:
    """The ``Seal`` a read model seals and opens rows with, following the key its backend keeps."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.seal = Seal(backend.seal_key())

    def take_up(self) -> None:
        """Seal with the key the store keeps now (the key file read again; a lost one this process holds is put
        back)."""
        key = self._backend.current_seal_key()
        if Seal(key).key_id != self.seal.key_id:
            self.seal = Seal(key)

    def check(self, sealed: object) -> None:
        """Rows are folded only into tables sealed (``sealed``: their key's id, as ``rm_meta`` holds it) with the key
        held: another key is taken up when the store keeps it now, else a ``ReadModelFault`` (they are rebuilt)."""
        if type(sealed) is not int or sealed == self.seal.key_id:
            return
        try:
            self.take_up()
        except StoreError as exc:  # a key file refused now: the append commits, the tables wait
            raise ReadModelFault(str(exc)) from None
        if sealed != self.seal.key_id:
            raise ReadModelFault("its rows are sealed with another key (the store's seal key was replaced or lost)")

    def adopt(self, sealed: object) -> bool:
        """Whether tables sealed with ``sealed``, which is not the key held, are sealed with the key the store keeps
        now (then it is held from now on, and they serve as they are)."""
        if type(sealed) is not int or sealed == self.seal.key_id:
            return False
        try:
            self.take_up()
        except StoreError:
            return False  # a key file refused now: the rebuild says so
        return sealed == self.seal.key_id
