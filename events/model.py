"""The session event vocabulary: what can happen to a session, and the envelope a store records it in.

Schema evolution rule (the log is forever, so this is a promise):

* a tag (``type``) never changes meaning and is never reused;
* a new field always gets a default, so every record ever written still decodes;
* a field is never removed or retyped; a changed meaning gets a new field or a new tag.

Times are integers, epoch nanoseconds; they are formatted (RFC 3339) only at the protocol edge.
Tri-state fields use ``msgspec.UNSET`` for "unchanged": test them with ``is UNSET``, never truthiness.
"""

from __future__ import annotations

import enum
import uuid
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "MAX_SESSION_ID_BYTES",
    "ContentRef",
    "Event",
    "ForkRef",
    "LogEntry",
    "Message",
    "RecordedEvent",
    "Role",
    "SessionArchived",
    "SessionCreated",
    "SessionDeleted",
    "SessionInfoChanged",
    "SessionPinned",
    "SessionUnarchived",
    "SessionUpdated",
    "TitleSource",
    "Usage",
    "UserMark",
]


MAX_SESSION_ID_BYTES: Final = 1024
"""UTF-8 bytes in a session id. Ids are also non-empty and free of control characters (NUL included), so any id
fits in a cursor, a PostgreSQL ``text`` and a terminal line."""


class TitleSource(enum.Enum):
    """Where a title came from. A ``USER`` title is never replaced by a generated one."""

    USER = "user"
    AGENT = "agent"
    PROMPT = "prompt"


