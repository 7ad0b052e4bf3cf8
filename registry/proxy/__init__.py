"""``acp-registry proxy``: the registry in front of any ACP agent.

``Proxy(registry, command)`` starts ``command`` (an ACP agent over stdio) and relays ACP between it and a client
on two file descriptors, recording the agent's sessions, turns and titles in ``registry`` and answering
``session/list``, ``session/delete`` and the rest of the registry's surface from it. ``registry.cli.proxy`` is the
command; a Python host that spawns agents itself uses ``Proxy`` with descriptors of its own (a pipe or a socket
pair), or ports of its own (``registry.proxy.ports``). As one link of a conductor's proxy chain (the command
without an agent), both ports are ``registry.proxy.chain.Chain``'s, on the process's stdio.

Modules: ``proxy`` (the owner of the parts and their threads), ``ports`` (the agent and the client as the relay
sees them), ``child`` / ``client`` (a child process, two descriptors), ``chain`` (both, through a conductor),
``relay`` (ids, pending requests, faults), ``surface`` (what the proxy answers, adds and observes, by the method
table's rules), ``book`` (which sessions the client may open), ``titles`` (which titles the client hears),
``recorder`` (the queue and thread that write to the registry), ``history`` (the agent's past, reconciled),
``identity`` (who the agent is), ``versions`` (``initialize``'s answer by protocol version), ``wire`` (peeking at
messages), ``lines`` (bounded line reading), ``spawn`` (starting the agent), ``signals`` (SIGTERM and Ctrl-C for
the command). ``Proxy`` is imported when first read, so that the command starts the agent
(``registry.proxy.spawn``) before it loads the relay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from registry.agents import agent_name, native_id, stored_id

if TYPE_CHECKING:
    from registry.proxy.proxy import Proxy

__all__ = ["Proxy", "agent_name", "native_id", "stored_id"]


def __getattr__(name: str) -> Any:
    if name != "Proxy":
        raise AttributeError(f"module 'registry.proxy' has no attribute {name!r}")
    from registry.proxy.proxy import Proxy  # noqa: PLC0415

    return Proxy
