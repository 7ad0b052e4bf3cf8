"""Who the proxied agent is: one value, owned by the proxy, read by the recorder, the surface and the book.

One agent, one name, whichever way it is started. The name is decided when the agent has answered ``initialize``:
from ``--agent``, from ``agentInfo.name`` (``info.name`` in an ACP v2 answer) and from the command (the script or
package an interpreter or launcher runs, never ``python``, ``npx`` or ``env``'s variables:
``registry.agents.command_name``), each mapped to a known agent's one name (``registry.agents.KNOWN``: ``fast-agent-
acp`` and ``fast-agent`` are ``fast-agent``). When ``--agent`` and ``agentInfo`` name two different agents, the
known agent's name wins (else ``--agent``'s), the other is kept in ``others`` - sessions an older proxy recorded
under it are taken over (``registry.proxy.names``) - and the difference is said once on stderr. A session the client
makes before ``initialize`` waits for the name (``fix(wait=...)``, on the recorder's thread), so it is recorded
under the agent's name, not the command's. The name in use is said once on stderr and in ``initialize``'s ``_meta``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from registry.agents import KNOWN, agent_name, command_name, other_names

__all__ = ["Identity"]

log = logging.getLogger("acp_registry.proxy.identity")

_KNOWN_NAMES = frozenset(known.name for known in KNOWN)


class Identity:
    """The agent's registry name, how it was decided (``"--agent"``, ``"agentInfo"``, ``"command"``) and the other
    names its sessions may be held under (``others``)."""

    def __init__(self, command: Sequence[str], given: str | None = None) -> None:
        self._lock = threading.Lock()
        self._said = False
        self._told = threading.Event()
        self.given = agent_name(given) if given is not None else None
        self.final = False
        self.mismatch: str | None = None  # what differed between --agent and agentInfo, said once
        if self.given is not None:
            self.name, self.source = self.given, "--agent"
        else:
            self.name, self.source = command_name(list(command)), "command"
        self.others: tuple[str, ...] = other_names(self.name)

    def told(self, agent_info_name: object, source: str = "agentInfo") -> None:
        """The agent answered ``initialize``, naming itself ``agent_info_name`` (anything: only a non-empty string
        counts) in ``source`` (v1's ``agentInfo``, v2's ``info``). The name is settled from here (unless a session
        was recorded before, under the name then)."""
        with self._lock:
            if not self.final and isinstance(agent_info_name, str) and agent_info_name.strip():
                self._settle(agent_name(agent_info_name), source)
            self._told.set()

    def _settle(self, told: str, source: str) -> None:
        given = self.given
        taken: tuple[str, ...] = ()
        if given is None or given == told:
            self.name, self.source = told, source if given is None else "--agent"
        elif told in _KNOWN_NAMES and given not in _KNOWN_NAMES:
            self.name, self.source, taken = told, source, (given,)
            self.mismatch = f"--agent {given!r} names the agent that calls itself {told!r}: its sessions are taken over"
        elif told in _KNOWN_NAMES:  # two agents the registry knows: --agent is the user's word, nothing is moved
            self.name, self.source = given, "--agent"
            self.mismatch = f"--agent {given!r}, but the agent calls itself {told!r}: recorded as {given!r}"
        else:
            self.name, self.source, taken = given, "--agent", (told,)
            self.mismatch = f"the agent calls itself {told!r}: its sessions recorded under that name are taken over"
        self.others = tuple(dict.fromkeys((*other_names(self.name), *taken)))

    def fix(self, wait: float = 0.0) -> str:
        """Make the name final (a session is about to be recorded under it) and say it once; the name. ``wait``:
        seconds to wait for ``initialize``'s answer first (a session made before it is the agent's, too)."""
        if wait > 0 and not self._told.is_set():
            self._told.wait(wait)
        with self._lock:
            self.final = True
            say, self._said = not self._said, True
        if say:
            log.info("recording as agent %r (from %s)", self.name, self.source)
            if self.mismatch is not None:
                log.warning("%s", self.mismatch)
        return self.name