class ForkRef(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Where a fork came from: the source session and the log position it was taken at. The fork's history is
    the source's up to ``position``, then its own (a reference: nothing of the source is copied)."""

    session_id: str
    position: int


class Role(enum.Enum):
    """Who a message of a conversation is from, or what it is: what the user said, the agent's answer, its
    reasoning, a tool call with its outcome, a plan."""

    USER = "user"
    AGENT = "agent"
    THOUGHT = "thought"
    TOOL = "tool"
    PLAN = "plan"


class Message(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One message of a conversation as it is stored: its ``role``, its ``text`` and when it was said (epoch ns;
    None where the source has no time). Messages are kept beside the log, not in it (``ContentRef``)."""

    role: Role
    text: str
    at: int | None = None


class ContentRef(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The messages an event added, as the log records them: how many, and a digest of them (BLAKE2b-128 over
    ``events.content.digest``'s encoding of each message's role, time and text). The text itself lives beside the
    log, where a user's delete can erase it; the chain covers this digest, so a changed message is detected and an
    erased one leaves the chain intact."""

    count: int
    digest: bytes


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What one turn used, as its source reported it: tokens the turn added, the cost the agent reported for it
    (``cost_nanos`` billionths of ``currency``, an ISO 4217 code such as ``USD``; None: none reported), the model
    that answered, and the context window as the turn left it (``context_used`` of ``context_size`` tokens).
    Totals are folded from these (``registry.usage``), so each figure is what this turn added, never a running
    total.

    The five token counts are disjoint - each token is in one of them, and their sum is the turn's total:
    ``input_tokens`` is the prompt's tokens neither read from nor written to a cache (a source whose input count
    includes its cache reads, such as OpenAI's ``prompt_tokens`` or Gemini's ``promptTokenCount``, has them taken
    out), ``cached_read_tokens`` and ``cached_write_tokens`` the prompt's tokens read from and written to a cache,
    ``output_tokens`` the answer's tokens but the reasoning a source counts apart (``thought_tokens``; a source that
    counts reasoning inside its output, as Anthropic's does, leaves ``thought_tokens`` 0). A price table then
    prices each count once (``registry.prices``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_read_tokens: int = 0
    cached_write_tokens: int = 0
    thought_tokens: int = 0
    cost_nanos: int | None = None
    currency: str | None = None
    model: str | None = None
    context_used: int | None = None
    context_size: int | None = None


class SessionCreated(msgspec.Struct, frozen=True, kw_only=True, tag="created", omit_defaults=True):
    """A session began in ``cwd`` (absolute, canonical) at ``at`` (epoch ns; its first activity).

    ``agent`` names the agent the session belongs to (None: the registry's own, or not recorded); ``parent`` is
    set on a fork (added in the archive/fork vocabulary: older records have neither).
    """

    cwd: str
    at: int
    additional_directories: tuple[str, ...] = ()
    title: str | None = None
    title_source: TitleSource | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
    agent: str | None = None
    parent: ForkRef | None = None


class SessionUpdated(msgspec.Struct, frozen=True, kw_only=True, tag="updated", omit_defaults=True):
    """Activity in a session at ``at``: moves ``updatedAt``.

    ``messages`` is how many messages the activity added to the session's count; ``payload`` is opaque to the
    registry (older reference agents kept a turn there to replay it). ``content`` refers to the messages kept beside
    the log for this activity (their text), ``usage`` is what the turn used (both added with conversations: older
    records have neither).
    """

    at: int
    messages: int = 0
    payload: Any = None
    content: ContentRef | None = None
    usage: Usage | None = None


class SessionInfoChanged(msgspec.Struct, frozen=True, kw_only=True, tag="info_changed", omit_defaults=True):
    """Title, ``updatedAt`` and ``_meta`` changed; each is UNSET (unchanged), None (cleared) or a value.

    ``title_source`` says who produced a set title; a sent ``meta`` replaces the old object whole.
    """

    title: str | UnsetType | None = UNSET
    title_source: TitleSource | UnsetType = UNSET
    updated_at: int | UnsetType | None = UNSET
    meta: dict[str, Any] | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SessionDeleted(msgspec.Struct, frozen=True, kw_only=True, tag="deleted", omit_defaults=True):
    """The session is gone for good: a tombstone. ``reason`` is free text for people (e.g. "source gone")."""

    reason: str | None = None


class UserMark(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An event that sets marks a user's command leaves on a session, and nothing else: each a boolean field of the
    session's state by the same name (``marks``). What follows from that alone - its fold, its import check, its
    words in ``history``, its carry when a proxy takes a session over - is written once for every mark."""

    def marks(self) -> dict[str, bool]:
        """The state's fields it sets, and their values: its own fields (an event without fields says them)."""
        return msgspec.structs.asdict(self)


class SessionArchived(UserMark, frozen=True, kw_only=True, tag="archived", omit_defaults=True):
    """The session is hidden from default lists; its id and history stay (``SessionUnarchived`` undoes it)."""

    def marks(self) -> dict[str, bool]:
        return {"archived": True}


class SessionUnarchived(UserMark, frozen=True, kw_only=True, tag="unarchived", omit_defaults=True):
    """The session is back in default lists."""

    def marks(self) -> dict[str, bool]:
        return {"archived": False}


class SessionPinned(UserMark, frozen=True, kw_only=True, tag="pinned", omit_defaults=True):
    """The user pinned the session (``pinned``), or unpinned it (``pinned=False``): a mark a client can list by."""

    pinned: bool = True


Event = (
    SessionCreated
    | SessionUpdated
    | SessionInfoChanged
    | SessionDeleted
    | SessionArchived
    | SessionUnarchived
    | SessionPinned
)
"""Everything a session's stream can hold (a tagged union; the tag field is ``type``)."""

EVENT_TYPES: tuple[type[Event], ...] = (
    SessionCreated,
    SessionUpdated,
    SessionInfoChanged,
    SessionDeleted,
    SessionArchived,
    SessionUnarchived,
    SessionPinned,
)


class RecordedEvent(msgspec.Struct, frozen=True, rename="camel"):
    """An event as the log holds it.

    ``position`` is global and strictly increasing in commit order (not necessarily contiguous);
    ``version`` counts the session's own events 1, 2, 3... without gaps; ``event_id`` is stored at most once.
    """

    position: int
    session_id: str
    version: int
    event_id: uuid.UUID
    recorded_at: int
    event: Event


class LogEntry(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """What a fold needs of a stored event, without the envelope's id and time: the lean read path
    (``EventStore.scan``) yields these. ``RecordedEvent`` has the same four attributes, so a fold takes either."""

    position: int
    session_id: str
    version: int
    event: Event
