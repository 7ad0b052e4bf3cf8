"""``acp-registry proxy`` in front of the scripted agent (``tests/proxy_agent.py``): real processes, real stores.

What the client observes on the wire: messages relayed both ways with its own ids, what the proxy adds
(capabilities, list, delete, titles), the registry's record, and the agent's past.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from events.memory import MemoryStore
from registry.acp.methods import METHODS, Role
from registry.importers import Importer, sources
from registry.service import SessionRegistry
from tests.proxy_wire import ProxyProcess, prompt, proxy_command, started
from tests.waiting import wait_until

FIXTURES = Path(__file__).with_name("fixtures") / "agents"


def test_the_proxy_never_loads_rich_reactivex_platformdirs_or_the_importers(url: str, tmp_path: Path) -> None:
    """What makes the agent wait for the proxy at start is what the proxy imports: a whole conversation (initialize,
    a session, a turn, a title, the list, the agent's own list walked for its past) loads none of these."""
    heavy = ("rich", "reactivex", "platformdirs", "psycopg", "registry.importers")  # (cli.terminal loads rich late)
    code = (
        "import atexit, sys, registry.cli\n"
        f"heavy = {heavy!r}\n"
        "atexit.register(lambda: print('loaded:', sorted(m for m in sys.modules if m.startswith(heavy)),"
        " file=sys.stderr))\n"
        "sys.exit(registry.cli.main(sys.argv[1:]))\n"
    )
    with ProxyProcess([sys.executable, "-c", code, *proxy_command(url, "--list")[3:]]) as proxy:
        assert (
            "list" in proxy.result(0, "initialize", {"protocolVersion": 1})["agentCapabilities"]["sessionCapabilities"]
        )
        session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert proxy.result(2, "session/prompt", prompt(session, "title Mine"))["stopReason"] == "end_turn"
        assert [s["sessionId"] for s in proxy.result(3, "session/list", {})["sessions"]] == [session]
        assert proxy.close() == 0
    assert "loaded: []" in proxy.stderr_lines


def test_initialize_adds_list_and_delete_and_keeps_what_the_agent_said(url: str) -> None:
    with ProxyProcess(proxy_command(url)) as proxy:
        result = proxy.result(0, "initialize", {"protocolVersion": 1})
        capabilities = result["agentCapabilities"]
        assert capabilities["loadSession"] is True
        answered = {
            m.capability.path[-1]
            for m in METHODS.values()
            if m.capability is not None and m.role("proxy") is not None and m.role("proxy") is not Role.FORWARD
        }
        assert {"list", "delete"} <= answered
        expected: dict[str, object] = {key: {} for key in answered} | {
            "list": {"_meta": {"acp-session-registry/query": {}}}
        }
        assert capabilities["sessionCapabilities"] == {"resume": {}} | expected
        assert result["authMethods"] == [{"id": "scripted", "name": "scripted"}]
        assert result["agentInfo"] == {"name": "scripted-agent", "version": "1.0"}
        assert result["_meta"]["scripted"] is True
        assert result["_meta"]["acp-session-registry/proxy"]["agent"] == "scripted-agent"
        assert proxy.close() == 0


def test_a_turn_is_recorded_titled_from_the_prompt_and_listed_with_the_agents_id(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        assert not session.startswith("scripted-agent:")
        assert proxy.result(2, "session/prompt", prompt(session, "hello there\nsecond line")) == {
            "stopReason": "end_turn"
        }
        listed = proxy.result(3, "session/list", {})
        (info,) = listed["sessions"]
        assert info["sessionId"] == session
        assert info["cwd"] == str(tmp_path)
        assert info["title"] == "hello there second line"  # registry.commands.prompt_title: one line
        assert info["_meta"]["acp-session-registry/messageCount"] == 2
        # The proxy gave the title (the agent gave none) and told the client, once.
        chunks = proxy.updates("agent_message_chunk")
        assert [c["content"]["text"] for c in chunks] == ["hello there\nsecond line"]
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{session}")
        assert state is not None and state.messages == 2 and state.title == "hello there second line"


def test_the_agents_title_reaches_the_client_once_and_is_recorded_as_the_agents(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "title Agent says so"))
        listed = proxy.result(3, "session/list", {})
        assert listed["sessions"][0]["title"] == "Agent says so"
        assert proxy.titles() == ["Agent says so"]
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{session}")
        assert state is not None and state.title_source is not None and state.title_source.value == "agent"


def test_an_agent_title_that_repeats_the_proxys_reaches_the_client_once(url: str, tmp_path: Path) -> None:
    # The proxy titles a session from its first prompt after the turn; an agent that titles it too, later and
    # with the same words (as claude-agent-acp may), would make the client hear the title twice.
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "hello there"))
        deadline, n = time.monotonic() + 20, 3
        while not proxy.titles() and time.monotonic() < deadline:
            proxy.result(n, "session/list", {})  # reads what arrived meanwhile
            n += 1
        proxy.result(n, "session/prompt", prompt(session, "title hello there"))  # the same title, from the agent
        proxy.result(n + 1, "session/prompt", prompt(session, "title Something else"))
        proxy.result(n + 2, "session/list", {})
        assert proxy.titles() == ["hello there", "Something else"]
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{session}")
        assert state is not None and state.title == "Something else" and state.title_source is not None
        assert state.title_source.value == "agent"


