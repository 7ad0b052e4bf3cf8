"""Nothing the user did is retired: the proxy's start-up reconcile, and its close, retire only what the agent's
past shows it does not have - read whole, for that cwd - and that the user did nothing with; a retired session
that the agent has after all comes back as the same record, with what the user set.

Real proxy processes in front of the scripted agent (``tests/proxy_agent.py``) on a real SQLite store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from events.model import TitleSource
from registry.agents import META_RETIRED
from registry.service import SessionRegistry
from tests.proxy_wire import ProxyProcess, prompt, proxy_command, started

OLD = "2026-01-05T10:00:00Z"  # long before any proxy of these tests started: not spared as another window's


def _listed(proxy: ProxyProcess, request_id: int, **params: object) -> dict[str, dict[str, object]]:
    return {s["sessionId"]: s for s in proxy.result(request_id, "session/list", params)["sessions"]}


def _past(path: Path, cwd: Path, natives: list[str]) -> None:
    path.write_text(json.dumps([{"sessionId": n, "cwd": str(cwd), "updatedAt": OLD} for n in natives]))


def test_sessions_the_user_titled_or_archived_are_not_retired_when_the_agents_list_leaves_them_out(
    url: str, tmp_path: Path
) -> None:
    past = tmp_path / "past.json"
    _past(past, tmp_path, ["a", "b", "c"])
    with ProxyProcess(proxy_command(url, "--list", "--past", str(past))) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        assert sorted(_listed(proxy, 1)) == ["a", "b", "c"]  # learned from the agent's own list, 0 messages
        assert proxy.result(2, "session/set_title", {"sessionId": "a", "title": "Mine"}) == {"title": "Mine"}
        assert proxy.result(3, "session/archive", {"sessionId": "b"}) == {}
        assert proxy.close() == 0
    _past(past, tmp_path, [])  # the agent's list leaves all three out (another project's list, pruning)
    with ProxyProcess(proxy_command(url, "--list", "--past", str(past))) as again:
        again.result(0, "initialize", {"protocolVersion": 1})
        listed = _listed(again, 1, archived="include")
        assert sorted(listed) == ["a", "b"]  # c: nothing of the user's, and the agent does not have it
        assert listed["a"]["title"] == "Mine" and listed["b"]["archived"] is True
        assert again.close() == 0


def test_a_list_cut_short_by_the_page_bound_is_not_evidence_of_absence(url: str, tmp_path: Path) -> None:
    """The agent's list holds more pages than the proxy walks: the sessions past the bound are not retired."""
    past = tmp_path / "past.json"
    natives = [f"p{n:03}" for n in range(205)]
    _past(past, tmp_path, natives)
    with ProxyProcess(proxy_command(url, "--list", "--past", str(past), "--page-size", "1")) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        proxy.result(1, "session/list", {})
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        recorded = {s.session_id for s in registry.list(agent="scripted-agent").sessions}
        walked = len([s for s in natives if registry.state(f"scripted-agent:{s}") is not None])
    assert walked == 200 and len(recorded) == 50  # the first 200 pages: one page of the registry's own list
    with ProxyProcess(proxy_command(url, "--list", "--past", str(past), "--page-size", "1", "--order", "desc")) as p:
        p.result(0, "initialize", {"protocolVersion": 1})
        p.result(1, "session/list", {})
        assert p.close() == 0
    with SessionRegistry.open(url) as registry:
        gone = [n for n in natives if (s := registry.state(f"scripted-agent:{n}")) is not None and s.deleted]
    assert gone == []  # p000..p004 were past the bound the second time: not seen, not evidence


