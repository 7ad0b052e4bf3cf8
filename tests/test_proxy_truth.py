"""The proxy's list is the agent's truth: what it lists for an agent, the agent can open, and what the agent can
open through it, the list shows - across processes, deletions, agents that keep nothing, and agents that reuse ids.

Real proxy processes in front of the scripted agent (``tests/proxy_agent.py``) on a real SQLite store; the agent's
``--log`` shows exactly what reached it.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from registry.agents import META_SOURCE_GONE
from registry.proxy import Proxy
from registry.service import SessionRegistry
from tests.proxy_wire import AGENT, ProxyProcess, prompt, proxy_command, started
from tests.waiting import wait_until


def _ids(proxy: ProxyProcess, request_id: int, **params: object) -> list[str]:
    return [s["sessionId"] for s in proxy.result(request_id, "session/list", params)["sessions"]]


def _forwarded(log: Path, method: str) -> list[dict[str, object]]:
    """The requests of ``method`` that reached the agent."""
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("method") == method]


def test_a_session_the_agent_keeps_only_after_a_turn_is_listed_while_live_and_never_after(
    url: str, tmp_path: Path, kept: str
) -> None:
    proxy, talked = started(url, "--keep", kept, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(talked, "hello"))
        untouched = proxy.result(3, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert set(_ids(proxy, 4)) == {talked, untouched}  # both live on this connection
        assert proxy.result(5, "session/status", {"sessionId": untouched}) == {"status": "open"}
        assert proxy.close() == 0
    again = ProxyProcess(proxy_command(url, "--keep", kept))
    with again:
        again.result(0, "initialize", {"protocolVersion": 1})
        assert _ids(again, 1) == [talked]  # the agent forgot the untouched one: it is not offered
        assert again.call(2, "session/status", {"sessionId": untouched})["error"]["code"] == -32002
        assert (
            again.call(3, "session/load", {"sessionId": untouched, "cwd": str(tmp_path), "mcpServers": []})["error"][
                "code"
            ]
            == -32002
        )
        assert again.result(4, "session/load", {"sessionId": talked, "cwd": str(tmp_path), "mcpServers": []}) == {}
        assert again.close() == 0


def test_a_deleted_session_is_never_forwarded_in_this_process_or_the_next(url: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))  # an agent without session/delete
    load = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "hello"))
        assert proxy.result(3, "session/delete", {"sessionId": session}) == {}
        for request_id, (method, params) in enumerate(
            [("session/load", load), ("session/resume", load), ("session/prompt", prompt(session, "again"))], 10
        ):
            error = proxy.call(request_id, method, params)["error"]
            assert error["code"] == -32002 and "deleted" in error["message"], error
        assert proxy.close() == 0
    with ProxyProcess(proxy_command(url, "--log", str(log))) as again:
        again.result(0, "initialize", {"protocolVersion": 1})
        assert again.call(1, "session/load", load)["error"]["code"] == -32002
        assert again.call(2, "session/prompt", prompt(session, "again"))["error"]["code"] == -32002
        assert again.close() == 0
    assert _forwarded(log, "session/load") == [] and _forwarded(log, "session/resume") == []
    assert len(_forwarded(log, "session/prompt")) == 1  # the one turn before the deletion


def test_ids_the_command_line_prints_are_accepted_and_another_agents_are_refused(url: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "hello"))
        stored = f"scripted-agent:{session}"  # what acp-registry list prints
        assert proxy.result(3, "session/load", {"sessionId": stored, "cwd": str(tmp_path), "mcpServers": []}) == {}
        error = proxy.call(4, "session/load", {"sessionId": "codex:0199-x", "cwd": str(tmp_path), "mcpServers": []})
        assert error["error"]["code"] == -32002 and "codex" in error["error"]["message"]
        assert proxy.result(5, "session/set_title", {"sessionId": stored, "title": "Pasted"}) == {"title": "Pasted"}
        assert proxy.close() == 0
    assert [line["params"]["sessionId"] for line in _forwarded(log, "session/load")] == [session]  # type: ignore[index]
    with SessionRegistry.open(url) as registry:
        state = registry.state(stored)
        assert state is not None and state.title == "Pasted"


def test_an_agent_that_reuses_ids_starts_a_new_record_and_the_old_one_stays_in_the_history(
    url: str, tmp_path: Path
) -> None:
    first_cwd, second_cwd = tmp_path / "one", tmp_path / "two"
    first_cwd.mkdir()
    second_cwd.mkdir()
    proxy, session = started(url, "--reuse-ids", cwd=str(first_cwd))
    with proxy:
        assert session == "0"
        proxy.result(2, "session/prompt", prompt(session, "first conversation"))
        assert proxy.close() == 0
    proxy, session = started(url, "--reuse-ids", cwd=str(second_cwd))
    with proxy:
        assert session == "0"  # the same id, a new conversation
        proxy.result(2, "session/prompt", prompt(session, "second conversation"))
        (listed,) = proxy.result(3, "session/list", {})["sessions"]
        assert listed["sessionId"] == "0" and listed["cwd"] == str(second_cwd)
        assert listed["title"] == "second conversation"
        assert listed["_meta"]["acp-session-registry/messageCount"] == 2
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        old, new = registry.state("scripted-agent:0"), registry.state("scripted-agent~2:0")
        assert old is not None and old.deleted and old.title == "first conversation" and old.cwd == str(first_cwd)
        assert new is not None and not new.deleted and new.cwd == str(second_cwd)


def test_an_agent_without_agent_info_is_named_by_its_script_not_its_interpreter(url: str, tmp_path: Path) -> None:
    other = tmp_path / "other_agent.py"
    shutil.copy(AGENT, other)
    first = ProxyProcess(proxy_command(url, command=[sys.executable, AGENT, "--name", ""]))
    second = ProxyProcess(proxy_command(url, command=[sys.executable, str(other), "--name", ""]))
    with first, second:
        names = [p.result(0, "initialize", {"protocolVersion": 1})["_meta"] for p in (first, second)]
        assert [n["acp-session-registry/proxy"]["agent"] for n in names] == ["proxy_agent", "other_agent"]
        mine = first.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        first.result(2, "session/prompt", prompt(mine, "mine"))
        assert _ids(second, 3) == []  # two agents, two histories: neither sees (or deletes) the other's
        assert first.close() == 0 and second.close() == 0
    said = [line for line in first.stderr_lines if "recording as agent" in line]
    assert said == ["acp-registry proxy: recording as agent 'proxy_agent' (from command)"]


def test_a_session_made_before_initialize_is_recorded_under_the_agents_name_not_the_commands(
    url: str, tmp_path: Path
) -> None:
    with ProxyProcess(proxy_command(url)) as proxy:
        early = proxy.result(0, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        meta = proxy.result(1, "initialize", {"protocolVersion": 1})["_meta"]["acp-session-registry/proxy"]
        assert meta["agent"] == "scripted-agent"  # its agentInfo, not the command's proxy_agent
        proxy.result(2, "session/prompt", prompt(early, "made early"))
        assert _ids(proxy, 3) == [early]
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        assert [s.session_id for s in registry.list(agent="proxy_agent").sessions] == []
        assert [s.session_id for s in registry.list(agent="scripted-agent").sessions] == [f"scripted-agent:{early}"]


def test_the_first_list_waits_for_the_agents_past_and_later_lists_never_do(url: str, tmp_path: Path) -> None:
    past = tmp_path / "past.json"
    sessions = [{"sessionId": f"old-{n}", "cwd": str(tmp_path), "title": f"Old {n}"} for n in range(3)]
    past.write_text(json.dumps([*sessions, "not a session", {"sessionId": 7, "cwd": 1}]))
    with ProxyProcess(proxy_command(url, "--list", "--past", str(past), "--slow-list", "1")) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        listed = proxy.result(1, "session/list", {})  # right after initialize
        assert listed["_meta"]["acp-session-registry/proxy"]["history"] == "ready"  # malformed entries skipped
        assert sorted(s["sessionId"] for s in listed["sessions"]) == ["old-0", "old-1", "old-2"]
        assert proxy.close() == 0


def test_the_first_list_waits_for_the_agents_own_list_past_the_import_bound_and_is_whole(
    url: str, tmp_path: Path
) -> None:
    """The agent's own list is one request: the first list waits for its answer - slower than ``--list-wait``,
    which bounds an import of files - and holds every session it showed (mistral-vibe's first list was empty)."""
    past = tmp_path / "past.json"
    past.write_text(json.dumps([{"sessionId": f"old-{n}", "cwd": str(tmp_path)} for n in range(14)]))
    bounded = proxy_command(url, "--list", "--past", str(past), "--slow-list", "3")
    bounded[bounded.index("--") : bounded.index("--")] = ["--list-wait", "0.2"]
    with ProxyProcess(bounded) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        listed = proxy.result(1, "session/list", {})
        assert listed["_meta"]["acp-session-registry/proxy"]["history"] == "ready"
        assert len(listed["sessions"]) == 14
        assert proxy.close() == 0


def test_when_the_first_lists_bound_passes_it_says_importing_and_a_later_list_is_whole(tmp_path: Path) -> None:
    past = tmp_path / "past.json"
    past.write_text(json.dumps([{"sessionId": f"old-{n}", "cwd": str(tmp_path)} for n in range(5)]))
    agent = [sys.executable, AGENT, "--list", "--past", str(past), "--slow-list", "2"]
    with SessionRegistry.open(f"sqlite://{tmp_path}/sessions.db") as registry:
        to_proxy, host_out = os.pipe()
        host_in, from_proxy = os.pipe()
        proxy = Proxy(registry, agent, client_in=to_proxy, client_out=from_proxy, list_wait=0.1)
        proxy.history.own_list_wait = 0.1  # an agent slower to list its past than the bound
        thread = threading.Thread(target=proxy.run)
        thread.start()
        answers = os.fdopen(host_in, "rb")

        def call(request_id: int, method: str, params: dict[str, object]) -> dict[str, Any]:
            os.write(
                host_out,
                json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n",
            )
            while True:
                answer = json.loads(answers.readline())
                if answer.get("id") == request_id and "method" not in answer:
                    result: dict[str, Any] = answer["result"]
                    return result

        try:
            call(0, "initialize", {"protocolVersion": 1})
            first = call(1, "session/list", {})
            assert first["_meta"]["acp-session-registry/proxy"]["history"] == "importing"
            assert proxy.history.done.wait(60)
            later = call(2, "session/list", {})
            assert later["_meta"]["acp-session-registry/proxy"]["history"] == "ready"
            assert len(later["sessions"]) == 5
        finally:
            os.close(host_out)
            thread.join(60)
            proxy.close()


def test_after_a_users_title_the_agents_title_is_recorded_but_not_shown(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        assert proxy.result(2, "session/set_title", {"sessionId": session, "title": "Mine"}) == {"title": "Mine"}
        proxy.result(3, "session/prompt", prompt(session, "title The agent's"))
        proxy.result(4, "session/prompt", prompt(session, "titled The agent's again"))
        ids = itertools.count(100)

        def agents_time() -> list[dict[str, Any]]:
            proxy.result(next(ids), "session/list", {})  # reads what came meanwhile
            times = [u for u in proxy.updates("session_info_update") if u.get("updatedAt") == "2026-12-01T10:00:00Z"]
            return times if times and proxy.titles() else []

        agents = wait_until(agents_time, 30, "the user's title and the agent's updatedAt")
        assert proxy.titles() == ["Mine"]  # the user's (as serve tells it); the agent's two, never
        assert len(agents) == 1 and "title" not in agents[0]  # only the second update, without its title
        assert proxy.result(6, "session/list", {})["sessions"][0]["title"] == "Mine"
        assert proxy.close() == 0


def test_a_forks_parent_is_named_by_the_id_the_client_knows(url: str, tmp_path: Path) -> None:
    proxy, session = started(url, "--fork", cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "before the fork"))
        fork = proxy.result(3, "session/fork", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        proxy.result(4, "session/prompt", prompt(fork["sessionId"], "in the fork"))
        listed = {s["sessionId"]: s for s in proxy.result(5, "session/list", {})["sessions"]}
        assert listed[fork["sessionId"]]["_meta"]["acp-session-registry/parent"]["sessionId"] == session
        assert proxy.close() == 0


def test_what_a_killed_proxy_had_not_written_comes_back_from_the_agents_own_list(
    url: str, tmp_path: Path, kept: str
) -> None:
    """SIGKILL right after the answers: the recorder's queue is lost, the agent's own list still has the sessions
    it kept, and the next proxy brings them back before its first list answers."""
    proxy = ProxyProcess(proxy_command(url, "--keep", kept, "--list"))
    with proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        made = []
        for n in range(5):
            session = proxy.result(10 + n, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
            proxy.result(20 + n, "session/prompt", prompt(session, f"turn {n}"))
            made.append(session)
        proxy.proc.kill()
        proxy.proc.wait()
    with ProxyProcess(proxy_command(url, "--keep", kept, "--list")) as again:
        again.result(0, "initialize", {"protocolVersion": 1})
        assert sorted(_ids(again, 1)) == sorted(made)
        assert again.close() == 0


def test_a_session_whose_agent_files_are_gone_is_kept_and_not_offered(url: str, tmp_path: Path) -> None:
    """An importer marks a session whose files the agent removed (sourceGone): the registry keeps it, and the proxy
    neither lists it nor forwards a request for it - the agent could not open it."""
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    load = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "hello"))
        assert proxy.close() == 0
    stored = f"scripted-agent:{session}"
    with SessionRegistry.open(url) as registry:
        state = registry.state(stored)
        assert state is not None
        registry.change_info(stored, meta={**(state.meta or {}), META_SOURCE_GONE: True})
    with ProxyProcess(proxy_command(url, "--log", str(log))) as again:
        again.result(0, "initialize", {"protocolVersion": 1})
        assert _ids(again, 1) == []
        error = again.call(2, "session/load", load)["error"]
        assert error["code"] == -32002 and "no longer kept" in error["message"], error
        assert again.call(3, "session/prompt", prompt(session, "again"))["error"]["code"] == -32002
        assert again.close() == 0
    assert _forwarded(log, "session/load") == []
    with SessionRegistry.open(url) as registry:
        assert [s.session_id for s in registry.list().sessions] == [stored]  # the registry's own list keeps it


@pytest.mark.parametrize("count", [15, 45])
def test_what_the_proxy_acknowledged_survives_a_sigkill_right_after_the_answers(
    url: str, tmp_path: Path, count: int
) -> None:
    """Durable before it is told: every session/new and every turn the client got an answer for is in the log when
    the proxy is SIGKILLed the moment the last answer arrives (the requests sent all at once, as a busy client does)."""
    proxy = ProxyProcess(proxy_command(url))
    with proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        for n in range(count):
            proxy.send({"id": 100 + n, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}})
        made = [proxy.pump(100 + n)["result"]["sessionId"] for n in range(count)]
        for n, session in enumerate(made):
            proxy.send({"id": 200 + n, "method": "session/prompt", "params": prompt(session, f"turn {n}")})
        for n in range(count):
            assert proxy.pump(200 + n)["result"] == {"stopReason": "end_turn"}
        proxy.proc.kill()
        proxy.proc.wait()
    with SessionRegistry.open(url) as registry:
        states = [registry.state(f"scripted-agent:{session}") for session in made]
        assert [s is not None and s.messages for s in states] == [2] * count


def test_a_title_is_pushed_once_after_a_prompts_answer_when_the_agent_titles_it_the_same_a_moment_later(
    url: str, tmp_path: Path
) -> None:
    """The proxy titles the session from its prompt after the answer; the agent then sends the same title with its
    ``updatedAt`` (claude-agent-acp does): the client hears the title once, and the agent's time all the same."""
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "later Fix the login bug"))
        agents = "2026-12-01T10:00:00Z"  # the scripted agent's time (the registry's own diffs carry updatedAt too)

        def relayed() -> bool:
            proxy.result(3, "session/list", {})  # reads what came meanwhile
            return any(u.get("updatedAt") == agents for u in proxy.updates("session_info_update"))

        wait_until(relayed, 30, f"the agent's updatedAt {agents} relayed to the client")
        updates = proxy.updates("session_info_update")
        assert [u.get("title") for u in updates].count("later Fix the login bug") == 1, updates
        assert proxy.close() == 0
