"""The Zed settings for the proxy, in the README, docs/proxy.md and docs/conductor.md, are valid and say what they
claim (part of ``make test``: no agents run), and the conductor's set-up runs as written (``make test-agents``).

Each standalone entry must start ``acp-registry proxy`` with options the proxy's own parser accepts, then ``--``
and the agent's command; the README's cover claude-agent-acp, codex-acp, gemini and any command, docs/proxy.md's
also claude-code-acp and a Python agent. A chain's entry runs ``examples/conductor_chain.mjs`` under node with
``acp-registry proxy`` (no command) as a link and an agent last.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents import peers
from tests.test_readme import _Client

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PROXY = (ROOT / "docs" / "proxy.md").read_text()
CONDUCTOR = (ROOT / "docs" / "conductor.md").read_text()


def _servers_in(text: str) -> list[dict[str, dict[str, object]]]:
    """The ``agent_servers`` of each Zed settings block in ``text``."""
    blocks = [json.loads(block) for block in re.findall(r"^```jsonc\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)]
    return [block["agent_servers"] for block in blocks if "agent_servers" in block]


def _settings_in(text: str) -> list[dict[str, dict[str, object]]]:
    """The blocks that start the proxy in front of an agent (not a conductor's chain)."""
    return [servers for servers in _servers_in(text) if all(entry["command"] != "node" for entry in servers.values())]


def _chains_in(text: str) -> list[dict[str, dict[str, object]]]:
    return [servers for servers in _servers_in(text) if all(entry["command"] == "node" for entry in servers.values())]


def _usage() -> str:
    return subprocess.run(
        [sys.executable, "-m", "registry.cli", "proxy", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout


def _zed_settings() -> dict[str, dict[str, object]]:
    start = PROXY.index("\n## Real agents behind the proxy")
    end = PROXY.find("\n## ", start + 1)
    (servers,) = _settings_in(PROXY[start : end if end > 0 else None])
    assert isinstance(servers, dict)
    return servers


def _agents(servers: dict[str, dict[str, object]]) -> set[str]:
    """The agents the entries put the proxy in front of (their commands' names)."""
    agents = set()
    for name, entry in servers.items():
        assert entry["type"] == "custom", name
        assert str(entry["command"]).endswith("/acp-registry"), name
        args = entry["args"]
        assert isinstance(args, list) and args[0] == "proxy", name
        split = args.index("--")
        assert split + 1 < len(args) and str(args[split + 1]).startswith("/"), name  # Zed needs absolute paths
        agents.add(Path(str(args[split + 1])).name)
        assert isinstance(entry["env"], dict), name
    return agents


def test_every_entry_puts_the_proxy_in_front_of_an_agent() -> None:
    assert {"claude-agent-acp", "claude-code-acp", "codex-acp", "gemini", "fast-agent-acp"} <= _agents(_zed_settings())
    first_screen, *_ = _settings_in(README)
    assert {"claude-agent-acp", "codex-acp", "gemini", "my-agent"} == _agents(first_screen)
    for servers in _settings_in(PROXY):
        _agents(servers)


def test_the_proxy_options_the_settings_use_exist() -> None:
    options = {"--store"}  # named in the text
    entries = [entry for servers in [*_settings_in(README), *_settings_in(PROXY)] for entry in servers.values()]
    for entry in entries:
        args = [str(arg) for arg in list(entry["args"])]  # type: ignore[call-overload]
        options |= {arg for arg in args[1 : args.index("--")] if arg.startswith("--")}
    usage = _usage()
    for option in options:
        assert option in usage, option


def test_a_chains_entry_runs_the_conductor_with_the_registry_as_a_link_and_an_agent_last() -> None:
    chains = [*_chains_in(README), *_chains_in(CONDUCTOR)]
    assert len(chains) == 2  # the README's, beside Zed's, and the one docs/conductor.md sets up
    usage = _usage()
    for servers in chains:
        for name, entry in servers.items():
            args = [str(arg) for arg in list(entry["args"])]  # type: ignore[call-overload]
            host, *links, agent = args
            assert host.startswith("/") and host.endswith("/conductor_chain.mjs"), name
            assert links and agent.startswith("/"), name  # absolute, as Zed needs them
            for link in links:
                command, proxy, *options = shlex.split(link)
                assert command.startswith("/") and command.endswith("/acp-registry") and proxy == "proxy", name
                assert "--" not in options, name  # a link starts no agent of its own
                assert all(option in usage for option in options if option.startswith("--")), name
    (block,) = re.findall(r"^```sh\n(.*?)^```$", CONDUCTOR, re.MULTILINE | re.DOTALL)
    assert Path(chains[1]["Claude Code (chain with registry)"]["args"][0]).name in block  # type: ignore[index]


@pytest.mark.real_agents
def test_the_conductors_set_up_runs_as_written(tmp_path: Path) -> None:
    """docs/conductor.md's lines in a fresh HOME: the conductor from npm beside a copy of the host, then the chain
    with the registry as its link and claude-agent-acp last answers an editor's initialize and session/new."""
    peers.CLAUDE_AGENT_ACP.require()
    node = peers.node()
    if node is None or shutil.which("npm") is None:
        pytest.skip("no node and npm to install and run the conductor (run `make agents`)")
    (block,) = re.findall(r"^```sh\n(.*?)^```$", CONDUCTOR, re.MULTILINE | re.DOTALL)
    *set_up, chain = [line for line in block.splitlines() if line.strip()]
    env = peers.fake_home(tmp_path)
    agent_bin = peers.CLAUDE_AGENT_ACP.folder / "node_modules" / ".bin"
    env["PATH"] = os.pathsep.join(
        [str(Path(node).parent), str(Path(sys.executable).parent), str(agent_bin), env["PATH"]]
    )
    env["npm_config_cache"] = str(Path.home() / ".npm")  # npm's own cache, shared safely: the fake HOME has none
    made = subprocess.run(
        ["bash", "-ec", "\n".join(set_up)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert made.returncode == 0, made.stderr
    assert chain.startswith("node ~/acp-chain/conductor_chain.mjs")
    client = _Client(f"exec {chain}", cwd=tmp_path, env=env)
    process = client.process
    try:
        answer = client.send(
            json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
        )
        assert answer["result"]["_meta"]["acp-session-registry/proxy"]["agent"] == "claude-code"
        assert "list" in answer["result"]["agentCapabilities"]["sessionCapabilities"]
        params = {"cwd": str(tmp_path), "mcpServers": []}
        made_session = client.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": params}))
        assert made_session["result"]["sessionId"]
    finally:
        _, stderr = process.communicate(timeout=120)  # the editor's EOF ends the chain
    assert process.returncode == 0, stderr
