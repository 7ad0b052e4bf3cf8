"""Where an agent's ``initialize`` answer says who it is and what it can do, by the protocol version it answered.

ACP v1: ``agentInfo`` names the agent; ``agentCapabilities`` holds ``loadSession`` and ``sessionCapabilities`` (one
entry a session method, ``{}`` = supported). The v2 draft (``schema/v2/schema.json``, the TypeScript SDK's
``/experimental/v2`` entry point; claude-agent-acp 0.101 already answers a v2 client in it): ``info`` names the
agent; one ``capabilities`` object, whose ``session`` object - present, even ``{}`` - means the baseline session
methods (``session/new``, ``list``, ``resume``, ``close``, ``prompt``, ``cancel``, ``update``), each further one an
entry of its own (``delete``, and the unstable ``title``, ``archive``, ``status``, ``fork``); there is no
``session/load``. An agent answers with the highest version it has at or below the client's, so the answer's
``protocolVersion`` says which shape it is in.

The method table reads capabilities in v1's shape (``registry.acp.methods``: ``sessionCapabilities.<key>``):
``advertised`` gives it a v2 answer's in that shape, and ``add`` puts what the proxy serves where the answer's own
version has a client look for it.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["add", "advertised", "agent_name"]

_V2_BASELINE: Final = ("list", "resume", "close")
"""The v1 ``sessionCapabilities`` entries a v2 ``capabilities.session`` implies by being there."""


def _v2(result: dict[str, Any]) -> bool:
    """Whether the answer is in the v2 draft's shape: version 2 or later, without v1's capabilities object."""
    version = result.get("protocolVersion")
    newer = isinstance(version, int) and not isinstance(version, bool) and version >= 2
    return newer and "agentCapabilities" not in result


def agent_name(result: dict[str, Any]) -> tuple[object, str]:
    """The name the agent gives itself (anything: the caller judges it) and where: ``info.name`` in v2,
    ``agentInfo.name`` in v1."""
    key = "info" if _v2(result) else "agentInfo"
    info = result.get(key)
    return (info.get("name") if isinstance(info, dict) else None), key


def advertised(result: dict[str, Any]) -> dict[str, Any] | None:
    """What the agent advertises, in v1's ``agentCapabilities`` shape (None: not an object at all)."""
    if not _v2(result):
        capabilities = result.get("agentCapabilities")
        return {} if capabilities is None else capabilities if isinstance(capabilities, dict) else None
    capabilities = result.get("capabilities")
    if capabilities is not None and not isinstance(capabilities, dict):
        return None
    session = (capabilities or {}).get("session")
    if not isinstance(session, dict):
        return {}  # no session methods at all
    return {"sessionCapabilities": {**session, **{key: {} for key in _V2_BASELINE}}}


def add(result: dict[str, Any], added: dict[str, Any]) -> None:
    """``added`` (what the proxy serves, in v1's shape) into the answer, where its version puts capabilities,
    keeping every value the agent gave: v1's ``agentCapabilities``; v2's ``capabilities.session`` - only where the
    agent has sessions at all, and without the baseline a v2 ``session`` already means."""
    if not _v2(result):
        capabilities = result.get("agentCapabilities")
        if capabilities is None:
            capabilities = result["agentCapabilities"] = {}
        if isinstance(capabilities, dict):
            _merge(capabilities, added)
        return
    capabilities = result.get("capabilities")
    session = capabilities.get("session") if isinstance(capabilities, dict) else None
    if isinstance(session, dict):
        extra = {key: value for key, value in added.get("sessionCapabilities", {}).items() if key not in _V2_BASELINE}
        _merge(session, extra)


def _merge(capabilities: dict[str, Any], added: dict[str, Any]) -> None:
    for key, value in added.items():
        mine = capabilities.get(key)
        if isinstance(value, dict) and isinstance(mine, dict):
            _merge(mine, value)
        elif key not in capabilities or mine is None or mine is False:
            capabilities[key] = value
