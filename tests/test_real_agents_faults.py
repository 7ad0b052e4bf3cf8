"""A real agent behind the proxy in the middle of a turn: asking the client for permission, cancelled by the
client, killed by the OS; two real agents recording into one store; two editor windows on one agent and store.

claude-agent-acp sits in a turn for as long as the test wants: the LLM stub holds the model's answer to a prompt
that starts with ``(hold)``, and answers one that starts with ``(tool)`` with a Bash tool call that the agent
(in its "default" mode) asks the client to allow. Run with ``make test-agents``; each test skips with one line
when an agent it needs is not installed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from registry import SessionRegistry
from tests.agents import peers
from tests.agents.acp_client import AcpProcess
from tests.agents.llm_stub import HOLD, REPLY_PREFIX, TOOL, TOOL_COMMAND, TOOL_DONE
from tests.agents.scene import Scene, by_id, list_all, scene, text_prompt, wait_for_list

pytestmark = pytest.mark.real_agents


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (from every thread's /proc children list)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _held_turn(world: Scene, proxy: AcpProcess, session_id: str) -> int:
    """Sends a prompt the stub holds and waits until the agent is waiting for its model; the request's id."""
    assert world.stub is not None
    pending = proxy.send("session/prompt", {"sessionId": session_id, "prompt": text_prompt(f"{HOLD} a long task")})
    assert world.stub.held.wait(60), proxy.stderr_tail()
    return pending


def test_a_real_agent_asks_the_client_for_permission_through_the_proxy(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        proxy = world.proxy()
        sid = world.new_session(proxy)
        # session/set_mode is not the registry's: relayed as it is.
        assert proxy.call("session/set_mode", {"sessionId": sid, "modeId": "default"}) == {}
        made = world.project / TOOL_COMMAND.split()[-1]

        world.turn(proxy, sid, f"{TOOL} make the file")  # the client refuses (cancels) the permission request
        (asked,) = proxy.agent_requests
        assert asked["method"] == "session/request_permission"
        assert asked["params"]["sessionId"] == sid and asked["params"]["toolCall"]["toolCallId"] == "toolu_stub_1"
        assert not made.exists()  # the agent heard the refusal: the command did not run
        assert TOOL_DONE in proxy.text(sid)

        proxy.permission = "allow-once"
        world.turn(proxy, sid, f"{TOOL} make the file, allowed")
        assert len(proxy.agent_requests) == 2
        assert made.exists()  # the agent heard the client's choice through the proxy, and ran the command
        assert proxy.close() == 0, proxy.stderr_tail()
        assert not proxy.bad_lines, proxy.bad_lines
        with world.registry() as registry:
            (stored,) = registry.handle("session/list", {})["sessions"]
        assert stored["_meta"]["acp-session-registry/messageCount"] >= 2


def test_cancel_reaches_a_real_agent_in_the_middle_of_a_turn(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        proxy = world.proxy()
        sid = world.new_session(proxy)
        pending = _held_turn(world, proxy, sid)
        proxy.notify("session/cancel", {"sessionId": sid})  # a client notification, relayed to the agent
        answer = proxy.wait(pending, timeout=60)
        assert answer.get("result", {}).get("stopReason") == "cancelled", answer
        assert world.stub is not None
        world.stub.release.set()

        world.turn(proxy, sid, "Then something short")  # the session goes on after the cancel
        assert REPLY_PREFIX + "Then something short" in proxy.text(sid)
        listed = by_id(list_all(proxy))
        assert set(listed) == {sid}
        assert proxy.close() == 0, proxy.stderr_tail()
        with world.registry() as registry:
            (stored,) = registry.handle("session/list", {})["sessions"]
        assert stored["_meta"]["acp-session-registry/messageCount"] >= 2  # both turns, the cancelled one too


def test_a_real_agent_killed_in_the_middle_of_a_turn(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        proxy = world.proxy()
        sid = world.new_session(proxy)
        pending = _held_turn(world, proxy, sid)
        agents = _children(proxy.process.pid)
        assert agents, "the proxy has no child process"
        for pid in agents:
            os.kill(pid, signal.SIGKILL)

        answer = proxy.wait(pending, timeout=30)  # the pending request is answered, with an error
        assert "error" in answer, answer
        assert isinstance(answer["error"]["code"], int)
        assert "agent" in answer["error"]["message"].lower(), answer
        status = proxy.process.wait(30)
        assert status != 0
        assert not proxy.bad_lines, proxy.bad_lines  # stdout stayed JSON-RPC

        # What was recorded before the crash is there for the next proxy.
        again = world.proxy()
        assert sid in by_id(list_all(again))
        again.close()


def test_two_real_agents_record_into_one_store(tmp_path: Path) -> None:
    peers.FAST_AGENT.require()
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as claude:
        fast = peers.FAST_AGENT
        echo = AcpProcess(
            peers.proxy_command(claude.store_url, fast, name="fast-agent"), env=claude.env, cwd=claude.project
        )
        try:
            echo.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=120)
            proxy = claude.proxy()
            fast_sid = claude.new_session(echo)
            claude_sid = claude.new_session(proxy)
            claude.turn(echo, fast_sid, "Echo this")
            claude.turn(proxy, claude_sid, "Answer this")
            # In front of each agent, only that agent's sessions, with its own ids.
            assert set(by_id(list_all(echo))) == {fast_sid}
            assert set(by_id(list_all(proxy))) == {claude_sid}
            # A delete through one proxy cannot reach the other agent's session of the same native id space.
            assert echo.call("session/delete", {"sessionId": claude_sid}) == {}
            assert set(by_id(list_all(proxy))) == {claude_sid}
            assert echo.close() == 0 and proxy.close() == 0
        finally:
            echo.kill() if echo.process.poll() is None else None
        with SessionRegistry.open(claude.store_url, follow=False) as registry:
            ids = {s["sessionId"] for s in registry.handle("session/list", {})["sessions"]}
        assert ids == {f"fast-agent:{fast_sid}", f"claude-code:{claude_sid}"}


def test_two_editor_windows_on_one_real_agent_and_one_store(tmp_path: Path) -> None:
    # Two proxies in front of two fast-agent processes (one per window), same project, same store.
    with scene(tmp_path, peers.FAST_AGENT) as world:
        one = world.proxy(name="fast-agent")
        two = world.proxy(name="fast-agent")
        first = world.new_session(one)
        world.turn(one, first, "Window one work")
        second = world.new_session(two)
        world.turn(two, second, "Window two work")
        expected = [(second, "Window two work"), (first, "Window one work")]
        for window in (one, two):  # each window lists both, newest first, with their titles
            # The other window's proxy records on a thread of its own: its writes land a moment after its turn.
            listed = wait_for_list(
                window, lambda s: [(i["sessionId"], i.get("title")) for i in s] == expected, timeout=10
            )
            assert [(i["sessionId"], i.get("title")) for i in listed] == expected
        # fast-agent refuses to load a session another of its processes holds; its error reaches the client as is.
        params = {"sessionId": first, "cwd": str(world.project), "mcpServers": []}
        refused = two.request("session/load", params)["error"]
        assert refused["code"] == -32003 and first in refused["message"], refused
        assert one.close() == 0, one.stderr_tail()  # window one closes: its agent lets the session go
        world.load(two, first)
        assert "Window one work" in two.text(first)
        assert two.call("session/delete", {"sessionId": first}) == {}
        three = world.proxy(name="fast-agent")  # a window opened later sees the delete
        assert set(by_id(list_all(three))) == {second}
        assert two.close() == 0 and three.close() == 0
