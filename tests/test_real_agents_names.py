"""One agent, one name, its other projects, its first list, one title - in front of the real agents
(``make test-agents``): fast-agent (its passthrough model) is ``fast-agent`` however it is started and its sessions
of another folder are listed and open; mistral-vibe's past (from its own list) is whole on the first list;
claude-agent-acp's title reaches the client once. Offline against the LLM stub."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import peers
from tests.agents.scene import INITIALIZE, by_id, list_all, scene

pytestmark = pytest.mark.real_agents


def test_fast_agent_is_one_agent_with_or_without_agent_and_its_sessions_are_listed_once(tmp_path: Path) -> None:
    """The README's Zed settings start it with ``--agent fast-agent``, its ``agentInfo`` says ``fast-agent-acp``:
    both are ``fast-agent``, and a session made one way is the same session the other way."""
    with scene(tmp_path, peers.FAST_AGENT) as world:
        named = world.proxy(name="fast-agent")
        assert named.init_result["agentInfo"]["name"] == "fast-agent-acp"
        assert named.init_result["_meta"]["acp-session-registry/proxy"]["agent"] == "fast-agent"
        sid = world.new_session(named)
        world.turn(named, sid, "Plan the release notes")
        assert named.call("session/set_title", {"sessionId": sid, "title": "Release"}) == {"title": "Release"}
        assert named.close() == 0, named.stderr_tail()

        unnamed = world.proxy()
        assert unnamed.init_result["_meta"]["acp-session-registry/proxy"]["agent"] == "fast-agent"
        listed = by_id(list_all(unnamed))
        assert set(listed) == {sid} and listed[sid]["title"] == "Release"
        assert unnamed.call("session/delete", {"sessionId": sid}) == {}
        assert unnamed.close() == 0, unnamed.stderr_tail()

        again = world.proxy(name="fast-agent-acp")
        assert list_all(again) == []
        load = {"sessionId": sid, "cwd": str(world.project), "mcpServers": []}
        assert again.request("session/load", load)["error"]["code"] == -32002  # deleted under every name
        assert again.close() == 0, again.stderr_tail()
        with world.registry() as registry:
            assert [s.session_id for s in registry.list(archived="include").sessions] == []


def test_fast_agent_sessions_of_another_folder_are_listed_for_it_and_open(tmp_path: Path) -> None:
    """fast-agent keeps a session under its own cwd and lists it only when asked for that cwd: its past in another
    project is asked for per cwd the registry knows of, and a session made there through the proxy is offered after
    a restart and opens (with its cwd)."""
    with scene(tmp_path, peers.FAST_AGENT) as world:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        proxy = world.proxy()
        there = proxy.call("session/new", {"cwd": str(elsewhere), "mcpServers": []}, timeout=60)["sessionId"]
        world.turn(proxy, there, "Work in the other project")
        here = world.new_session(proxy)
        world.turn(proxy, here, "Work here")
        assert proxy.close() == 0, proxy.stderr_tail()

        # The agent alone, in the other project: a past session the registry never saw.
        direct = world.direct()
        past = direct.call("session/new", {"cwd": str(elsewhere), "mcpServers": []}, timeout=60)["sessionId"]
        world.turn(direct, past, "Made without the proxy")
        direct.close(timeout=5)

        again = world.proxy()
        listed = by_id(list_all(again))
        assert {here, there, past} <= set(listed), listed
        assert set(by_id(list_all(again, cwd=str(elsewhere)))) == {there, past}
        for sid in (there, past):
            params = {"sessionId": sid, "cwd": listed[sid]["cwd"], "mcpServers": []}
            assert again.call("session/load", params, timeout=60) is not None
        assert again.close() == 0, again.stderr_tail()


def test_mistral_vibe_first_list_holds_its_whole_past(tmp_path: Path) -> None:
    """mistral-vibe's past comes from its own ``session/list``: the first list, right after ``initialize``, waits
    for that one request and holds all of it, and each listed session opens."""
    with scene(tmp_path, peers.MISTRAL_VIBE, stub=True) as world:
        past = world.past(*(f"Past task {n}" for n in range(14)))
        proxy = world.proxy()
        assert proxy.init_result["_meta"]["acp-session-registry/proxy"]["agent"] == "mistral-vibe"
        first = proxy.call("session/list", {}, timeout=120)
        assert first["_meta"]["acp-session-registry/proxy"]["history"] == "ready"
        assert {s["sessionId"] for s in first["sessions"]} == set(past)
        assert by_id(first["sessions"])[past[0]]["title"] == "Past task 0"
        world.load(proxy, past[0])
        assert proxy.close() == 0, proxy.stderr_tail()


def test_claude_agent_acp_title_reaches_the_client_once_after_a_prompts_answer(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        proxy = world.proxy()
        sid = world.new_session(proxy)
        world.turn(proxy, sid, "Fix the login bug")
        # claude-agent-acp titles the session by its first prompt, with its updatedAt, a moment after the answer
        update = proxy.wait_for_update(sid, "session_info_update", timeout=30, titled=True)
        assert update.get("title") == "Fix the login bug", update
        world.turn(proxy, sid, "And the tests")
        proxy.call("session/list", {})
        titles = [u["title"] for u in proxy.updates(sid, "session_info_update") if "title" in u]
        assert titles == ["Fix the login bug"], proxy.updates(sid, "session_info_update")
        assert proxy.close() == 0, proxy.stderr_tail()


def test_a_session_made_before_initialize_is_recorded_under_the_agents_name(tmp_path: Path) -> None:
    """fast-agent answers ``session/new`` before ``initialize``; the session is ``fast-agent``'s, not recorded
    under the command's name."""
    with scene(tmp_path, peers.FAST_AGENT) as world:
        proxy = world.proxy(initialize=False)
        early = proxy.call("session/new", {"cwd": str(world.project), "mcpServers": []}, timeout=120)["sessionId"]
        init = proxy.call("initialize", INITIALIZE, timeout=120)
        assert init["_meta"]["acp-session-registry/proxy"]["agent"] == "fast-agent"
        world.turn(proxy, early, "Made early")
        assert proxy.close() == 0, proxy.stderr_tail()
        with world.registry() as registry:
            assert [s.session_id for s in registry.list().sessions] == [f"fast-agent:{early}"]