def test_an_agent_whose_list_answers_per_cwd_is_asked_for_each_cwd_and_keeps_its_other_projects(
    url: str, tmp_path: Path
) -> None:
    """fast-agent's own list without a cwd answers only the folder it runs in: its sessions in other projects are
    asked for by cwd - recorded, listed for that project, and not retired as absent."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    past = tmp_path / "past.json"
    sessions = [{"sessionId": "h1", "cwd": str(here), "updatedAt": OLD}]
    sessions += [{"sessionId": f"e{n}", "cwd": str(elsewhere), "updatedAt": OLD} for n in range(3)]
    past.write_text(json.dumps(sessions))
    with SessionRegistry.open(url) as registry:  # the registry knows of that project (an earlier session there)
        registry.create(str(elsewhere), session_id="fast-agent:e0", agent="fast-agent", at=1_767_000_000_000_000_000)
    command = proxy_command(url, "--list", "--past", str(past), "--per-cwd", "--name", "fast-agent-acp")
    with ProxyProcess(command, cwd=str(here)) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        assert sorted(_listed(proxy, 1)) == ["e0", "e1", "e2", "h1"]
        assert sorted(_listed(proxy, 2, cwd=str(elsewhere))) == ["e0", "e1", "e2"]
        assert proxy.close() == 0


def test_a_retired_session_the_agent_lists_again_comes_back_as_the_same_record_with_what_the_user_set(
    url: str, tmp_path: Path
) -> None:
    """A record an older proxy retired as unkept although the user had titled and archived it: the agent lists
    it, and it is that record again - its id, its title, its archive flag - not a new ``~2`` generation."""
    with SessionRegistry.open(url) as registry:
        sid = "scripted-agent:kept-1"
        registry.create(str(tmp_path), session_id=sid, agent="scripted-agent", at=1_767_000_000_000_000_000)
        registry.change_info(sid, title="Mine", title_source=TitleSource.USER)
        registry.archive(sid)
        registry.change_info(sid, meta={META_RETIRED: "unkept"})
        registry.delete(sid, reason="retired by the proxy: unkept")
    past = tmp_path / "past.json"
    _past(past, tmp_path, ["kept-1"])
    with ProxyProcess(proxy_command(url, "--list", "--past", str(past))) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        listed = _listed(proxy, 1, archived="include")
        assert listed["kept-1"]["title"] == "Mine" and listed["kept-1"]["archived"] is True
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(sid)
        assert state is not None and not state.deleted and state.title_source is TitleSource.USER
        assert META_RETIRED not in (state.meta or {})
        assert registry.state("scripted-agent~2:kept-1") is None


def test_a_session_retired_at_close_that_the_agent_has_after_all_is_restored_not_copied(
    url: str, tmp_path: Path, kept: str
) -> None:
    proxy, session = started(url, "--keep", kept, cwd=str(tmp_path))
    with proxy:
        assert proxy.close() == 0  # no turn: retired, as the agent forgets it
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{session}")
        assert state is not None and state.deleted
    # The agent has it after all (its own store says so): a load and a turn in it bring it back - the same record.
    Path(kept).write_text(json.dumps({session: {"sessionId": session, "cwd": str(tmp_path)}}))
    with ProxyProcess(proxy_command(url, "--keep", kept)) as third:
        third.result(0, "initialize", {"protocolVersion": 1})
        assert third.result(1, "session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}) == {}
        third.result(2, "session/prompt", prompt(session, "after all"))
        assert third.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{session}")
        assert state is not None and not state.deleted and state.messages == 2
        assert registry.state(f"scripted-agent~2:{session}") is None


@pytest.mark.parametrize("what", ["title", "archive", "fork"])
def test_a_session_without_a_turn_that_the_user_titled_archived_or_forked_is_not_retired_at_close(
    url: str, tmp_path: Path, what: str, kept: str
) -> None:
    proxy, session = started(url, "--keep", kept, "--fork", cwd=str(tmp_path))
    with proxy:
        if what == "title":
            proxy.result(2, "session/set_title", {"sessionId": session, "title": "Named, never prompted"})
        elif what == "archive":
            proxy.result(2, "session/archive", {"sessionId": session})
        else:
            proxy.result(2, "session/fork", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{session}")
        assert state is not None and not state.deleted, what


def test_a_session_the_agents_own_list_does_not_show_after_its_turn_is_not_offered_once_the_connection_ends(
    url: str, tmp_path: Path, kept: str
) -> None:
    """An agent that did not save a session although it had a turn (its own list, asked for that cwd after the
    turn, does not show it): listed while live, then not offered - not listed, no status - and it comes back as
    the same record if the agent has it after all."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    agent = ("--keep", kept, "--list", "--forget-cwd", str(elsewhere))
    proxy, here = started(url, *agent, cwd=str(tmp_path))
    with proxy:
        there = proxy.result(2, "session/new", {"cwd": str(elsewhere), "mcpServers": []})["sessionId"]
        proxy.result(3, "session/prompt", prompt(here, "kept"))
        proxy.result(4, "session/prompt", prompt(there, "not kept by the agent"))
        proxy.result(5, "session/set_title", {"sessionId": there, "title": "Mine all the same"})
        assert sorted(_listed(proxy, 6)) == sorted([here, there])  # live on this connection: open
        assert proxy.close() == 0
    with ProxyProcess(proxy_command(url, *agent)) as again:
        again.result(0, "initialize", {"protocolVersion": 1})
        assert sorted(_listed(again, 1)) == [here]
        assert again.call(2, "session/status", {"sessionId": there})["error"]["code"] == -32002
        assert again.close() == 0
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{there}")
        assert state is not None and state.deleted and state.title == "Mine all the same"  # kept, not offered
