"""A chain run by ``@thinkwell/conductor`` (``examples/conductor_chain.mjs``) leaves nothing running when it ends
(issue 42: codex-acp's native program outlived the chain, 2 of 2). Every process the chain starts inherits a
token in its environment; once the chain has ended, no process may carry it. Needs the conductor from ``make
agents`` (and codex-acp for its own case); run with ``make test-agents``."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.agents import peers
from tests.agents.acp_client import AcpProcess
from tests.agents.scene import INITIALIZE, scene
from tests.proxy_wire import AGENT

pytestmark = pytest.mark.real_agents

_TOKEN = "ACP_REGISTRY_TEST_CHAIN"


def _carrying(token: str) -> list[str]:
    """The processes whose environment holds ``token`` (their pid and command line)."""
    found = []
    needle = f"{_TOKEN}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {command}")
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _left_after(token: str, bound: float = 30.0) -> list[str]:
    """What still carries ``token`` once the chain had ``bound`` seconds to end it (a generous bound: it takes the
    conductor's 250 ms and 500 ms steps)."""
    deadline = time.monotonic() + bound
    while (left := _carrying(token)) and time.monotonic() < deadline:
        time.sleep(0.1)  # the next look (the loop is bounded by the deadline; what is left is the caller's to judge)
    return left


def _chain(tmp_path: Path, agent: list[str], env: dict[str, str]) -> tuple[AcpProcess, str]:
    token = uuid.uuid4().hex
    link = peers.link_command(f"sqlite://{tmp_path / 'sessions.db'}")
    command = peers.chain_command(peers.conductor_node(), link, agent)
    chain = AcpProcess(command, env=peers.conductor_env(env) | {_TOKEN: token}, cwd=tmp_path)
    chain.init_result = chain.call("initialize", INITIALIZE, timeout=120)
    return chain, token


@pytest.mark.parametrize("end", ["the editor's EOF", "SIGTERM to the conductor"])
def test_an_agent_that_leaves_a_process_of_its_own_is_ended_with_its_group(tmp_path: Path, end: str) -> None:
    """An agent started through a launcher that leaves a child behind (as codex-acp's node script leaves its native
    program): the scripted agent with a child of its own that would live five minutes."""
    agent = ["sh", "-c", f"sleep 300 & exec {sys.executable} {AGENT}"]
    chain, token = _chain(tmp_path, agent, dict(os.environ))
    try:
        chain.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert len(_carrying(token)) >= 4  # the conductor, the registry's link, the agent, its child
        if end == "the editor's EOF":
            assert chain.close() == 0, chain.stderr_tail()
        else:
            chain.process.send_signal(signal.SIGTERM)
            assert chain.process.wait(30) == 128 + signal.SIGTERM, chain.stderr_tail()
        assert _left_after(token) == []
    finally:
        chain.kill()


def test_codex_acp_through_the_chain_leaves_nothing_running(tmp_path: Path) -> None:
    peers.CODEX_ACP.require()
    with scene(tmp_path, peers.CODEX_ACP, stub=True) as world:
        chain, token = _chain(world.project, peers.CODEX_ACP.command(), world.env)
        try:
            assert chain.call("authenticate", {"methodId": "codex-api-key"}) == {}
            world.new_session(chain)
            commands = " ".join(_carrying(token))
            assert "codex-acp-linux-x64" in commands or "bin/codex-acp " in commands, commands  # the native program
            assert chain.close() == 0, chain.stderr_tail()
            assert _left_after(token) == []
        finally:
            chain.kill()
