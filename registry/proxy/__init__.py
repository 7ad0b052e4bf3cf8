"""``acp-registry proxy``: the registry in front of any ACP agent.

``Proxy(registry, command)`` starts ``command`` (an ACP agent over stdio) and relays ACP between it and a client
on two file descriptors, recording the agent's sessions, turns and titles in ``registry`` and answering
``session/list`` and ``session/delete`` from it. ``registry.cli.proxy`` is the command; a Python host that
spawns agents itself uses ``Proxy`` with descriptors of its own (a pipe or a socket pair). Modules: ``relay``
(processes, threads, ids, faults), ``surface`` (what the proxy answers, adds and observes), ``recorder`` (the
queue and thread that write to the registry), ``wire`` (peeking at messages), ``lines`` (bounded line reading),
``names`` (agent names and stored ids), ``spawn`` (starting the agent). ``Proxy`` is imported when first read, so
that the command starts the agent (``registry.proxy.spawn``) before it loads the relay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from registry.proxy.names import agent_name, native_id, stored_id

if TYPE_CHECKING:
    from registry.proxy.relay import Proxy

__all__ = ["Proxy", "agent_name", "native_id", "stored_id"]


def __getattr__(name: str) -> Any:
    if name != "Proxy":
        raise AttributeError(f"module 'registry.proxy' has no attribute {name!r}")
    from registry.proxy.relay import Proxy  # noqa: PLC0415

    return Proxy
