"""Messages kept beside the log: their digest (what the log records), their stored form, and reading them back.

A conversation's text does not go into the log's records: an event refers to the messages it added by a
``ContentRef`` (how many, and a digest of them), and the store keeps the messages themselves in a table of their
own, written in the append's transaction. The integrity chain covers the reference, so a changed or planted
message is found by ``verify`` (its digest no longer matches), and erasing a conversation (a user's delete) takes
its text off the disk while every link of the chain stays valid.

The digest is BLAKE2b-128 over each message's role, time and text (msgpack, in order), so it does not depend on
how a body is stored: a body is the UTF-8 text, or a zstd frame of it where that is smaller (long text), marked by
its first byte.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from events.model import ContentRef, Event, Message, Role, SessionUpdated

__all__ = [
    "COMPRESS_FROM",
    "MAX_BODY_BYTES",
    "MAX_EVENT_MESSAGES",
    "KeptMessage",
    "StoredMessage",
    "check_messages",
    "content_ref",
    "decode_body",
    "digest",
    "encode_body",
    "kept",
    "prepared_content",
    "stored_messages",
]

COMPRESS_FROM: Final = 512
"""UTF-8 bytes from which a body is offered to zstd (shorter text rarely gets smaller, and costs a frame header)."""
MAX_BODY_BYTES: Final = 8 << 20
"""The most text a stored body may hold (the registry keeps far less per message: ``registry.limits``)."""
MAX_EVENT_MESSAGES: Final = 1 << 20
"""Messages one event may refer to (the stores key a message by its event's position and its place in it)."""

_PLAIN: Final = b"\x00"
_ZSTD: Final = b"\x01"
_PERSON: Final = b"acp-content-1"
_encode = msgspec.msgpack.Encoder().encode
_local = threading.local()


class KeptMessage(msgspec.Struct, frozen=True):
    """A message read back from a store: the position of the event that refers to it, its place there, the
    message, and the session it belongs to."""

    position: int
    seq: int
    message: Message
    session_id: str


class StoredMessage(msgspec.Struct, frozen=True, gc=False):
    """A message as a store keeps it: its place in its event, role, time and encoded body."""

    seq: int
    role: str
    at: int | None
    body: bytes


def digest(messages: Iterable[Message]) -> bytes:
    """The digest a ``ContentRef`` carries for ``messages`` (in their order)."""
    h = hashlib.blake2b(digest_size=16, person=_PERSON)
    for message in messages:
        h.update(_encode((message.role.value, message.at, message.text)))
    return h.digest()


def content_ref(messages: Sequence[Message]) -> ContentRef:
    """The reference an event carries for ``messages``."""
    return ContentRef(len(messages), digest(messages))


def check_messages(messages: object, where: str) -> list[Message]:
    """``messages`` as a list of ``Message`` (``TypeError``/``ValueError`` naming ``where`` otherwise): non-empty,
    at most ``MAX_EVENT_MESSAGES``, text free of NUL and of lone surrogates (it must be UTF-8 on disk)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(f"{where} must be a sequence of Message, not {type(messages).__name__}")
    if not messages:
        raise ValueError(f"{where} is empty: an event with content refers to at least one message")
    if len(messages) > MAX_EVENT_MESSAGES:
        raise ValueError(f"{where} holds {len(messages)} messages; one event refers to at most {MAX_EVENT_MESSAGES}")
    for n, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"{where}[{n}] is a {type(message).__name__}, not a Message")
        if not isinstance(message.role, Role) or not isinstance(message.text, str):
            raise TypeError(f"{where}[{n}] has a role or text of the wrong type")
        if message.at is not None and (isinstance(message.at, bool) or not isinstance(message.at, int)):
            raise TypeError(f"{where}[{n}].at must be epoch ns (int) or None")
        if len(message.text) > MAX_BODY_BYTES:
            raise ValueError(f"{where}[{n}].text is longer than {MAX_BODY_BYTES} characters")
        if "\x00" in message.text:
            raise ValueError(f"{where}[{n}].text holds a NUL character")
        try:
            message.text.encode()
        except UnicodeEncodeError:
            raise ValueError(f"{where}[{n}].text is not valid Unicode (a lone surrogate)") from None
    return list(messages)


def _compressor() -> object:
    compressor = getattr(_local, "compressor", None)
    if compressor is None:
        import zstandard  # noqa: PLC0415 - only a writer of long text needs it

        compressor = _local.compressor = zstandard.ZstdCompressor(level=3)
    return compressor


def encode_body(text: str, *, compress: bool = True) -> bytes:
    """A message's stored body: its UTF-8 text, or a zstd frame of it where that is smaller."""
    raw = text.encode()
    if compress and len(raw) >= COMPRESS_FROM:
        packed: bytes = _compressor().compress(raw)  # type: ignore[attr-defined]
        if len(packed) + 1 < len(raw):
            return _ZSTD + packed
    return _PLAIN + raw


def decode_body(body: bytes) -> str:
    """The text of a stored body (``ValueError`` for a body no writer made)."""
    kind, rest = body[:1], body[1:]
    if kind == _PLAIN:
        return rest.decode()
    if kind == _ZSTD:
        decompressor = getattr(_local, "decompressor", None)
        if decompressor is None:
            import zstandard  # noqa: PLC0415

            decompressor = _local.decompressor = zstandard.ZstdDecompressor()
            _local.frame_size = zstandard.frame_content_size
        size = _local.frame_size(rest)
        if not 0 <= size <= MAX_BODY_BYTES:  # a damaged header must not make us allocate what it claims
            raise ValueError(f"a stored message body claims {size} bytes of text; at most {MAX_BODY_BYTES} are stored")
        return bytes(decompressor.decompress(rest)).decode()
    raise ValueError(f"a stored message body starts with {kind!r}, which no writer makes")


def kept(position: int, session_id: str, stored: StoredMessage) -> KeptMessage:
    """A stored message read back (``ValueError`` for a role or body no writer makes)."""
    return KeptMessage(
        position, stored.seq, Message(role=Role(stored.role), text=decode_body(stored.body), at=stored.at), session_id
    )


def stored_messages(messages: Sequence[Message], *, compress: bool = True) -> list[StoredMessage]:
    """``messages`` as a store keeps them (encoded bodies, numbered from 0)."""
    return [
        StoredMessage(n, m.role.value, m.at, encode_body(m.text, compress=compress)) for n, m in enumerate(messages)
    ]


def prepared_content(
    events: Sequence[Event], content: object, compress: bool, where: str = ""
) -> list[list[StoredMessage] | None] | None:
    """The messages of ``content`` encoded for a backend, each event's checked against its ``ContentRef``; None when
    no event refers to messages. An event with a reference needs its messages and the reverse (``ValueError``)."""
    if content is None:
        for n, event in enumerate(events):
            if isinstance(event, SessionUpdated) and event.content is not None:
                raise ValueError(f"{where}events[{n}] refers to messages, and no content was given for it")
        return None
    if isinstance(content, str | bytes) or not isinstance(content, Sequence):
        raise TypeError(f"{where}content must be a sequence (one entry per event), not {type(content).__name__}")
    if len(content) != len(events):
        raise ValueError(f"{where}content has {len(content)} entries for {len(events)} events")
    kept: list[list[StoredMessage] | None] = []
    for n, (event, messages) in enumerate(zip(events, content, strict=True)):
        ref = event.content if isinstance(event, SessionUpdated) else None
        if messages is None:
            if ref is not None:
                raise ValueError(f"{where}events[{n}] refers to messages, and content[{n}] is None")
            kept.append(None)
            continue
        if ref is not None and isinstance(messages, Sequence) and not isinstance(messages, str) and not messages:
            kept.append([])  # its messages were erased before this copy was made (an import of an export)
            continue
        checked = check_messages(messages, f"{where}content[{n}]")
        if ref is None:
            raise ValueError(f"{where}content[{n}] has messages for an event that does not refer to any")
        if ref != content_ref(checked):
            raise ValueError(f"{where}events[{n}].content does not match content[{n}] (count or digest)")
        kept.append(stored_messages(checked, compress=compress))
    return kept if any(k is not None for k in kept) else None