def test_agent_requests_mid_turn_keep_the_agents_ids_and_the_client_keeps_its_own(url: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    with proxy:
        # The client's ids are 0, 1, 2 ... and so are the agent's: the proxy keeps them apart.
        proxy.send({"id": 0, "method": "session/prompt", "params": prompt(session, "permission")})
        asked = proxy.wait_request("session/request_permission")
        assert asked["id"] == 0
        proxy.send({"id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        answer = proxy.pump(0)
        assert answer["result"] == {"stopReason": "end_turn"}
        (chunk,) = proxy.updates("agent_message_chunk")
        assert json.loads(chunk["content"]["text"])["result"] == {"outcome": {"outcome": "cancelled"}}
        proxy.send({"id": "x", "method": "session/prompt", "params": prompt(session, "fs")})
        asked = proxy.wait_request("fs/read_text_file")
        proxy.send({"id": asked["id"], "error": {"code": -32601, "message": "no fs here"}})
        assert proxy.pump("x")["result"] == {"stopReason": "end_turn"}
        assert proxy.close() == 0
    received = [json.loads(line) for line in log.read_text().splitlines()]
    responses = [m for m in received if "method" not in m]
    assert responses[0] == {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}}
    assert responses[1]["error"]["message"] == "no fs here"


def test_extension_and_unknown_methods_and_notifications_pass_through(url: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    with proxy:
        assert proxy.result(5, "_vendor/echo", {"a": [1, 2.5, None]}) == {"echo": {"a": [1, 2.5, None]}}
        answer = proxy.call(6, "vendor/unknown", {})
        assert answer["error"]["code"] == -32601
        assert proxy.result(7, "authenticate", {"methodId": "scripted"}) == {}
        proxy.send({"id": 8, "method": "session/prompt", "params": prompt(session, "slow 20")})
        proxy.send({"method": "session/cancel", "params": {"sessionId": session}})
        assert proxy.pump(8)["result"] == {"stopReason": "cancelled"}
        assert proxy.close() == 0
    text = log.read_text()
    assert '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"' + session + '"}}' in text


def test_a_clients_cancel_request_names_the_id_the_agent_knows_and_one_for_nothing_waiting_is_dropped(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    with proxy:
        proxy.send({"id": "turn", "method": "session/prompt", "params": prompt(session, "slow 20")})
        proxy.send({"method": "$/cancel_request", "params": {"requestId": "turn"}})
        # session/new's id: answered long ago; at the agent, the client's 1 could name a request of its own.
        proxy.send({"method": "$/cancel_request", "params": {"requestId": 1}})
        proxy.send({"method": "session/cancel", "params": {"sessionId": session}})
        assert proxy.pump("turn")["result"] == {"stopReason": "cancelled"}
        assert proxy.close() == 0
    received = [json.loads(line) for line in log.read_text().splitlines()]
    (turn,) = [m for m in received if m.get("method") == "session/prompt"]
    cancels = [m for m in received if m.get("method") == "$/cancel_request"]
    assert cancels == [{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": turn["id"]}}]


def test_floods_and_large_messages_pass_in_order(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        assert proxy.result(2, "session/prompt", prompt(session, "flood 5000 3")) == {"stopReason": "end_turn"}
        assert len(proxy.updates("agent_message_chunk")) == 5000
        proxy.notifications.clear()
        assert proxy.result(3, "session/prompt", prompt(session, "big 3000000")) == {"stopReason": "end_turn"}
        (chunk,) = proxy.updates("agent_message_chunk")
        assert chunk["content"]["text"] == "y" * 3_000_000
        assert proxy.close() == 0


def test_an_agent_request_too_long_to_relay_is_answered_to_the_agent(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        assert proxy.result(2, "session/prompt", prompt(session, "bigask 9000000")) == {"stopReason": "end_turn"}
        (chunk,) = proxy.updates("agent_message_chunk")
        assert json.loads(chunk["content"]["text"])["error"]["code"] == -32600
        assert not proxy.requests  # nothing of it reached the client
        assert proxy.close() == 0


def test_lines_that_are_not_json_rpc_never_reach_the_clients_stdout(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, "--banner", cwd=str(tmp_path))
    with proxy:
        assert proxy.result(2, "session/prompt", prompt(session, "garbage")) == {"stopReason": "end_turn"}
        assert [c["content"]["text"] for c in proxy.updates("agent_message_chunk")] == ["after garbage"]
        assert proxy.close() == 0
    assert any("was not relayed" in line for line in proxy.stderr_lines)


def test_hostile_client_lines_get_serves_answers_and_the_conversation_goes_on(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.send(b'{"jsonrpc": "2.0", "id": 41, "method": ')
        assert proxy.pump(41)["error"]["code"] == -32700
        proxy.send(b'{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":' + b"[" * 100 + b"]" * 100 + b"}")
        nested = proxy.pump(42)
        assert nested["error"]["code"] == -32600
        proxy.send(b'{"jsonrpc":"2.0","id":43,"method":"x","params":{"p":"' + b"z" * (9 * 1024 * 1024) + b'"}}')
        assert proxy.pump(43)["error"]["code"] == -32600
        assert proxy.result(44, "session/prompt", prompt(session, "still here")) == {"stopReason": "end_turn"}
        assert proxy.close() == 0


def test_list_rules_are_serves(url: str, tmp_path: Path) -> None:
    proxy, _ = started(url, cwd=str(tmp_path))
    with proxy:
        bad = proxy.call(2, "session/list", {"cursor": "garbage"})
        assert bad["error"]["code"] == -32602
        relative = proxy.call(3, "session/list", {"cwd": "relative/path"})
        assert relative["error"]["code"] == -32602
        assert proxy.result(4, "session/list", {"cwd": str(tmp_path) + "/"})["sessions"]
        assert proxy.result(5, "session/list", {"cwd": "/nowhere"})["sessions"] == []
        assert proxy.close() == 0


@pytest.mark.parametrize("agent_deletes", [True, False])
def test_delete_hides_the_session_for_good_and_is_forwarded_when_the_agent_deletes(
    url: str, tmp_path: Path, agent_deletes: bool
) -> None:
    log = tmp_path / "agent.log"
    extra = ["--delete"] if agent_deletes else []
    proxy, session = started(url, "--log", str(log), *extra, cwd=str(tmp_path))
    with proxy:
        assert proxy.result(2, "session/delete", {"sessionId": session}) == {}
        assert proxy.result(3, "session/list", {})["sessions"] == []
        assert proxy.result(4, "session/delete", {"sessionId": "never-was"}) == {}
        assert proxy.close() == 0
    forwarded = [json.loads(line) for line in log.read_text().splitlines() if "session/delete" in line]
    assert len(forwarded) == (2 if agent_deletes else 0)
    proxy, _ = started(url, cwd=str(tmp_path))  # across restarts: still gone
    with proxy:
        assert [s["sessionId"] for s in proxy.result(2, "session/list", {})["sessions"]] != [session]
        assert session not in [s["sessionId"] for s in proxy.result(3, "session/list", {})["sessions"]]
        assert proxy.close() == 0


def test_the_agents_past_from_its_own_list_is_listed(url: str, tmp_path: Path) -> None:
    past = tmp_path / "past.json"
    past.write_text(
        json.dumps(
            [
                {
                    "sessionId": "old-1",
                    "cwd": str(tmp_path),
                    "title": "From before",
                    "updatedAt": "2026-01-02T03:04:05Z",
                },
                {"sessionId": "old-2", "cwd": "/elsewhere"},
            ]
        )
    )
    proxy, session = started(url, "--list", "--past", str(past), cwd=str(tmp_path))
    with proxy:
        for attempt in range(100):
            listed = proxy.result(10 + attempt, "session/list", {})
            if listed["_meta"]["acp-session-registry/proxy"]["history"] == "ready":
                break
        listed = proxy.result(200, "session/list", {})
        ids = [s["sessionId"] for s in listed["sessions"]]
        assert set(ids) == {session, "old-1", "old-2"}
        old = next(s for s in listed["sessions"] if s["sessionId"] == "old-1")
        assert old["title"] == "From before" and old["updatedAt"].startswith("2026-01-02T03:04:05")
        assert proxy.close() == 0


def test_a_title_the_agent_replays_while_loading_an_unknown_session_is_kept(url: str, tmp_path: Path) -> None:
    past = tmp_path / "past.json"
    past.write_text(json.dumps([{"sessionId": "old-1", "cwd": str(tmp_path), "title": "Replayed title"}]))
    proxy, _ = started(url, "--past", str(past), cwd=str(tmp_path))  # no --list: the proxy cannot know old-1
    with proxy:
        proxy.result(2, "session/load", {"sessionId": "old-1", "cwd": str(tmp_path), "mcpServers": []})
        assert proxy.titles() == ["Replayed title"]
        listed = {s["sessionId"]: s.get("title") for s in proxy.result(3, "session/list", {})["sessions"]}
        assert listed["old-1"] == "Replayed title"
        assert proxy.close() == 0


def test_the_agents_past_from_its_history_files_is_one_session_with_what_it_does_live(url: str, tmp_path: Path) -> None:
    """In front of Claude Code (``--agent claude-code``), its ``~/.claude`` history is imported in the background;
    a session loaded through the proxy is the imported one, not a second."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-code", home / ".claude")
    with SessionRegistry(MemoryStore()) as reference:
        Importer(reference.store, sources(["claude-code"]), roots={"claude-code": home / ".claude"}).run()
        expected = {s.session_id.removeprefix("claude-code:"): s for s in reference.list().sessions}
        before = {k: reference.state(f"claude-code:{k}") for k in expected}
    assert expected
    command = proxy_command(url, agent="claude-code")
    with ProxyProcess(command, env={"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}) as proxy:
        meta = proxy.result(0, "initialize", {"protocolVersion": 1})["_meta"]["acp-session-registry/proxy"]
        assert meta["agent"] == "claude-code" and meta["history"] in ("importing", "ready")  # a small tree: quick
        ids = iter(range(10, 1_000_000))

        def imported() -> dict[str, Any] | None:
            listed: dict[str, Any] = proxy.result(next(ids), "session/list", {})
            return None if listed["_meta"]["acp-session-registry/proxy"]["history"] == "importing" else listed

        listed = wait_until(imported, 60, "the history import")
        assert listed["_meta"]["acp-session-registry/proxy"]["history"] == "ready"
        assert {s["sessionId"]: s["cwd"] for s in listed["sessions"]} == {k: v.cwd for k, v in expected.items()}
        native = sorted(expected)[0]
        proxy.result(300, "session/load", {"sessionId": native, "cwd": expected[native].cwd, "mcpServers": []})
        proxy.result(301, "session/prompt", prompt(native, "one more turn"))
        again = proxy.result(302, "session/list", {})["sessions"]
        assert sorted(s["sessionId"] for s in again) == sorted(expected)
        assert again[0]["sessionId"] == native  # the turn made it the most recent
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"claude-code:{native}")
        assert state is not None and state.messages == before[native].messages + 2  # type: ignore[union-attr]


def test_an_import_that_fails_is_named_in_one_line_and_the_relay_goes_on(url: str, tmp_path: Path) -> None:
    """The agent's past is imported by ``acp-registry import-agents`` in a process of its own; when that fails (here:
    its incremental state beside the store is a folder), the proxy says why in one line, the first list answers
    with the history ``failed``, and the relay goes on."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-code", home / ".claude")
    (tmp_path / "sessions.db.import-state").mkdir()
    command = proxy_command(url, agent="claude-code")
    with ProxyProcess(command, env={"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        listed = proxy.result(1, "session/list", {})  # waits for the read, which failed
        assert listed["_meta"]["acp-session-registry/proxy"]["history"] == "failed"
        assert listed["sessions"] == []
        made = proxy.result(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        proxy.result(3, "session/prompt", prompt(made, "still relayed"))
        assert [s["sessionId"] for s in proxy.result(4, "session/list", {})["sessions"]] == [made]
        assert proxy.close() == 0
    said = [line for line in proxy.stderr_lines if "past sessions failed" in line]
    assert len(said) == 1, proxy.stderr_lines
    assert "the importer exited 2" in said[0] and "import-state" in said[0], said


def test_the_session_surface_the_registry_serves_for_any_agent(url: str, tmp_path: Path) -> None:
    """set_title, archive / unarchive and status, answered by the proxy for an agent that has none of them."""
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    with proxy:
        assert proxy.result(2, "session/status", {"sessionId": session}) == {"status": "open"}
        assert proxy.result(3, "session/set_title", {"sessionId": session, "title": "  Mine  "}) == {"title": "Mine"}
        proxy.result(4, "session/prompt", prompt(session, "title The agent's"))  # never over the user's
        assert proxy.result(5, "session/list", {})["sessions"][0]["title"] == "Mine"
        assert proxy.result(6, "session/archive", {"sessionId": session}) == {}
        assert proxy.result(7, "session/list", {})["sessions"] == []
        (archived,) = proxy.result(8, "session/list", {"archived": "only"})["sessions"]
        assert archived["sessionId"] == session and archived["archived"] is True
        assert proxy.result(9, "session/status", {"sessionId": session}) == {"status": "saved"}  # closed first
        assert proxy.call(10, "session/list", {"archived": "sometimes"})["error"]["code"] == -32602
        assert proxy.result(11, "session/unarchive", {"sessionId": session}) == {}
        assert [s["sessionId"] for s in proxy.result(12, "session/list", {})["sessions"]] == [session]
        missing = proxy.call(13, "session/status", {"sessionId": "nobody"})["error"]
        assert missing["code"] == -32002
        assert proxy.close() == 0
    methods = [json.loads(line).get("method") for line in log.read_text().splitlines()]
    assert not {"session/status", "session/set_title", "session/archive", "session/unarchive"} & set(methods)


@pytest.mark.parametrize("agent_forks", [True, False])
def test_fork_is_forwarded_to_an_agent_that_forks_and_recorded_with_its_parent(
    url: str, tmp_path: Path, agent_forks: bool
) -> None:
    proxy, session = started(url, *(["--fork"] if agent_forks else []), cwd=str(tmp_path))
    with proxy:
        advertised = proxy.result(9, "initialize", {"protocolVersion": 1})["agentCapabilities"]["sessionCapabilities"]
        assert ("fork" in advertised) is agent_forks  # forwarded only: advertised as the agent advertises it
        proxy.result(2, "session/prompt", prompt(session, "before the fork"))
        answer = proxy.call(3, "session/fork", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        if not agent_forks:
            assert answer["error"]["code"] == -32601  # the agent's own answer
            assert proxy.close() == 0
            return
        fork = answer["result"]["sessionId"]
        assert {s["sessionId"] for s in proxy.result(4, "session/list", {})["sessions"]} == {session, fork}
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{fork}")
        assert state is not None and state.parent is not None
        assert state.parent.session_id == f"scripted-agent:{session}"


def test_a_users_title_reaches_the_client_live_as_serve_tells_it(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "first turn"))  # the proxy's own title: pushed once
        assert proxy.result(3, "session/set_title", {"sessionId": session, "title": "From this window"})
        with SessionRegistry.open(url) as elsewhere:  # another process: a second window, the CLI, a host
            elsewhere.set_title(f"scripted-agent:{session}", "From elsewhere")
        deadline = time.monotonic() + 20
        while "From elsewhere" not in proxy.titles():
            assert time.monotonic() < deadline, proxy.notifications
            proxy.result(4, "session/list", {})  # reads on, collecting notifications
        assert proxy.titles() == ["first turn", "From this window", "From elsewhere"]
        assert proxy.close() == 0
