"""ACP v2 through the proxy (issue 42): an agent that answers a v2 client in the v2 draft's shape (``info``,
``capabilities.session``; claude-agent-acp 0.101 does) gets the proxy's session methods added where v2 puts them,
and its name from ``info``; a launcher's variables are never an agent's name; ``serve`` stays v1 and says so.
Real proxy processes in front of the scripted agent (``--v2``); the real agent and the TypeScript SDK's v2 client
are in ``tests/test_real_agents_v2.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from registry import SessionRegistry
from registry.proxy import versions
from tests.cli_runner import Cli
from tests.proxy_wire import AGENT, ProxyProcess, prompt, proxy_command

V2_INITIALIZE = {"protocolVersion": 2, "info": {"name": "a-v2-client", "version": "1"}, "capabilities": {}}
PROXY_METHODS = {"delete", "title", "archive", "status"}


def _initialized(url: str, *agent_args: str, command: list[str] | None = None, version: int = 2) -> Any:
    proxy = ProxyProcess(proxy_command(url, *agent_args, command=command))
    params = V2_INITIALIZE if version == 2 else {"protocolVersion": 1}
    return proxy, proxy.result(0, "initialize", params)


def test_a_v2_answer_gets_the_proxys_methods_in_capabilities_session_and_its_name_from_info(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"
    proxy, init = _initialized(url, "--v2", "--fork")
    with proxy:
        assert init["protocolVersion"] == 2 and "agentCapabilities" not in init
        assert init["info"] == {"name": "scripted-agent", "version": "1.0"}  # the agent's, untouched
        session = init["capabilities"]["session"]
        assert {key: session[key] for key in PROXY_METHODS} == {key: {} for key in PROXY_METHODS}
        assert session["fork"] == {} and session["resume"] == {}  # the agent's own entries stay
        assert "list" not in session  # v2's baseline: a session object already means it
        assert init["capabilities"]["_meta"] == {"scripted": True}
        assert init["_meta"]["acp-session-registry/proxy"]["agent"] == "scripted-agent"
        made = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert proxy.result(2, "session/prompt", prompt(made, "Through v2")) == {"stopReason": "end_turn"}
        assert proxy.result(3, "session/set_title", {"sessionId": made, "title": "Named"}) == {"title": "Named"}
        listed = proxy.result(4, "session/list", {})["sessions"]
        assert [(s["sessionId"], s["title"]) for s in listed] == [(made, "Named")]
        assert proxy.close() == 0
    assert "acp-registry proxy: recording as agent 'scripted-agent' (from info)" in proxy.stderr_lines
    with SessionRegistry.open(url, follow=False) as registry:
        state = registry.state(f"scripted-agent:{made}")
    assert state is not None and state.messages == 2 and state.title == "Named"


def test_a_v1_client_of_the_same_agent_still_gets_v1(tmp_path: Path) -> None:
    proxy, init = _initialized(f"sqlite://{tmp_path}/sessions.db", "--v2", version=1)
    with proxy:
        assert init["protocolVersion"] == 1 and "capabilities" not in init
        assert PROXY_METHODS | {"list"} <= set(init["agentCapabilities"]["sessionCapabilities"])
        assert init["agentInfo"]["name"] == "scripted-agent"
        assert proxy.close() == 0


@pytest.mark.parametrize("version", [1, 2])
def test_a_launchers_variables_are_never_the_agents_name(tmp_path: Path, version: int) -> None:
    """No name in the answer: the agent is named from its command - after ``env``'s options and variables (a
    variable's value once named the agent: ``env VAR=/a/b/value agent`` was recorded as ``value``)."""
    command = ["env", "-u", "NOT_SET", "AGENT_HOME=/opt/agents/value", sys.executable, AGENT, "--name", "", "--v2"]
    proxy, init = _initialized(f"sqlite://{tmp_path}/sessions.db", command=command, version=version)
    with proxy:
        assert init["_meta"]["acp-session-registry/proxy"]["agent"] == "proxy_agent"
        assert proxy.close() == 0
    assert "acp-registry proxy: recording as agent 'proxy_agent' (from command)" in proxy.stderr_lines


def test_serve_answers_a_v2_initialize_with_version_1(tmp_path: Path, run: Cli) -> None:
    """``serve`` speaks v1 (an agent answers with the highest version it has at or below the client's)."""
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": V2_INITIALIZE},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 7}},
    ]
    done = run("serve", store=tmp_path / "s.db", stdin="".join(json.dumps(line) + "\n" for line in lines))
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["result"]["protocolVersion"] for a in answers] == [1, 1]
    assert all("sessionCapabilities" in a["result"]["agentCapabilities"] for a in answers)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"protocolVersion": 2, "capabilities": {"session": {}}}, {"session": {"delete": {}, "title": {}}}),
        (
            {"protocolVersion": 2, "capabilities": {"session": {"delete": {"x": 1}}}},
            {"session": {"delete": {"x": 1}, "title": {}}},
        ),
        ({"protocolVersion": 2, "capabilities": {}}, {}),  # no sessions at all: nothing to add to
        ({"protocolVersion": 2}, None),
    ],
)
def test_what_is_added_to_a_v2_answer(answer: dict[str, Any], expected: dict[str, Any] | None) -> None:
    added: dict[str, Any] = {"sessionCapabilities": {"list": {}, "delete": {}, "title": {}}}
    versions.add(answer, added)
    assert answer.get("capabilities") == expected and "agentCapabilities" not in answer
    assert versions.advertised({"protocolVersion": 2, "capabilities": {"session": {"fork": {}}}}) == {
        "sessionCapabilities": {"fork": {}, "list": {}, "resume": {}, "close": {}}
    }
