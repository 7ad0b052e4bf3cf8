"""The README's Zed settings for the proxy are valid and say what they claim (part of ``make test``: no agents run).

Each entry must start ``acp-registry proxy`` with options the proxy's own parser accepts, then ``--`` and the
agent's command; together they cover claude-agent-acp, claude-code-acp, codex-acp, gemini and a Python agent.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _zed_settings() -> dict[str, dict[str, object]]:
    start = README.index("\n## Real agents behind the proxy")
    end = README.index("\n## ", start + 1)
    (block,) = re.findall(r"^```jsonc\n(.*?)^```$", README[start:end], re.MULTILINE | re.DOTALL)
    servers = json.loads(block)["agent_servers"]
    assert isinstance(servers, dict)
    return servers


def test_every_entry_puts_the_proxy_in_front_of_an_agent() -> None:
    servers = _zed_settings()
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
    assert {"claude-agent-acp", "claude-code-acp", "codex-acp", "gemini", "fast-agent-acp"} <= agents


def test_the_proxy_options_the_settings_use_exist() -> None:
    options = {"--store"}  # named in the text
    for entry in _zed_settings().values():
        args = [str(arg) for arg in list(entry["args"])]  # type: ignore[call-overload]
        options |= {arg for arg in args[1 : args.index("--")] if arg.startswith("--")}
    usage = subprocess.run(
        [sys.executable, "-m", "registry.cli", "proxy", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    for option in options:
        assert option in usage, option
