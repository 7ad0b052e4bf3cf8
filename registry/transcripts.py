"""A session's conversation read back: its kept messages in order, as the library, the CLI and ACP show them."""

from __future__ import annotations

import msgspec

from events.content import KeptMessage
from events.store import EventStore
from registry import forks
from registry.model import format_time

__all__ = ["Transcript", "TranscriptLine", "transcript"]


class TranscriptLine(msgspec.Struct, frozen=True):
    """One message as ``acp-registry transcript --json`` prints it: ``role`` (user, agent, thought, tool, plan), its
    ``text`` and ``at`` (RFC 3339, or None where the source has no time)."""

    role: str
    text: str
    at: str | None


class Transcript(msgspec.Struct, frozen=True):
    """A session's conversation: its id and its messages in order, each with the position of the event that keeps
    it (``KeptMessage``: a turn's messages share one)."""

    session_id: str
    messages: list[KeptMessage]

    def lines(self) -> list[TranscriptLine]:
        """The messages as the wire and the CLI show them."""
        return [
            TranscriptLine(
                m.message.role.value, m.message.text, None if m.message.at is None else format_time(m.message.at)
            )
            for m in self.messages
        ]


def transcript(store: EventStore, session_id: str) -> Transcript:
    """The messages kept for ``session_id`` (a fork's starting with its source's up to the fork)."""
    return Transcript(session_id, forks.messages(store, session_id))
