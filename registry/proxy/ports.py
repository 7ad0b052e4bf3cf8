"""The relay's two sides as ports: what the relay needs of the agent and of the client, and nothing more.

The relay (``registry.proxy.relay.Relay``) keeps the rules - ids, pending requests, what the proxy answers,
faults - and never knows how lines reach either side. An ``AgentPort`` sends lines to the agent, delivers the
agent's lines to a ``FromAgent`` (the relay) and says once how the agent ended; ``ChildAgent``
(``registry.proxy.child``) is the agent as a child process on a pipe pair. A ``ClientPort`` sends lines to the
client; ``StdioClient`` (``registry.proxy.client``) reads and writes two descriptors. A second implementation of
both - a conductor's proxy chain, where the successor's messages travel wrapped on the client's own stdio - is
``registry.proxy.chain.Chain``: one reader of the conductor, seen as two ports (``chain.client``,
``chain.agent``: their ``send`` differ, one wraps), that feeds ``Relay.from_client`` / ``Relay.from_agent`` as
it demultiplexes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from registry.acp.jsonrpc import OverlongLine

__all__ = ["AgentEnd", "AgentPort", "ClientPort", "FromAgent", "FromClient", "Line"]

Line = bytes | OverlongLine
"""One line read from a side, without its newline (an over-long one only as its head and size)."""


class AgentEnd(NamedTuple):
    """How the agent ended: ``how`` for people ("exited with code 3"), and whether the proxy had asked it to end
    (the client had gone, or the proxy was stopped) before it did."""

    how: str
    asked: bool


class FromAgent(Protocol):
    """What an agent port delivers to (the relay)."""

    def from_agent(self, lines: Sequence[Line]) -> None:
        """Lines from the agent, in the order it wrote them, on one thread."""

    def agent_ended(self, end: AgentEnd) -> None:
        """The agent ended (called once, after the last ``from_agent``)."""


class FromClient(Protocol):
    """What a client port delivers to (the relay)."""

    def from_client(self, lines: Sequence[Line]) -> None:
        """Lines from the client, in the order it wrote them, on one thread."""

    def client_ended(self) -> None:
        """The client's input ended (called once, after the last ``from_client``)."""


class AgentPort(Protocol):
    """The agent as the relay talks to it."""

    def start(self, relay: FromAgent) -> None:
        """Begin delivering the agent's lines and its end to ``relay``."""

    def send(self, lines: Sequence[bytes]) -> bool:
        """Write whole lines to the agent, in order; False once it cannot be written to."""

    def end(self) -> None:
        """Ask the agent to end (its input closes; it is ended after a grace period); returns at once."""

    def join(self, timeout: float) -> None:
        """Wait for every thread the port started to end."""


class ClientPort(Protocol):
    """The client as the relay talks to it."""

    def start(self, relay: FromClient) -> None:
        """Begin delivering the client's lines and the end of its input to ``relay``."""

    def send(self, lines: Sequence[bytes]) -> bool:
        """Write whole lines to the client, in order, atomically per call; False once it has gone."""

    def join(self, timeout: float) -> None:
        """Wait for every thread the port started to end."""
