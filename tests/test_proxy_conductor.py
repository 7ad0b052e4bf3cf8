"""``acp-registry proxy`` without a command, as one link of a conductor's chain, in every published form.

A conductor stand-in (``tests/conductor_standin.py``: the routing rules of ``@thinkwell/conductor`` 0.5.7 and of
the Proxy Chains RFD / Rust conductor, as JSON-RPC lines) starts the registry's proxy and the scripted agent
(``tests/proxy_agent.py``) as real processes; the test is the client. What the standalone proxy does in front of an
agent it starts, it does here in front of the successor the conductor reaches for it. The same chain under the
real ``@thinkwell/conductor`` from npm, with real agents, is ``tests/test_real_agents_conductor.py``.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from registry.model import SessionState
from registry.proxy.chain import NOT_A_PROXY
from registry.service import SessionRegistry
from tests.conductor_standin import FORMS, StandIn
from tests.proxy_wire import AGENT, ROOT, SIGTERM_IN_CLOSE, ProxyProcess, prompt
from tests.waiting import wait_until

FIXTURES = Path(__file__).with_name("fixtures") / "agents"
ENVELOPES = {
    "thinkwell": {"_proxy/successor/request", "_proxy/successor/notification"},
    "proxy/initialize": {"proxy/successor"},
    "_proxy/initialize": {"_proxy/successor"},
}


def link_command(url: str, *extra: str) -> list[str]:
    """The registry as a chain link: no agent command."""
    return [sys.executable, "-m", "registry.cli", "proxy", "--store", url, *extra]


def agent_command(*args: str) -> list[str]:
    return [sys.executable, AGENT, *args]


def chained(form: str, url: str, *agent_args: str, cwd: Path) -> tuple[StandIn, str]:
    """A stand-in conductor with the registry and the scripted agent, initialized, with one new session in cwd."""
    conductor = StandIn(form, [link_command(url)], agent_command(*agent_args))
    conductor.result(0, "initialize", {"protocolVersion": 1})
    session = conductor.result(1, "session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
    return conductor, session


def _when_history_read(conductor: StandIn) -> dict[str, Any]:
    """A ``session/list`` answered once the link has read the agent's past (in the background, so polled; the
    bound is a deadline only)."""
    ids = iter(range(100, 1_000_000))

    def read() -> dict[str, Any] | None:
        listed: dict[str, Any] = conductor.result(next(ids), "session/list", {})
        history = listed["_meta"]["acp-session-registry/proxy"]["history"]
        assert history in ("importing", "ready"), listed["_meta"]
        return listed if history == "ready" else None

    return wait_until(read, 60, "the agent's past to be read")


def _state(url: str, session_id: str) -> SessionState:
    """What the registry at ``url`` holds of a session (it must hold it)."""
    with SessionRegistry.open(url) as registry:
        state = registry.state(session_id)
    assert state is not None, session_id
    return state


def _received(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("form", FORMS)
def test_initialize_through_the_chain_adds_the_registrys_methods_and_keeps_the_agents_answer(
    form: str, url: str, tmp_path: Path
) -> None:
    log = tmp_path / "agent.log"
    with StandIn(form, [link_command(url)], agent_command("--log", str(log))) as conductor:
        result = conductor.result(0, "initialize", {"protocolVersion": 1, "_meta": {"editor": 1}})
        capabilities = result["agentCapabilities"]["sessionCapabilities"]
        assert {"resume", "list", "delete", "title", "archive", "status"} <= set(capabilities)
        assert result["authMethods"] == [{"id": "scripted", "name": "scripted"}]
        assert result["_meta"]["scripted"] is True
        assert result["_meta"]["acp-session-registry/proxy"]["agent"] == "scripted-agent"
        assert ("proxy" in result["_meta"]) is (form == "thinkwell")  # what that conductor checks for
        conductor.send({"method": "session/cancel", "params": {"sessionId": "none"}})
        conductor.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert conductor.close() == 0
    initialize, cancel, new = _received(log)
    assert [cancel["method"], new["method"]] == ["session/cancel", "session/new"]
    assert initialize["method"] == "initialize"  # the agent is told it is the agent, in every form
    meta = initialize["params"]["_meta"]  # type: ignore[index]
    assert meta == ({"editor": 1, "proxy": True} if form == "thinkwell" else {"editor": 1})
    sent = {m["method"] for m in conductor.wire[0] if "method" in m}
    assert sent == ENVELOPES[form]  # the successor was reached only in the form's envelopes


@pytest.mark.parametrize("form", FORMS)
def test_a_turn_through_the_chain_is_recorded_titled_and_listed(form: str, url: str, tmp_path: Path) -> None:
    conductor, session = chained(form, url, cwd=tmp_path)
    with conductor:
        assert conductor.result(2, "session/prompt", prompt(session, "hello there")) == {"stopReason": "end_turn"}
        (listed,) = conductor.result(3, "session/list", {})["sessions"]
        assert listed["sessionId"] == session and listed["title"] == "hello there"
        assert [c["content"]["text"] for c in conductor.updates("agent_message_chunk")] == ["hello there"]
        conductor.result(4, "session/prompt", prompt(session, "title From the agent"))
        conductor.result(5, "session/list", {})
        assert conductor.titles() == ["hello there", "From the agent"]  # the proxy's, then the agent's: each once
        assert conductor.close() == 0
    state = _state(url, f"scripted-agent:{session}")
    assert state.messages == 4 and state.title == "From the agent"


@pytest.mark.parametrize("form", FORMS)
def test_the_agents_requests_mid_turn_reach_the_client_and_its_answers_the_agent(
    form: str, url: str, tmp_path: Path
) -> None:
    conductor, session = chained(form, url, cwd=tmp_path)
    with conductor:
        conductor.send({"id": 2, "method": "session/prompt", "params": prompt(session, "permission")})
        asked = conductor.wait_request("session/request_permission")
        assert asked["params"]["toolCall"] == {"toolCallId": "t1"}
        conductor.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        assert conductor.pump(2)["result"] == {"stopReason": "end_turn"}
        (echo,) = conductor.updates("agent_message_chunk")
        assert json.loads(echo["content"]["text"])["result"] == {"outcome": {"outcome": "cancelled"}}
        assert conductor.close() == 0


@pytest.mark.parametrize("form", FORMS)
def test_a_cancel_request_names_the_links_envelope(form: str, url: str, tmp_path: Path) -> None:
    conductor, session = chained(form, url, cwd=tmp_path)
    with conductor:
        conductor.send({"id": 2, "method": "session/prompt", "params": prompt(session, "slow 20")})
        # Neither published conductor translates a $/cancel_request; one that does gives the link the id it gave
        # the prompt. The client's own id means nothing to the link: that cancel is dropped, not passed on.
        for named in (conductor.conductor_id(2), 2):
            line = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": named}}
            conductor.send(json.dumps(line).encode())
        conductor.send({"method": "session/cancel", "params": {"sessionId": session}})
        assert conductor.pump(2)["result"] == {"stopReason": "cancelled"}
        assert conductor.close() == 0
    wire = conductor.wire[0]  # what the link wrote to the conductor
    (envelope,) = [m for m in wire if m.get("params", {}).get("method") == "session/prompt"]
    (cancel,) = [m for m in wire if m.get("params", {}).get("method") == "$/cancel_request"]
    assert cancel["params"]["params"] == {"requestId": envelope["id"]}


@pytest.mark.parametrize("form", FORMS)
def test_the_session_surface_and_a_delete_the_agent_is_told_of(form: str, url: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    conductor, session = chained(form, url, "--delete", "--log", str(log), cwd=tmp_path)
    with conductor:
        assert conductor.result(2, "session/set_title", {"sessionId": session, "title": "Mine"}) == {"title": "Mine"}
        assert conductor.result(3, "session/archive", {"sessionId": session}) == {}
        assert conductor.result(4, "session/list", {})["sessions"] == []
        (archived,) = conductor.result(5, "session/list", {"archived": "only"})["sessions"]
        assert archived["title"] == "Mine" and archived["archived"] is True
        assert conductor.result(6, "session/status", {"sessionId": session}) == {"status": "saved"}
        assert conductor.result(7, "session/delete", {"sessionId": session}) == {}
        assert conductor.result(8, "session/list", {"archived": "include"})["sessions"] == []
        assert conductor.call(9, "session/list", {"cursor": "not-a-cursor"})["error"]["code"] == -32602
        assert conductor.close() == 0
    methods = [m.get("method") for m in _received(log)]
    assert "session/delete" in methods  # forwarded: the agent advertises delete
    assert not {"session/set_title", "session/archive", "session/status"} & set(methods)  # the registry's own


@pytest.mark.parametrize("form", FORMS)
def test_the_agents_past_from_its_own_list_through_the_chain(form: str, url: str, tmp_path: Path) -> None:
    past = tmp_path / "past.json"
    past.write_text(json.dumps([{"sessionId": "old-1", "cwd": str(tmp_path), "title": "From before"}]))
    conductor, session = chained(form, url, "--list", "--past", str(past), cwd=tmp_path)
    with conductor:
        listed = _when_history_read(conductor)
        assert {s["sessionId"]: s.get("title") for s in listed["sessions"]} == {session: None, "old-1": "From before"}
        assert conductor.close() == 0


def test_the_agents_past_from_its_history_files_through_the_chain(url: str, tmp_path: Path) -> None:
    """Named claude-code (``--agent``), the link imports ``~/.claude`` in the background, as standalone."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-code", home / ".claude")
    env = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    command = link_command(url, "--agent", "claude-code")
    with StandIn("proxy/initialize", [command], agent_command(), env=env) as conductor:
        meta = conductor.result(0, "initialize", {"protocolVersion": 1})["_meta"]["acp-session-registry/proxy"]
        assert meta["agent"] == "claude-code"
        listed = _when_history_read(conductor)
        assert listed["sessions"] and all(":" not in s["sessionId"] for s in listed["sessions"])  # the agent's ids
        assert conductor.close() == 0


