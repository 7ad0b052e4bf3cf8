"""Who an agent is: the agents the registry knows by name, what they call themselves, and how their ids are stored.

One declaration, ``KNOWN``: each known agent's registry name (the prefix of its stored ids, ``--agent``'s value,
the importer's name), the names it goes by (an ``agentInfo.name``, a command, an npm package), and whether an
importer reads its history files. The importers (``registry.importers``), the proxy (``registry.proxy``), the
read side (``registry.model.agent_of``) and the command line (``list --agent``) all read it. Stdlib only: the
proxy reads it before anything heavy is loaded.

A session of agent ``X`` whose own id is ``N`` is stored as ``X:N`` (``stored_id``); the wire in front of ``X``
shows ``N`` (``native_id``). When an agent starts a new conversation under an id the registry already holds
for an older one (an agent that numbers its sessions afresh in each process), the new conversation is stored as
``X~2:N`` (then ``~3``, ...): the older record stays in the history, deleted with ``META_RETIRED`` in its
``_meta`` saying why it was retired (``Retired``), and ``native_id`` still gives ``N``. A session a proxy retired
because the agent did not keep it comes back the same way when the agent turns out to have it.
Agent names never hold ``:`` or ``~`` (``agent_name`` makes them so), so the first ``:`` ends the prefix.
"""

from __future__ import annotations

import enum
import os
import re
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "IMPORTED",
    "KNOWN",
    "LAUNCHERS",
    "META_RETIRED",
    "META_SOURCE_GONE",
    "Known",
    "Retired",
    "agent_name",
    "canonical_id",
    "command_name",
    "current_id",
    "generation",
    "keeps_unprompted",
    "known",
    "known_name",
    "native_id",
    "other_names",
    "retired",
    "source_gone",
    "spellings",
    "split_id",
    "stored_id",
]


META_RETIRED: Final = "acp-session-registry/retired"  # registry.model.META_NAMESPACE + "/retired"
"""In a deleted session's ``_meta``: why it was retired (a ``Retired`` value); absent for a user's deletion."""
META_SOURCE_GONE: Final = "acp-session-registry/sourceGone"
"""``true`` in the ``_meta`` of a session whose agent no longer has it (its files are gone: the agent's own
clean-up, or its user removed them). The registry keeps it - listed, readable, found by search - but the agent
cannot open it, so a proxy does not offer it to the agent's client."""


class Retired(enum.Enum):
    SUPERSEDED = "superseded"  # the agent started a new conversation under the session's id
    UNKEPT = "unkept"  # the agent did not keep it (restored, the same record, when the agent has it after all)
    MOVED = "moved"  # held under another name of the same agent: taken over by the record under its one name


class Known(msgspec.Struct, frozen=True):
    """A known agent: its registry name, the other names it goes by, whether its history files are read, and how it
    keeps and lists its sessions (each measured against the agent itself: ``tests/test_real_agents*.py``)."""

    name: str
    aliases: tuple[str, ...] = ()
    imported: bool = True
    keeps_unprompted: bool = False
    """Whether the agent keeps a session that never had a turn (measured: opencode does; claude-agent-acp,
    claude-code-acp, codex-acp, qwen-code, fast-agent and mistral-vibe list a session only after its first turn)."""
    lists_per_cwd: bool = False
    """Whether its own ``session/list`` without a ``cwd`` answers only part of its past - the folder it runs in
    (fast-agent 0.10.48, which keeps each session under its own cwd) or nothing (kimi-cli) - so that it is asked once
    per cwd. Whether an agent kept a session is asked of its list after the session's turn (``registry.proxy.kept``)."""


