"""What a pass of the importer did: per agent, sessions added, changed, removed (their files gone from the agent:
kept, marked sourceGone) and unchanged, what was skipped and why, and what was read."""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["AgentSummary", "SkipGroup", "Summary"]

_EXAMPLES: Final = 5


class SkipGroup(msgspec.Struct, kw_only=True, rename="camel"):
    reason: str
    count: int = 0
    examples: list[str] = msgspec.field(default_factory=list)


class AgentSummary(msgspec.Struct, kw_only=True, rename="camel"):
    """What one pass did for one agent. ``unavailable`` says why the agent was not read at all."""

    agent: str
    root: str
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[SkipGroup] = msgspec.field(default_factory=list)
    files_read: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    unavailable: str | None = None

    def skip(self, item: str, reason: str, count: int = 1) -> None:
        for group in self.skipped:
            if group.reason == reason:
                break
        else:
            group = SkipGroup(reason=reason)
            self.skipped.append(group)
        group.count += count
        if len(group.examples) < _EXAMPLES:
            group.examples.append(item)

    @property
    def skipped_count(self) -> int:
        return sum(group.count for group in self.skipped)


class Summary(msgspec.Struct, kw_only=True, rename="camel"):
    agents: list[AgentSummary] = msgspec.field(default_factory=list)

    @property
    def touched(self) -> int:
        """Sessions added, changed or removed."""
        return sum(a.added + a.changed + a.removed for a in self.agents)
