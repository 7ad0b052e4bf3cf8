"""Which registry agent name a proxied agent gets, and how its session ids are stored.

Sessions that came through a proxy or an importer for agent X are stored as ``X:<the agent's own id>``; the wire
in front of X shows the agent's own id. For the agents the importers read, X is the importer's name, so a
session imported from an agent's history files and the same session seen live through the proxy are one
session (one stream in the log). ``agent_name`` maps what an agent says it is (``initialize``'s
``agentInfo.name``, else the command's basename) to that name:

==========================================================================  ===============
agentInfo.name (or command)                                                 stored as
==========================================================================  ===============
``@agentclientprotocol/claude-agent-acp``, ``claude-agent-acp``,            ``claude-code``
``@zed-industries/claude-code-acp``, ``claude-code-acp``, ``claude-code``
``@zed-industries/codex-acp``, ``codex-acp``, ``codex``                     ``codex``
``gemini-cli``, ``@google/gemini-cli``, ``gemini``                          ``gemini``
``qwen-code``, ``@qwen-code/qwen-code``, ``qwen``                           ``qwen``
``opencode``, ``opencode-ai``                                               ``opencode``
``kimi-cli``, ``kimi``, ``Kimi CLI``                                        ``kimi``
``kimi-code``                                                               ``kimi-code``
``goose``                                                                   ``goose``
anything else                                                               lower case, npm scope dropped,
                                                                            other characters than
                                                                            ``a-z 0-9 . _ -`` as ``-``
==========================================================================  ===============
"""

from __future__ import annotations

import os
import re
from typing import Final

__all__ = ["ALIASES", "IMPORTED", "agent_name", "native_id", "stored_id"]

ALIASES: Final[dict[str, str]] = {
    "claude-agent-acp": "claude-code",
    "claude-code-acp": "claude-code",
    "claude-code": "claude-code",
    "claude": "claude-code",
    "codex-acp": "codex",
    "codex": "codex",
    "gemini-cli": "gemini",
    "gemini": "gemini",
    "qwen-code": "qwen",
    "qwen": "qwen",
    "opencode": "opencode",
    "opencode-ai": "opencode",
    "kimi-cli": "kimi",
    "kimi": "kimi",
    "kimi-code": "kimi-code",
    "goose": "goose",
}
"""A known agent's name (lower case, npm scope and spaces normalised) -> the importers' name for it."""

IMPORTED: Final = frozenset(ALIASES.values())
"""The agents whose history files an importer reads (``registry.importers.AGENTS``, known here without importing
the importers, which the proxy does only on its history thread, off the path to the ``initialize`` answer)."""

_OTHER: Final = re.compile(r"[^a-z0-9._-]+")


def agent_name(name: str) -> str:
    """The registry name of an agent that calls itself ``name`` (an ``agentInfo.name`` or a command)."""
    base = os.path.basename(name.strip()) if "/" in name and not name.startswith("@") else name.strip()
    base = base.lower()
    if base.startswith("@") and "/" in base:
        base = base.split("/", 1)[1]
    base = _OTHER.sub("-", base.replace(" ", "-")).strip("-.") or "agent"
    return ALIASES.get(base, base)


def stored_id(agent: str, native: str) -> str:
    """The id a session of ``agent`` has in the store."""
    return f"{agent}:{native}"


def native_id(agent: str, stored: str) -> str | None:
    """The agent's own id of a stored session of ``agent`` (None when the session is not the agent's)."""
    prefix = f"{agent}:"
    return stored[len(prefix) :] if stored.startswith(prefix) else None
