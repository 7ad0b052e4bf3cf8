"""Starting the agent: its process, in a process group of its own, with a pipe on its stdin and one on its stdout.

Stdlib only, so that ``acp-registry proxy`` starts the agent as soon as the store has opened and loads the relay,
the registry's facade and its read model while the agent starts (``registry.cli.proxy``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = ["Spawned", "spawn"]


class Spawned(NamedTuple):
    """A started agent: its process, the descriptor that writes to its stdin and the one that reads its stdout."""

    process: subprocess.Popen[bytes]
    to_agent: int
    from_agent: int

    def kill(self) -> None:
        """End it at once (a proxy that could not go on after starting it), with what it started."""
        for fd in (self.to_agent, self.from_agent):
            os.close(fd)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.process.kill()
        self.process.wait()


def spawn(command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Spawned:
    """Start ``command`` (``OSError`` when it cannot be started); its stderr is ours."""
    agent_in, to_agent = os.pipe()
    from_agent, agent_out = os.pipe()
    try:
        process = subprocess.Popen(
            list(command),
            stdin=agent_in,
            stdout=agent_out,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,  # its own process group, ended as a whole
        )
    except BaseException:
        for fd in (agent_in, to_agent, from_agent, agent_out):
            os.close(fd)
        raise
    os.close(agent_in)
    os.close(agent_out)
    return Spawned(process, to_agent, from_agent)
