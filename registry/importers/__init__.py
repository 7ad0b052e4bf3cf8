"""Importing the histories other agents already keep (Claude Code, Codex, Gemini CLI, Kimi CLI, Kimi Code, Qwen
Code, goose, opencode) into the registry: incrementally, idempotently, with honest times and titles that keep
their source.

``Importer(store, sources()).run()`` is one pass; ``acp-registry import-agents`` (``registry.cli.import_agents``)
is the command. Imported sessions are named ``<agent>:<the agent's own id>`` (e.g. ``claude-code:6b1d2c3e-...``).
Each agent is one parser module (``claude_code.py``, ...) that turns its records into ``SessionFacts`` and says
what they hold of the conversation (``said.py``: messages, tool calls, usage), which the importer adds as the
turns a session does not hold yet (``turns.py``); the format notes are in ``docs/agent-histories.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from registry.agents import IMPORTED
from registry.importers.base import Draft, ScanContext, ScanResult, SessionFacts, Skip, Source, session_id
from registry.importers.claude_code import ClaudeCode
from registry.importers.codex import Codex
from registry.importers.gemini import Gemini
from registry.importers.goose import Goose
from registry.importers.importer import AgentSummary, Importer, SkipGroup, Summary
from registry.importers.kimi import Kimi
from registry.importers.kimi_code import KimiCode
from registry.importers.opencode import Opencode
from registry.importers.qwen import Qwen
from registry.importers.state import ImportStateError

__all__ = [
    "AGENTS",
    "AgentSummary",
    "ClaudeCode",
    "Codex",
    "Draft",
    "Gemini",
    "Goose",
    "ImportStateError",
    "Importer",
    "Kimi",
    "KimiCode",
    "Opencode",
    "Qwen",
    "ScanContext",
    "ScanResult",
    "SessionFacts",
    "Skip",
    "SkipGroup",
    "Source",
    "Summary",
    "session_id",
    "sources",
]

_CLASSES: tuple[type[Source], ...] = (ClaudeCode, Codex, Gemini, Kimi, KimiCode, Qwen, Goose, Opencode)
_SOURCES: dict[str, Callable[[], Source]] = {make.agent: make for make in _CLASSES}
AGENTS: tuple[str, ...] = IMPORTED
"""Every supported agent, by the name ``--agent`` takes: the agents ``registry.agents.KNOWN`` says are imported."""
if set(_SOURCES) != set(AGENTS):  # pragma: no cover - a parser module whose agent registry.agents does not declare
    raise ImportError(f"importers for {sorted(_SOURCES)}, but registry.agents declares {sorted(AGENTS)}")


def sources(agents: Iterable[str] | None = None) -> list[Source]:
    """Fresh sources for ``agents`` (default: all), in ``AGENTS`` order; ``ValueError`` names an unknown one."""
    wanted = list(AGENTS) if agents is None else list(dict.fromkeys(agents))
    unknown = [a for a in wanted if a not in _SOURCES]
    if unknown:
        raise ValueError(f"unknown agent {unknown[0]!r}; known: {', '.join(AGENTS)}")
    return [_SOURCES[a]() for a in AGENTS if a in wanted]
