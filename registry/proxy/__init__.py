"""``acp-registry proxy``: the registry in front of any ACP agent.

``Proxy(registry, command)`` starts ``command`` (an ACP agent over stdio) and relays ACP between it and a client
on two file descriptors, recording the agent's sessions, turns and titles in ``registry`` and answering
``session/list`` and ``session/delete`` from it. ``registry.cli.proxy`` is the command; a Python host that
spawns agents itself uses ``Proxy`` with descriptors of its own (a pipe or a socket pair). Modules: ``relay``
(processes, threads, ids, faults), ``surface`` (what the proxy answers, adds and observes), ``recorder`` (the
queue and thread that write to the registry), ``wire`` (peeking at messages), ``lines`` (bounded line reading),
``names`` (agent names and stored ids).
"""

from __future__ import annotations

from registry.proxy.names import agent_name, native_id, stored_id
from registry.proxy.relay import Proxy

__all__ = ["Proxy", "agent_name", "native_id", "stored_id"]
