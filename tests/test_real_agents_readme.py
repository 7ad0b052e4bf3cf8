"""The Zed settings for the proxy, in the README and docs/proxy.md, are valid and say what they claim (part of
``make test``: no agents run).

Each entry must start ``acp-registry proxy`` with options the proxy's own parser accepts, then ``--`` and the
agent's command; the README's cover claude-agent-acp, codex-acp, gemini and any command, docs/proxy.md's also
claude-code-acp and a Python agent.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PROXY = (ROOT / "docs" / "proxy.md").read_text()


def _settings_in(text: str) -> list[dict[str, dict[str, object]]]:
    """The ``agent_servers`` of each Zed settings block in ``text``."""
    blocks = [json.loads(block) for block in re.findall(r"^```jsonc\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)]
    return [block["agent_servers"] for block in blocks if "agent_servers" in block]


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
    usage = subprocess.run(
        [sys.executable, "-m", "registry.cli", "proxy", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    for option in options:
        assert option in usage, option
