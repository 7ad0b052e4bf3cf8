"""Every size limit the registry enforces, in one place, with why it is what it is.

A write that breaks a limit is refused whole (``InvalidParams``, a ``ValueError``; -32602 on the wire) and
writes nothing; nothing is ever truncated silently. The same limits hold at every way in: ``SessionRegistry``,
``acp-registry serve``, ``acp-registry import`` and the importers.
"""

from __future__ import annotations

from typing import Final

from events.model import MAX_SESSION_ID_BYTES as _MAX_SESSION_ID_BYTES

__all__ = [
    "MAX_CAPTURE_BYTES",
    "MAX_DIRECTORIES",
    "MAX_MESSAGE_BYTES",
    "MAX_MESSAGE_DEPTH",
    "MAX_META_BYTES",
    "MAX_META_DEPTH",
    "MAX_PAGE_SIZE",
    "MAX_PATH_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_QUERY_BYTES",
    "MAX_QUERY_TERMS",
    "MAX_SEARCH_HITS",
    "MAX_SESSION_ID_BYTES",
    "MAX_STORED_MESSAGE_BYTES",
    "MAX_TIME_NS",
    "MAX_TITLE_LENGTH",
    "MAX_TOOL_OUTPUT_BYTES",
    "MAX_TURN_MESSAGES",
    "MIN_TIME_NS",
]

MAX_TITLE_LENGTH: Final = 500
"""Characters in a title: the ACP RFD's suggestion."""

MAX_PAGE_SIZE: Final = 1000
"""Sessions in one ``session/list`` page (the default page holds 50)."""

# UTF-8 bytes in a session id: room for any agent's id with its ``<agent>:`` prefix. The store enforces it on
# every append, so it lives with the log (``events.model``).
MAX_SESSION_ID_BYTES: Final = _MAX_SESSION_ID_BYTES

MAX_PATH_BYTES: Final = 4095
"""UTF-8 bytes in a ``cwd`` or an additional directory: Linux's ``PATH_MAX`` (4096) less its NUL."""

MAX_DIRECTORIES: Final = 64
"""Entries in ``additionalDirectories``."""

MAX_META_BYTES: Final = 64 * 1024
"""A session's own ``_meta`` object, encoded as JSON: metadata, not a place for transcripts."""

MAX_META_DEPTH: Final = 32
"""Nesting of arrays and objects inside ``_meta``."""

MAX_PAYLOAD_BYTES: Final = 4 * 1024 * 1024
"""The opaque payload of one activity event (the reference agent keeps a turn there), encoded as msgpack."""

MAX_MESSAGE_BYTES: Final = 8 * 1024 * 1024
"""One JSON-RPC line read by ``acp-registry serve``, without its newline: room for a turn at the payload limit."""

MAX_STORED_MESSAGE_BYTES: Final = 1024 * 1024
"""UTF-8 bytes kept of one message of a conversation: longer text is cut there, with a line saying how much more
there was (``registry.conversation.cut``). Unlike the limits above, this one cuts rather than refuses: a
conversation is kept whatever an agent said."""

MAX_TOOL_OUTPUT_BYTES: Final = 64 * 1024
"""UTF-8 bytes kept of one tool call's text (its title, kind, status and output): tool output can be a whole file
or a build log, and what is kept of it is for finding the session, not for replaying the tool."""

MAX_CAPTURE_BYTES: Final = 32 * 1024 * 1024
"""Text a proxy holds in memory for messages not yet written (the store locked, or slow): beyond it, the oldest
pending text is dropped and counted, never the relay's own work. With the recorder's own queue
(``registry.proxy.recorder.MAX_BACKLOG_BYTES``) it is all a proxy keeps waiting for its store."""

MAX_TURN_MESSAGES: Final = 10_000
"""Messages a proxy keeps of one turn (each tool call is one): far beyond a real turn's, and what bounds the
write of a turn whose agent alternates chunk kinds to make every chunk a message; beyond it, the turn's last
message says how many more were left out."""

MAX_QUERY_BYTES: Final = 1024
"""UTF-8 bytes in a search query: enough for any phrase a person types or pastes from an error line."""

MAX_QUERY_TERMS: Final = 32
"""Words, phrases and prefixes in one search query (each is one more index look-up)."""

MAX_SEARCH_HITS: Final = 200
"""Sessions in one page of search hits (``--limit``; a ``session/list`` page of hits holds the page size)."""

MAX_MESSAGE_DEPTH: Final = 64
"""Nesting of arrays and objects in one JSON-RPC message (a ``_meta`` at its own limit fits inside params)."""

MIN_TIME_NS: Final = 0
"""Earliest time the registry stores (epoch ns): 1970-01-01T00:00:00Z."""

MAX_TIME_NS: Final = (1 << 63) - 1
"""Latest time the registry stores: 2262-04-11T23:47:16.854Z, the last epoch-ns time a signed 64-bit integer (a
SQLite or PostgreSQL ``bigint``) holds."""
