"""``acp-registry proxy`` in front of claude-agent-acp and claude-code-acp (npm), offline against the LLM stub.

Both keep their history in ``~/.claude/projects/<munged cwd>/<id>.jsonl`` (here in a fake HOME). The sessions
the agent had before any proxy ran are made by running the agent alone first; then the proxy, on a fresh store,
must list them with the agent's own ids, load them (the agent replays them) and delete them: claude-agent-acp
deletes for real (the proxy forwards), claude-code-acp cannot (the proxy hides the session for good). Run with
``make test-agents``; each test skips with one line when its agent is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import peers
from tests.agents.acp_client import AcpProcess
from tests.agents.llm_stub import REPLY_PREFIX
from tests.agents.scene import Scene, by_id, list_all, scene, wait_for_list

pytestmark = pytest.mark.real_agents


def _history(world: Scene, *prompts: str) -> list[str]:
    """Sessions made by the agent alone (no proxy), one real turn each, answered by the stub; their ids."""
    return world.past(*prompts, check=_answered)


def _answered(agent: AcpProcess, sid: str, text: str) -> None:
    assert agent.text(sid).startswith(REPLY_PREFIX + text)


def _transcripts(world: Scene) -> dict[str, Path]:
    return {path.stem: path for path in (world.home / ".claude" / "projects").glob("*/*.jsonl")}


def _history_through_the_proxy(world: Scene, delete_forwarded: bool) -> None:
    kept, doomed = _history(world, "Refactor the parser", "Write the changelog")
    assert {kept, doomed} <= set(_transcripts(world))

    proxy = world.proxy()
    caps = proxy.init_result["agentCapabilities"]["sessionCapabilities"]
    assert {"list", "delete"} <= set(caps)
    # The agent's past, listed from the proxy's store (imported in the background) under the agent's own ids.
    sessions = by_id(wait_for_list(proxy, lambda s: {kept, doomed} <= set(by_id(s))))
    assert {kept, doomed} <= set(sessions), sessions
    assert sessions[kept]["cwd"] == str(world.project)
    assert sessions[kept]["title"] == "Refactor the parser"

    # session/load goes to the agent, which replays the turn it had before the proxy existed.
    world.load(proxy, kept)
    assert "Refactor the parser" in proxy.text(kept, "user_message_chunk")
    assert REPLY_PREFIX + "Refactor the parser" in proxy.text(kept)
    before = by_id(list_all(proxy))[kept]["updatedAt"]
    world.turn(proxy, kept, "Now add tests")
    assert REPLY_PREFIX + "Now add tests" in proxy.text(kept)
    assert by_id(list_all(proxy))[kept]["updatedAt"] > before

    assert proxy.call("session/delete", {"sessionId": doomed}) == {}
    assert doomed not in by_id(list_all(proxy))
    assert (doomed not in _transcripts(world)) is delete_forwarded  # really deleted only when the agent can
    assert proxy.close() == 0, proxy.stderr_tail()
    assert not proxy.bad_lines, proxy.bad_lines

    # One session per conversation in the store, named as the importers name Claude Code's sessions.
    with world.registry() as registry:
        stored = {s["sessionId"] for s in registry.handle("session/list", {})["sessions"]}
    assert stored == {f"claude-code:{kept}"}

    # A restart re-reads the history: the deleted session stays deleted, the kept one is listed once.
    again = world.proxy()
    sessions = by_id(wait_for_list(again, lambda s: kept in by_id(s)))
    assert set(sessions) == {kept}
    again.close()


def test_claude_agent_acp_history_listed_loaded_and_delete_forwarded(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        _history_through_the_proxy(world, delete_forwarded=True)
        # The agent itself agrees: its own list no longer has the deleted session.
        direct = world.direct()
        kept = {p.stem for p in _transcripts(world).values()}
        assert len(kept) == 1
        assert {s["sessionId"] for s in direct.call("session/list", {})["sessions"]} == kept
        direct.kill()


def test_claude_code_acp_history_listed_loaded_and_deleted_by_the_proxy(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_CODE_ACP, stub=True) as world:
        direct = world.direct()
        assert "delete" not in direct.init_result["agentCapabilities"]["sessionCapabilities"]
        direct.kill()
        _history_through_the_proxy(world, delete_forwarded=False)


def test_claude_agent_acp_new_turn_through_the_proxy_is_recorded(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        proxy = world.proxy()
        sid = world.new_session(proxy)
        world.turn(proxy, sid, "Summarise the open issues")
        assert proxy.text(sid).startswith(REPLY_PREFIX + "Summarise the open issues")
        listed = by_id(list_all(proxy))
        assert set(listed) == {sid}
        assert listed[sid]["title"] == "Summarise the open issues"
        # claude-agent-acp titles the session itself, or the proxy does from the prompt: the client hears it once.
        titles = [u.get("title") for u in proxy.updates(sid, "session_info_update") if "title" in u]
        assert titles == ["Summarise the open issues"], titles
        assert proxy.call("session/close", {"sessionId": sid}) == {}  # forwarded: claude-agent-acp has close
        assert proxy.close() == 0, proxy.stderr_tail()
        with world.registry() as registry:
            stored = registry.handle("session/list", {})["sessions"]
        assert [s["sessionId"] for s in stored] == [f"claude-code:{sid}"]
        assert stored[0]["_meta"]["acp-session-registry/messageCount"] >= 1


def test_claude_agent_acp_fork_and_resume_through_the_proxy(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        proxy = world.proxy()
        assert "fork" in proxy.init_result["agentCapabilities"]["sessionCapabilities"]  # the agent's, kept
        source = world.new_session(proxy)
        world.turn(proxy, source, "Original work")
        params = {"sessionId": source, "cwd": str(world.project), "mcpServers": []}
        fork = proxy.call("session/fork", params)["sessionId"]  # forwarded: the agent forks its own session
        assert fork != source
        world.turn(proxy, fork, "Forked work")
        assert REPLY_PREFIX + "Forked work" in proxy.text(fork)
        assert set(by_id(list_all(proxy))) == {source, fork}  # the fork is recorded under the agent's new id
        assert proxy.call("session/resume", params)["sessionId"] == source
        world.turn(proxy, source, "Back to the original")
        listed = list_all(proxy)
        assert [s["sessionId"] for s in listed] == [source, fork]  # the resumed session's turn is the latest
        # Ids that travel: the fork's parent by the id the client knows; the id the command line prints opens.
        assert by_id(listed)[fork]["_meta"]["acp-session-registry/parent"]["sessionId"] == source
        printed = {"sessionId": f"claude-code:{source}", "cwd": str(world.project), "mcpServers": []}
        assert proxy.call("session/resume", printed)["sessionId"] == source
        assert proxy.close() == 0, proxy.stderr_tail()
        with world.registry() as registry:
            stored = {s["sessionId"] for s in registry.handle("session/list", {})["sessions"]}
            forked = registry.state(f"claude-code:{fork}")
        assert stored == {f"claude-code:{source}", f"claude-code:{fork}"}
        assert forked is not None and forked.parent is not None  # recorded as a fork of its source
        assert forked.parent.session_id == f"claude-code:{source}"