@pytest.mark.parametrize("form", FORMS)
def test_two_registries_in_one_chain_each_record_the_conversation(form: str, tmp_path: Path) -> None:
    first, second = f"sqlite://{tmp_path}/first.db", f"sqlite://{tmp_path}/second.db"
    proxies = [link_command(first), link_command(second, "--agent", "behind")]
    with StandIn(form, proxies, agent_command()) as conductor:
        conductor.result(0, "initialize", {"protocolVersion": 1})
        session = conductor.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert conductor.result(2, "session/prompt", prompt(session, "through two")) == {"stopReason": "end_turn"}
        (listed,) = conductor.result(3, "session/list", {})["sessions"]  # the first registry answers
        assert listed["sessionId"] == session
        assert [c["content"]["text"] for c in conductor.updates("agent_message_chunk")] == ["through two"]
        assert conductor.close() == 0
    states = [_state(url, f"{agent}:{session}") for url, agent in ((first, "scripted-agent"), (second, "behind"))]
    assert [(state.messages, state.title) for state in states] == [(2, "through two")] * 2


@pytest.mark.parametrize("form", FORMS)
def test_faults_the_conductors_garbage_the_agents_errors_and_the_chain_ending_mid_turn(
    form: str, url: str, tmp_path: Path
) -> None:
    cut_short = b'{"jsonrpc": "2.0", "id": 41, "method": '
    conductor, session = chained(form, url, cwd=tmp_path)
    with conductor:
        conductor.send(cut_short)
        assert conductor.pump(41)["error"]["code"] == -32700  # serve's answer; the conversation goes on
        assert conductor.call(42, "session/prompt", prompt(session, "error"))["error"]["code"] == -32603
        conductor.send({"id": 43, "method": "session/prompt", "params": prompt(session, "crash")})
        # The agent dies mid-turn; the conductor ends the chain (as both do), so the proxy's client has gone.
        assert conductor.close() == 0
    assert _state(url, f"scripted-agent:{session}").messages == 1  # the turn answered with an error: the prompt


