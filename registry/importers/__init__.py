"""Importing the histories other agents already keep (Claude Code, Codex, Gemini CLI, Kimi, Qwen Code, goose,
opencode) into the registry: incrementally, idempotently, with honest times and titles that keep their source.

``Importer(store, sources()).run()`` is one pass; ``registry.importers.command`` is ``acp-registry import-agents``.
Imported sessions are named ``<agent>:<the agent's own id>`` (e.g. ``claude-code:6b1d2c3e-...``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from registry.importers.base import ScanContext, ScanResult, SessionSnapshot, Skip, Source
from registry.importers.claude_code import ClaudeCode
from registry.importers.codex import Codex
from registry.importers.gemini import Gemini
from registry.importers.goose import Goose
from registry.importers.importer import AgentSummary, Importer, SkipGroup, Summary, default_state_path, session_id
from registry.importers.kimi import Kimi
from registry.importers.opencode import Opencode
from registry.importers.qwen import Qwen

__all__ = [
    "AGENTS",
    "AgentSummary",
    "ClaudeCode",
    "Codex",
    "Gemini",
    "Goose",
    "Importer",
    "Kimi",
    "Opencode",
    "Qwen",
    "ScanContext",
    "ScanResult",
    "SessionSnapshot",
    "Skip",
    "SkipGroup",
    "Source",
    "Summary",
    "default_state_path",
    "session_id",
    "sources",
]

_CLASSES: tuple[Callable[[], Source], ...] = (ClaudeCode, Codex, Gemini, Kimi, Qwen, Goose, Opencode)
_SOURCES: dict[str, Callable[[], Source]] = {make().agent: make for make in _CLASSES}
AGENTS: tuple[str, ...] = tuple(_SOURCES)
"""Every supported agent, by the name ``--agent`` takes."""


def sources(agents: Iterable[str] | None = None) -> list[Source]:
    """Fresh sources for ``agents`` (default: all), in ``AGENTS`` order; ``ValueError`` names an unknown one."""
    wanted = list(AGENTS) if agents is None else list(dict.fromkeys(agents))
    unknown = [a for a in wanted if a not in _SOURCES]
    if unknown:
        raise ValueError(f"unknown agent {unknown[0]!r}; known: {', '.join(AGENTS)}")
    return [_SOURCES[a]() for a in AGENTS if a in wanted]
