"""``Proxy``: the owner of one relayed conversation - its ports, its rules, its recorder, and every thread.

It builds the parts once and hands each what it needs: the agent's ``Identity`` (one value, read by all), the
``Book`` of its sessions, the ``TitlePolicy``, the ``Recorder``, ``History`` (the agent's past), the ``Surface``
(what the proxy answers and observes) and the ``Relay`` (the rules between the two ports). ``close`` stops and
joins every thread it started, in order: the surface's, the history reader, the recorder (after writing what it
holds), the agent port's and the client port's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Final

from registry.proxy.book import Book
from registry.proxy.child import ChildAgent
from registry.proxy.client import StdioClient
from registry.proxy.history import History, HistoryState
from registry.proxy.identity import Identity
from registry.proxy.ports import AgentPort, ClientPort
from registry.proxy.recorder import Recorder
from registry.proxy.relay import Relay
from registry.proxy.spawn import Spawned, spawn
from registry.proxy.surface import Surface
from registry.proxy.titles import TitlePolicy
from registry.service import SessionRegistry

__all__ = ["FIRST_LIST_WAIT", "Proxy"]

FIRST_LIST_WAIT: Final = 5.0
"""Seconds the first ``session/list`` waits for the agent's past to be read (``--list-wait``)."""
_JOIN: Final = 10.0


class Proxy:
    """Relays ACP between a client (``client_in`` / ``client_out``, file descriptors, or a ``ClientPort`` of the
    host's) and ``command`` (an agent started here; empty when an ``AgentPort`` is given to ``start``), recording into
    ``registry``. ``agent`` names the agent in the registry (default: its ``agentInfo.name``, else the command's
    script or package: ``registry.proxy.identity``). ``store_url`` is the registry's store as another process
    opens it: the agent's past is then imported in a process of its own (else on a thread of this one).
    ``run()`` blocks until one side ends; ``close()`` joins every thread the proxy started (the registry stays open:
    it is the caller's)."""

    def __init__(
        self,
        registry: SessionRegistry,
        command: Sequence[str],
        *,
        agent: str | None = None,
        client_in: int = 0,
        client_out: int = 1,
        client: ClientPort | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        grace: float = 3.0,
        import_history: bool = True,
        list_wait: float = FIRST_LIST_WAIT,
        store_url: str | None = None,
    ) -> None:
        self.registry = registry
        self.command = list(command)
        self._env = None if env is None else dict(env)
        self._cwd = cwd
        self._grace = grace
        self.identity = Identity(self.command, agent)
        self.client: ClientPort = client if client is not None else StdioClient(client_in, client_out)
        self.agent_port: AgentPort | None = None
        self.book = Book(registry.read_model, self.identity)
        what = os.path.basename(self.command[0]) if self.command else ""
        self.relay = Relay(_NotStarted(), self.client, self.identity, what)
        self.titles = TitlePolicy(self.relay.send_client)
        self.recorder = Recorder(registry, self.identity, self.book, self.titles, agent_cwd=cwd)
        self.history = History(self.recorder, self.relay.request_agent, enabled=import_history, store_url=store_url)
        self.surface = Surface(self.recorder, self.history, self.relay, list_wait=list_wait)
        self.relay.attach(self.surface)

    @property
    def agent(self) -> str:
        """The agent's name in the registry."""
        return self.identity.name

    @property
    def history_state(self) -> HistoryState:
        return self.history.state

    def start(self, agent: Spawned | AgentPort | None = None) -> None:
        """Start the agent (``OSError`` when it cannot be started), or take over one ``spawn`` started with this
        proxy's command, or talk to ``agent`` (an ``AgentPort``), and start delivering its lines."""
        if agent is None:
            if not self.command:
                raise ValueError("the agent's command is empty (and no agent port was given)")
            agent = spawn(self.command, env=self._env, cwd=self._cwd)
        port: AgentPort = ChildAgent(agent, grace=self._grace) if isinstance(agent, Spawned) else agent
        self.agent_port = port
        self.relay.agent = port
        self.recorder.start()
        port.start(self.relay)

    def run(self) -> int:
        """Start the agent (unless started), relay until one side ends; the exit code (0: the client ended or the
        proxy was stopped; 1: the agent ended by itself)."""
        if self.agent_port is None:
            self.start()
        self.client.start(self.relay)
        self.relay.ended.wait()
        return self.relay.exit_code

    def stop(self, why: str | None = None, *, signal: bool = False) -> None:
        """End as if the client had gone; with ``why`` (e.g. ``"SIGINT"``), every request still waiting for the agent
        is answered with an error saying so first (``signal``: ``why`` names a signal, said on stderr even when
        nothing was waiting). Returns at once."""
        self.relay.stop(why, signal=signal)

    def close(self) -> None:
        """Stop and join every thread this proxy started, writing what the recorder holds first."""
        if self.agent_port is not None and not self.relay.ended.is_set():
            self.relay.stop("the proxy was closed")
            self.relay.ended.wait(_JOIN)
        self.surface.close()
        self.history.close()
        self.recorder.close()
        if self.agent_port is not None:
            self.agent_port.join(_JOIN)
        self.client.join(_JOIN)


class _NotStarted:
    """The agent port before ``start``: nothing can be sent."""

    def start(self, relay: object) -> None:  # pragma: no cover - replaced before use
        raise RuntimeError("the proxy's agent is not started")

    def send(self, lines: Sequence[bytes]) -> bool:
        return False

    def end(self) -> None:
        return None

    def join(self, timeout: float) -> None:
        return None
