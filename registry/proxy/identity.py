"""Who the proxied agent is: one value, owned by the proxy, read by the recorder, the surface and the book.

The name is decided once: by ``--agent`` when given, else by the agent's ``initialize`` answer
(``agentInfo.name``; ``info.name`` in an ACP v2 answer), else by its command (the script or package an interpreter
or launcher runs, never ``python``, ``npx`` or ``env``'s variables: ``registry.agents.command_name``). It is final
from the first session the proxy records: a client that makes a session before ``initialize`` gets it recorded
under the command's name, and a later ``agentInfo`` does not move it elsewhere. The name in use is said once on
stderr and in ``initialize``'s ``_meta``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from registry.agents import agent_name, command_name

__all__ = ["Identity"]

log = logging.getLogger("acp_registry.proxy.identity")


class Identity:
    """The agent's registry name and how it was decided (``"--agent"``, ``"agentInfo"``, ``"command"``)."""

    def __init__(self, command: Sequence[str], given: str | None = None) -> None:
        self._lock = threading.Lock()
        self._said = False
        if given is not None:
            self.name, self.source, self.final = agent_name(given), "--agent", True
        else:
            self.name, self.source, self.final = command_name(list(command)), "command", False

    def told(self, agent_info_name: object, source: str = "agentInfo") -> None:
        """The agent's ``initialize`` answer named it ``agent_info_name`` (anything: only a non-empty string counts)
        in ``source`` (v1's ``agentInfo``, v2's ``info``)."""
        with self._lock:
            if not self.final and isinstance(agent_info_name, str) and agent_info_name.strip():
                self.name, self.source = agent_name(agent_info_name), source
        self.fix()

    def fix(self) -> str:
        """Make the name final (a session is about to be recorded under it) and say it once; the name."""
        with self._lock:
            self.final = True
            say, self._said = not self._said, True
        if say:
            log.info("recording as agent %r (from %s)", self.name, self.source)
        return self.name