KNOWN: Final[tuple[Known, ...]] = (
    Known("claude-code", ("claude-agent-acp", "claude-code-acp", "claude")),
    Known("codex", ("codex-acp",)),
    Known("gemini", ("gemini-cli",)),
    Known("kimi", ("kimi-cli", "kimi-code-cli"), lists_per_cwd=True),  # kimi-cli 1.x says "Kimi Code CLI"; ~/.kimi
    Known("kimi-code"),  # the separate Kimi Code product (~/.kimi-code), a history of its own
    Known("qwen", ("qwen-code",)),
    Known("goose"),
    Known("opencode", ("opencode-ai",), keeps_unprompted=True),
    # Agents whose past comes from their own session/list (no importer reads their files):
    Known("fast-agent", ("fast-agent-acp", "fast-agent-mcp"), imported=False, lists_per_cwd=True),
    Known("mistral-vibe", ("vibe", "vibe-acp", "mistral-vibe-acp"), imported=False),
)
"""Every agent the registry knows by name, the importers' first and in their order. Matching is on the normalised
name (lower case, npm scope dropped, spaces and other characters as ``-``): ``@zed-industries/claude-code-acp``,
``claude-agent-acp`` and ``Claude Code`` are one agent, ``claude-code``, however it is started."""

IMPORTED: Final[tuple[str, ...]] = tuple(known.name for known in KNOWN if known.imported)
"""The agents whose history files an importer reads (``registry.importers.AGENTS``)."""

LAUNCHERS: Final = frozenset(
    {"python", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "bunx", "npx", "pnpx", "uvx", "uv",
     "pipx", "sh", "bash", "dash", "zsh", "env", "exec", "ruby", "perl", "java", "tsx", "ts-node"}
)  # fmt: skip
"""Interpreters and launchers: never an agent's name - the script or package they run is."""

_ALIASES: Final[dict[str, str]] = {alias: known.name for known in KNOWN for alias in (known.name, *known.aliases)}
# Patterns compiled at their first use (re keeps them): a process that only reads a list never names an agent.
_OTHER: Final = r"[^a-z0-9._-]+"
_VERSIONED: Final = r"^(python|pypy|node)[0-9.]*$"
_SCRIPT: Final = r"\.(py|pyz|js|mjs|cjs|ts|mts|sh|rb|pl|jar)$"
_ASSIGNMENT: Final = r"[A-Za-z_][A-Za-z0-9_]*="  # env's NAME=VALUE (a value may hold a path: never the name)
_ENV_VALUED: Final = frozenset({"-u", "--unset", "-C", "--chdir"})  # env's options whose value is the next word
_HEX: Final = "[0-9a-fA-F]"
_UUID: Final = "".join(  # urn:uuid: and braces around 8-4-4-4-12 hex digits, each hyphen optional
    (
        r"(?:[uU][rR][nN]:[uU][uU][iI][dD]:)?\{?",
        *(f"({_HEX}{{{n}}})" + "-?" * (n != 12) for n in (8, 4, 4, 4, 12)),
        r"\}?",
    )
)


def known_name(name: str) -> str:
    """The registry name of a known agent that ``name`` is one of the names of (``claude-agent-acp`` ->
    ``claude-code``, ``Kimi Code CLI`` -> ``kimi``); any other name as it is (a name an agent was recorded under)."""
    known = _ALIASES.get(agent_name(name))
    return name if known is None else known


def known(name: str) -> Known | None:
    """The known agent whose registry name is ``name``, if any."""
    return next((entry for entry in KNOWN if entry.name == name), None)


def keeps_unprompted(name: str) -> bool:
    """Whether the agent ``name`` (a registry name) is known to keep sessions that never had a turn."""
    entry = known(name)
    return entry is not None and entry.keeps_unprompted


def other_names(name: str) -> tuple[str, ...]:
    """The names an older version may have recorded the agent ``name`` under (its aliases, as ``agent_name`` made
    them before they were declared): records held under one of them are the agent's too."""
    entry = known(name)
    return () if entry is None else tuple(alias for alias in entry.aliases if alias != name)


def canonical_id(native: str) -> str:
    """One spelling of an agent's id: a UUID in any form agents parse - upper or lower case, in braces, after
    ``urn:uuid:``, with or without hyphens - as lower-case hyphenated text; any other id as it is."""
    found = re.fullmatch(_UUID, native)
    if found is None or native.startswith("{") != native.endswith("}"):
        return native
    return "-".join(found.groups()).lower()


def spellings(native: str) -> tuple[str, ...]:
    """The spellings the registry may hold the agent's id ``native`` under: as written, then, for a UUID, its
    canonical form (lower case, as most agents write them) and that form in upper case."""
    canonical = canonical_id(native)
    if re.fullmatch(_UUID, native) is None or native.startswith("{") != native.endswith("}"):
        return (native,)
    return tuple(dict.fromkeys((native, canonical, canonical.upper())))