@pytest.mark.parametrize("form", FORMS)
def test_a_sigterm_while_the_link_closes_does_not_cut_the_recorders_writes_short(
    form: str, url: str, tmp_path: Path
) -> None:
    """@thinkwell/conductor closes a component's stdin and sends SIGTERM 250 ms later: the link's handler stays
    until ``close`` has written what the recorder holds."""
    link = [sys.executable, "-c", SIGTERM_IN_CLOSE, *link_command(url)[3:]]
    with StandIn(form, [link], agent_command()) as conductor:
        conductor.result(0, "initialize", {"protocolVersion": 1})
        session = conductor.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert conductor.result(2, "session/prompt", prompt(session, "kept")) == {"stopReason": "end_turn"}
        assert conductor.close() == 0
    state = _state(url, f"scripted-agent:{session}")
    assert state.messages == 2 and state.title == "kept"


def test_a_plain_initialize_is_refused_and_the_link_exits_2(url: str) -> None:
    with ProxyProcess(link_command(url)) as link:
        answer = link.call(0, "initialize", {"protocolVersion": 1})
        assert answer["error"] == {"code": -32600, "message": NOT_A_PROXY}
        assert link.proc.wait(20) == 2
        assert any("acp-registry proxy -- COMMAND" in line for line in link.stderr_lines)


def test_the_docs_setting_starts_the_chain_host_with_the_registry_first_and_an_agent_last() -> None:
    page = (ROOT / "docs" / "conductor.md").read_text()
    (block,) = re.findall(r"^```jsonc\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    (entry,) = json.loads(block)["agent_servers"].values()
    assert entry["command"] == "node"
    host, *components = entry["args"]
    assert host.endswith("/conductor_chain.mjs") and (ROOT / "examples" / "conductor_chain.mjs").is_file()
    registry, *_, agent = [shlex.split(component) for component in components]
    assert registry[0].endswith("/acp-registry") and registry[1] == "proxy" and "--" not in registry
    usage = subprocess.run(
        [sys.executable, "-m", "registry.cli", "proxy", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert all(option in usage for option in registry[2:] if option.startswith("--"))
    assert agent[0].startswith("/")  # Zed needs absolute paths
