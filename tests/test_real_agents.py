"""``acp-registry proxy`` in front of real agents installed from PyPI and npm (``make agents``), offline.

fast-agent (``--model passthrough``, no LLM at all) titles its sessions itself; gemini-cli (talking to the local
LLM stub) has no ``session/list`` of its own and never titles a session. Each test runs real processes with a
fresh fake HOME and skips with one line when its agent is not installed. Run them with ``make test-agents``
(``pytest -m real_agents``); ``make test`` leaves them out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import peers
from tests.agents.acp_client import AcpProcess
from tests.agents.llm_stub import REPLY_PREFIX
from tests.agents.scene import by_id, list_all, scene, wait_for_list
from tests.waiting import wait_until

pytestmark = pytest.mark.real_agents


def _capabilities(init: dict[str, object]) -> dict[str, object]:
    caps = init["agentCapabilities"]
    assert isinstance(caps, dict)
    session_caps = caps.get("sessionCapabilities")
    assert isinstance(session_caps, dict)
    return session_caps


def test_fast_agent_turn_titles_list_load_and_delete_through_the_proxy(tmp_path: Path) -> None:
    with scene(tmp_path, peers.FAST_AGENT) as world:
        proxy = world.proxy(name="fast-agent")
        # The agent's own answer, with list and delete added (fast-agent has list and resume, no delete).
        assert proxy.init_result["agentInfo"]["name"] == "fast-agent-acp"
        caps = _capabilities(proxy.init_result)
        assert {"list", "delete", "resume"} <= set(caps)
        assert proxy.init_result["agentCapabilities"]["loadSession"] is True

        sid = world.new_session(proxy)
        world.turn(proxy, sid, "Plan the release notes")
        assert proxy.text(sid) == "Plan the release notes"  # passthrough echoes the prompt
        infos = proxy.titles(sid)
        assert len(infos) == 1, infos  # the agent's own title, passed on once, no second one from the proxy
        assert infos[0]["title"] == "Plan the release notes"

        other = world.new_session(proxy)
        world.turn(proxy, other, "Scratch idea")
        listed = by_id(list_all(proxy))
        assert set(listed) == {sid, other}  # the agent's own ids on the wire
        assert listed[sid]["cwd"] == str(world.project)
        assert listed[sid]["title"] == "Plan the release notes"
        assert listed[sid]["updatedAt"].endswith("Z")  # fast-agent's own updatedAt has no zone; the list's is UTC
        assert list_all(proxy, cwd=str(world.project) + "/") == list_all(proxy, cwd=str(world.project))

        # fast-agent cannot delete: the proxy hides the session itself and answers {}.
        assert proxy.call("session/delete", {"sessionId": other}) == {}
        assert set(by_id(list_all(proxy))) == {sid}
        assert proxy.close() == 0, proxy.stderr_tail()  # client EOF: the proxy ends the agent and exits 0
        assert not proxy.bad_lines, proxy.bad_lines

        with world.registry() as registry:  # what was recorded, as the store holds it
            stored = {s["sessionId"]: s for s in registry.handle("session/list", {})["sessions"]}
        assert set(stored) == {f"fast-agent:{sid}"}
        assert stored[f"fast-agent:{sid}"]["title"] == "Plan the release notes"

        # A second proxy process on the same store and home: the session is listed, loads, and takes a new turn.
        again = world.proxy(name="fast-agent")
        assert set(by_id(list_all(again))) == {sid}  # the delete held across the restart
        world.load(again, sid)
        assert "Plan the release notes" in again.text(sid, "user_message_chunk")
        assert "Plan the release notes" in again.text(sid)
        assert len(again.titles(sid)) == 1  # the agent's replayed title, once
        before = by_id(list_all(again))[sid]["updatedAt"]
        world.turn(again, sid, "Add the migration guide")
        after = by_id(list_all(again))[sid]
        assert after["updatedAt"] > before
        assert after["title"] == "Plan the release notes"  # the first title stays; fast-agent keeps it too
        assert again.close() == 0, again.stderr_tail()


def test_gemini_sessions_are_listed_titled_and_deleted_by_the_proxy(tmp_path: Path) -> None:
    with scene(tmp_path, peers.GEMINI, stub=True) as world:
        assert world.stub is not None
        direct = world.direct()
        assert direct.request("session/list", {})["error"]["code"] == -32601  # gemini has no list of its own
        direct.kill()

        proxy = world.proxy()
        caps = _capabilities(proxy.init_result)
        assert {"list", "delete"} <= set(caps)
        assert proxy.init_result["agentInfo"]["name"] == "gemini-cli"
        assert proxy.call("authenticate", {"methodId": "gemini-api-key"}) == {}  # passed through to gemini

        first = world.new_session(proxy)
        second = world.new_session(proxy)
        assert {first, second} <= set(by_id(list_all(proxy)))  # listed right after session/new
        world.turn(proxy, first, "Explain the build graph")
        assert proxy.text(first) == REPLY_PREFIX + "Explain the build graph"  # the stub's answer, relayed
        assert world.stub.model_requests()  # gemini asked the (stub) model

        # gemini never titles a session: the proxy titles it from the first prompt and says so, once.
        info = proxy.wait_for_update(first, "session_info_update", timeout=10, titled=True)
        assert info["title"] == "Explain the build graph"
        listed = by_id(list_all(proxy))
        assert listed[first]["title"] == "Explain the build graph"
        assert listed[first]["updatedAt"] >= listed[second]["updatedAt"]
        assert next(s["sessionId"] for s in list_all(proxy)) == first  # the latest activity first

        # gemini answers session/delete with -32601; through the proxy it is {} and the session is gone.
        assert proxy.call("session/delete", {"sessionId": second}) == {}
        assert second not in by_id(list_all(proxy))
        assert proxy.close() == 0, proxy.stderr_tail()
        assert len(proxy.titles(first)) == 1

        # A restart (the proxy also imports gemini's chat files): one entry per session, the delete held.
        again = world.proxy()
        sessions = by_id(wait_for_list(again, lambda s: first in by_id(s), timeout=30))
        assert first in sessions and second not in sessions
        assert sessions[first]["title"] == "Explain the build graph"
        with world.registry() as registry:
            ids = {s["sessionId"] for s in registry.handle("session/list", {})["sessions"]}
        assert f"gemini:{first}" in ids and f"gemini:{second}" not in ids
        assert again.close() == 0, again.stderr_tail()


def test_gemini_lists_only_the_sessions_the_client_made(tmp_path: Path) -> None:
    # gemini-cli writes a chat file of its own when it authenticates (session-<time>-<id8>.jsonl holding only its
    # "<session_context>" setup message): not a session anyone made, and gemini-cli's own session listing skips it
    # (0.61.0 lists a chat only when it has a "resumable" message: a user message not starting with "/", "?",
    # "<session_context>" or "<hook_context>", or a model message with content). The proxy's list (live records
    # plus the imported history) must not show it either, let alone titled "<session_context> This is the...".
    with scene(tmp_path, peers.GEMINI, stub=True) as world:
        proxy = world.proxy()
        assert proxy.call("authenticate", {"methodId": "gemini-api-key"}) == {}
        made = {world.new_session(proxy), world.new_session(proxy)}
        world.turn(proxy, sorted(made)[0], "Explain the build graph")
        assert proxy.close() == 0, proxy.stderr_tail()
        chats = list((world.home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
        assert len(chats) > len(made)  # gemini's own extra chat file is there to be misread

        again = world.proxy()
        sessions = by_id(list_all(again))  # the first list waits for the history import
        # The untouched session is not offered: gemini-cli keeps only a chat with a resumable message.
        assert set(sessions) == {sorted(made)[0]}, [(s["sessionId"], s.get("title")) for s in sessions.values()]
        assert not any(str(s.get("title", "")).startswith("<") for s in sessions.values())
        assert again.close() == 0, again.stderr_tail()


def test_fast_agent_sessions_from_before_the_proxy_are_listed_from_its_own_list(tmp_path: Path) -> None:
    # No importer reads fast-agent's files (<cwd>/.fast-agent/sessions/); the proxy walks the agent's own list.
    with scene(tmp_path, peers.FAST_AGENT) as world:
        direct = world.direct()
        old = world.new_session(direct)
        world.turn(direct, old, "Before any proxy")
        assert direct.close() == 0

        proxy = world.proxy(name="fast-agent")
        sessions = by_id(wait_for_list(proxy, lambda s: old in by_id(s), timeout=30))
        assert set(sessions) == {old}
        assert sessions[old]["title"] == "Before any proxy"
        assert sessions[old]["cwd"] == str(world.project)
        world.load(proxy, old)  # the id the proxy lists is one the agent loads
        assert "Before any proxy" in proxy.text(old)
        world.turn(proxy, old, "And after")
        assert proxy.close() == 0, proxy.stderr_tail()

        again = world.proxy(name="fast-agent")
        assert set(by_id(wait_for_list(again, lambda s: old in by_id(s), timeout=30))) == {old}  # still one
        assert again.close() == 0, again.stderr_tail()


def test_codex_acp_history_listed_and_loaded_and_its_new_turns_recorded(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CODEX_ACP, stub=True) as world:
        direct = world.direct()
        assert direct.call("authenticate", {"methodId": "codex-api-key"}) == {}
        old = world.new_session(direct)
        world.turn(direct, old, "Port the scheduler")
        direct.kill()  # codex-acp does not end on EOF
        assert list((world.home / ".codex" / "sessions").rglob(f"rollout-*-{old}.jsonl"))

        proxy = world.proxy()
        assert {"list", "delete"} <= set(_capabilities(proxy.init_result))  # codex-acp has list, not delete
        assert proxy.call("authenticate", {"methodId": "codex-api-key"}) == {}  # passed through
        sessions = by_id(wait_for_list(proxy, lambda s: old in by_id(s), timeout=30))
        assert set(sessions) == {old}
        assert sessions[old]["title"] == "Port the scheduler"
        assert sessions[old]["cwd"] == str(world.project)
        world.load(proxy, old)  # the id listed is one codex-acp loads: it replays the turn
        assert "Port the scheduler" in proxy.text(old, "user_message_chunk")

        new = world.new_session(proxy)
        world.turn(proxy, new, "Write the migration")
        assert REPLY_PREFIX + "Write the migration" in proxy.text(new)
        listed = list_all(proxy)
        assert [s["sessionId"] for s in listed] == [new, old]
        assert by_id(listed)[new]["title"] == "Write the migration"
        assert proxy.call("session/delete", {"sessionId": old}) == {}  # codex-acp cannot delete: the proxy hides it
        assert proxy.close() == 0, proxy.stderr_tail()

        again = world.proxy()
        # the history import runs again in the background; the deleted session must stay deleted once it is done
        wait_until(lambda: _history(again) == "ready", 120, "the history import to finish")
        assert set(by_id(list_all(again))) == {new}
        with world.registry() as registry:
            stored = {s["sessionId"] for s in registry.handle("session/list", {})["sessions"]}
        assert stored == {f"codex:{new}"}
        again.close()


def _history(proxy: AcpProcess) -> str:
    """Where the proxy's import of the agent's history is (``importing``, ``ready``), as its list says."""
    state: str = proxy.call("session/list", {})["_meta"]["acp-session-registry/proxy"]["history"]
    return state