def agent_name(name: str) -> str:
    """The registry name of an agent that calls itself ``name`` (an ``agentInfo.name``, a command, a package)."""
    base = name.strip()
    if base.startswith("@") and "/" in base:
        base = base.split("/", 1)[1]  # an npm scope
    elif "/" in base:
        base = os.path.basename(base.rstrip("/"))
    base = base.lower()
    base = re.sub(_SCRIPT, "", base)
    base = re.sub(r"@[^@]*$", "", base) if "@" in base[1:] else base  # a package's @version
    base = re.sub(_OTHER, "-", base.replace(" ", "-")).strip("-.") or "agent"
    return _ALIASES.get(base, base)


def command_name(command: list[str] | tuple[str, ...]) -> str:
    """The agent's name from the command that starts it: the first word that is not an interpreter, a launcher, an
    option or a variable's assignment (``python3 -u my_agent.py`` -> ``my-agent``; ``npx -y @zed-industries/codex-acp``
    -> ``codex``; ``env -u HOME KEY=/a/b claude-agent-acp`` -> ``claude-code``)."""
    skip = in_env = False
    for word in command:
        if skip:  # the value of an option of env's that takes one
            skip = False
            continue
        if in_env and word in _ENV_VALUED:
            skip = True
            continue
        if not word or word.startswith("-") or "=" in word.split("/")[-1] or re.match(_ASSIGNMENT, word):
            continue
        if any(space in word for space in " \t\n"):  # a shell's -c script: its own first command
            try:
                import shlex  # noqa: PLC0415 - only for a command given as one string

                return command_name(shlex.split(word))
            except ValueError:
                continue
        base = os.path.basename(word).lower()
        if base in LAUNCHERS or re.match(_VERSIONED, base):
            in_env = base == "env"
            continue
        return agent_name(word)
    return agent_name(command[0]) if command else "agent"


def stored_id(agent: str, native: str, generation: int = 1) -> str:
    """The id a session of ``agent`` has in the store: ``agent:native`` (``agent~G:native`` for a later
    conversation the agent started under the same id)."""
    return f"{agent}:{native}" if generation == 1 else f"{agent}~{generation}:{native}"


def split_id(stored: str) -> tuple[str, int, str] | None:
    """``(agent, generation, native)`` of a stored id in ``stored_id``'s form, else None."""
    prefix, colon, native = stored.partition(":")
    if not colon or not prefix or not native:
        return None
    agent, tilde, number = prefix.partition("~")
    if not tilde:
        return agent, 1, native
    if not number.isdigit() or int(number) < 2:
        return None
    return agent, int(number), native


def native_id(agent: str, stored: str) -> str | None:
    """The agent's own id of a stored session of ``agent`` (None when the session is not the agent's)."""
    parts = split_id(stored)
    return parts[2] if parts is not None and parts[0] == agent else None


def generation(stored: str) -> int:
    """Which conversation under its native id a stored session is (1 unless the agent reused the id)."""
    parts = split_id(stored)
    return 1 if parts is None else parts[1]


def source_gone(state: Any) -> bool:
    """Whether a session (a ``SessionState``) is one its agent no longer has (``META_SOURCE_GONE``)."""
    return not state.deleted and (state.meta or {}).get(META_SOURCE_GONE) is True


def retired(state: Any) -> Retired | None:
    """Why a deleted session (a ``SessionState``) was retired (None: deleted by a user, or not deleted)."""
    if not state.deleted:
        return None
    mark = (state.meta or {}).get(META_RETIRED)
    try:
        return Retired(mark) if isinstance(mark, str) else None
    except ValueError:
        return None


def current_id(agent: str, native: str, state_of: Callable[[str], Any]) -> str:
    """The stored id the agent's session ``native`` has now: past the records retired under it, but the last one
    when it was retired as not kept (it is restored: the same record) (``state_of`` reads a stored id's state, or
    None)."""
    number = 1
    while True:
        sid = stored_id(agent, native, number)
        state = state_of(sid)
        why = None if state is None else retired(state)
        if why is None:
            return sid
        following = stored_id(agent, native, number + 1)
        if why is Retired.UNKEPT and state_of(following) is None:
            return sid
        number += 1
