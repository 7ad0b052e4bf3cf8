"""The proxy's list is the agent's truth, in front of real agents (``make test-agents``): claude-agent-acp keeps a
session only once it had a turn and deletes for real; claude-code-acp keeps the same files and cannot delete;
fast-agent titles its sessions itself. Offline against the LLM stub (fast-agent: its passthrough model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from events.memory import MemoryStore
from registry.importers import Importer, sources
from registry.service import SessionRegistry
from tests.agents import peers
from tests.agents.acp_client import RpcError
from tests.agents.llm_stub import REPLY_PREFIX
from tests.agents.scene import by_id, list_all, scene

pytestmark = pytest.mark.real_agents


def _refused(call: object) -> int | None:
    try:
        assert callable(call)
        call()
    except RpcError as exc:
        return exc.code
    return None


def test_claude_agent_acp_its_past_on_the_first_list_and_no_session_it_did_not_keep(tmp_path: Path) -> None:
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        past = world.past("Refactor the parser", "Write the changelog")
        proxy = world.proxy()
        first = proxy.call("session/list", {})  # right after initialize: the first list waits for the past
        assert first["_meta"]["acp-session-registry/proxy"]["history"] == "ready"
        assert set(past) <= {s["sessionId"] for s in first["sessions"]}

        untouched = world.new_session(proxy)
        talked = world.new_session(proxy)
        world.turn(proxy, talked, "Explain the build")
        assert {untouched, talked} <= set(by_id(list_all(proxy)))  # both live on this connection
        assert proxy.close() == 0, proxy.stderr_tail()

        again = world.proxy()
        listed = by_id(list_all(again))
        assert set(listed) == {*past, talked}  # claude-agent-acp forgot the untouched one; it is not offered
        load = {"sessionId": untouched, "cwd": str(world.project), "mcpServers": []}
        assert _refused(lambda: again.call("session/load", load)) == -32002
        for listed_id in listed:  # what is listed opens, after the restart: the past and the one talked to
            world.load(again, listed_id)
        assert again.close() == 0, again.stderr_tail()


def test_one_turn_one_count_when_the_import_overlaps_a_live_turn(tmp_path: Path) -> None:
    """The proxy's start-up import of claude-agent-acp's files runs while a turn goes on in a past session: the
    count is what the agent's files say, as an import alone counts them."""
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        (sid,) = world.past("Plan the release")
        proxy = world.proxy("--list-wait", "0")
        world.load(proxy, sid)  # at once: the import is under way
        world.turn(proxy, sid, "Add the migration notes")
        world.turn(proxy, sid, "And the upgrade guide")
        listed = by_id(list_all(proxy))[sid]
        assert proxy.close() == 0, proxy.stderr_tail()
        with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as alone:
            root = world.home / ".claude"
            Importer(alone.store, sources(["claude-code"]), roots={"claude-code": root}, state_path=None).run()
            state = alone.state(f"claude-code:{sid}")
            assert state is not None
            files = state.messages  # 2 a turn: the past's, then the two through the proxy
        with world.registry() as registry:
            recorded = registry.state(f"claude-code:{sid}")
            assert recorded is not None
        assert recorded.messages == files == 6, (recorded.messages, files)
        assert listed["_meta"]["acp-session-registry/messageCount"] == files


def test_claude_code_acp_a_deleted_session_is_refused_by_the_proxy_and_stays_deleted(tmp_path: Path) -> None:
    """claude-code-acp has no session/delete: its file stays, and the proxy must keep the deletion - in this
    process, the next one, and ``acp-registry import-agents`` - never forwarding a load or a prompt of it."""
    with scene(tmp_path, peers.CLAUDE_CODE_ACP, stub=True) as world:
        doomed, kept = world.past("Draft the spec", "Keep this one")
        proxy = world.proxy()
        assert proxy.call("session/delete", {"sessionId": doomed}) == {}
        load = {"sessionId": doomed, "cwd": str(world.project), "mcpServers": []}
        prompt = {"sessionId": doomed, "prompt": [{"type": "text", "text": "still there?"}]}
        for method, params in (("session/load", load), ("session/resume", load), ("session/prompt", prompt)):
            answer = proxy.request(method, params)
            assert answer["error"]["code"] == -32002 and "deleted" in answer["error"]["message"], answer
        assert REPLY_PREFIX not in proxy.text(doomed)
        assert proxy.close() == 0, proxy.stderr_tail()

        command = ["import-agents", "--store", world.store_url, "--agent", "claude-code"]
        command += ["--root", f"claude-code={world.home / '.claude'}"]
        imported = subprocess.run(
            [sys.executable, "-m", "registry.cli", *command],
            capture_output=True,
            text=True,
            env=world.env,
            timeout=120,
            check=False,
        )
        assert imported.returncode == 0, imported.stderr
        again = world.proxy()
        listed = by_id(list_all(again))
        assert set(listed) == {kept}, ({"doomed": doomed, "kept": kept}, listed)
        assert again.request("session/load", load)["error"]["code"] == -32002
        assert again.close() == 0, again.stderr_tail()


def test_fast_agent_after_a_users_title_its_own_title_is_recorded_but_not_shown(tmp_path: Path) -> None:
    with scene(tmp_path, peers.FAST_AGENT) as world:
        proxy = world.proxy(name="fast-agent")
        sid = world.new_session(proxy)
        assert proxy.call("session/set_title", {"sessionId": sid, "title": "My title"}) == {"title": "My title"}
        world.turn(proxy, sid, "Plan the release notes")  # fast-agent titles the session from it
        listed = by_id(list_all(proxy))[sid]
        assert listed["title"] == "My title"
        # The user's title once (as serve tells the client that set it), fast-agent's own never.
        titles = [u.get("title") for u in proxy.updates(sid, "session_info_update") if "title" in u]
        assert titles == ["My title"], titles
        assert proxy.close() == 0, proxy.stderr_tail()
