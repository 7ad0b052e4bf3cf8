"""The registry as one link of a real conductor's chain: ``@thinkwell/conductor`` from npm, a real agent last.

``examples/conductor_chain.mjs`` (the conductor as one agent on stdio, as an editor starts it) runs
``acp-registry proxy`` with no command as the chain's proxy and fast-agent (``--model passthrough``) or
claude-agent-acp (against the LLM stub) as its agent.
The official TypeScript SDK plays the editor (``tests/agents/ts_sdk_client.mjs``, the same script as in front of
the standalone proxy), and a raw client drives the session surface and the agent's past. Everything installs with
``make agents`` (the conductor, the SDK, fast-agent); each test skips with one line when something is missing. Run
with ``make test-agents``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from registry import SessionRegistry
from tests.agents import peers
from tests.agents.acp_client import AcpProcess
from tests.agents.llm_stub import REPLY_PREFIX
from tests.agents.scene import INITIALIZE, by_id, list_all, scene, wait_for_list
from tests.test_real_agents_claude import _history, _transcripts
from tests.test_real_agents_sdk import PROMPTS, typescript_client

pytestmark = pytest.mark.real_agents


def test_typescript_sdk_client_through_the_conductor_with_the_registry_in_front_of_fast_agent(tmp_path: Path) -> None:
    node = peers.conductor_node()
    peers.TS_SDK.require()
    with scene(tmp_path, peers.FAST_AGENT) as world:
        link = peers.link_command(world.store_url, "--page-size", "2")
        config = {
            "command": peers.chain_command(node, link, peers.FAST_AGENT.command()),
            "cwd": str(world.project),
            "env": peers.conductor_env(world.env),
            "prompts": PROMPTS,
            "authenticate": None,
        }
        report = typescript_client(node, config, world.env, world.project)
        with world.registry() as registry:
            listed = registry.list(archived="include").sessions
            recorded = {s.session_id: registry.state(s.session_id) for s in listed}

    init = report["init"]
    assert init["agentInfo"]["name"] == "fast-agent-acp"  # the agent's answer, through the conductor
    assert {"list", "delete", "title", "archive", "status"} <= set(init["agentCapabilities"]["sessionCapabilities"])
    assert init["_meta"]["acp-session-registry/proxy"]["agent"] == "fast-agent"  # its one name
    made = [s["sessionId"] for s in report["sessions"]]
    assert [(s["stopReason"], s["reply"]) for s in report["sessions"]] == [("end_turn", p) for p in PROMPTS]
    pages = report["pagesBefore"]
    assert [len(p["sessions"]) for p in pages] == [2, 1]
    assert [s["sessionId"] for p in pages for s in p["sessions"]] == list(reversed(made))
    assert [s["title"] for s in pages[-1]["sessions"]] == [PROMPTS[0]]
    assert report["badCursor"]["code"] == -32602
    assert report["deleteResult"] == {}
    assert report["deleted"] not in [s["sessionId"] for p in report["pagesAfter"] for s in p["sessions"]]
    titles = [
        u["update"]["title"] for u in report["updates"] if u["kind"] == "session_info_update" and "title" in u["update"]
    ]
    assert sorted(titles) == sorted(PROMPTS)  # fast-agent's own titles, each once
    assert report["exitCode"] == 0  # the editor's EOF ended the conductor, which ended the chain
    # The registry recorded every turn before the conductor ended it.
    assert {sid.removeprefix("fast-agent:") for sid in recorded} == set(made) - {report["deleted"]}
    assert all(state is not None and state.messages == 2 for state in recorded.values())


def test_the_session_surface_and_the_agents_past_through_the_conductor(tmp_path: Path) -> None:
    node = peers.conductor_node()
    with scene(tmp_path, peers.FAST_AGENT) as world:
        direct = world.direct()
        old = world.new_session(direct)
        world.turn(direct, old, "Before any chain")
        assert direct.close() == 0

        command = peers.chain_command(node, peers.link_command(world.store_url), peers.FAST_AGENT.command())
        with AcpProcess(command, env=peers.conductor_env(world.env), cwd=world.project) as chain:
            init = chain.call("initialize", INITIALIZE, timeout=120)
            assert init["_meta"]["proxy"] is True  # the registry accepted the proxy role the conductor offered
            # The agent's past, from its own session/list, asked through the conductor.
            sessions = by_id(wait_for_list(chain, lambda s: old in by_id(s), timeout=60))
            assert sessions[old]["title"] == "Before any chain"
            world.load(chain, old)
            assert "Before any chain" in chain.text(old)
            new = world.new_session(chain)
            world.turn(chain, new, "Through the conductor")
            assert chain.call("session/set_title", {"sessionId": new, "title": "Renamed"}) == {"title": "Renamed"}
            assert chain.call("session/status", {"sessionId": new}) == {"status": "open"}
            assert chain.call("session/archive", {"sessionId": old}) == {}
            assert list(by_id(list_all(chain))) == [new]
            assert [s["sessionId"] for s in list_all(chain, archived="only")] == [old]
            assert chain.call("session/status", {"sessionId": old}) == {"status": "saved"}
            assert chain.call("session/delete", {"sessionId": new}) == {}
            assert list_all(chain) == []
            assert chain.close() == 0, chain.stderr_tail()
            assert not chain.bad_lines, chain.bad_lines

        with world.registry() as registry:
            state = registry.state(f"fast-agent:{old}")
            assert state is not None and state.archived and state.title == "Before any chain"
            gone = registry.state(f"fast-agent:{new}")
            assert gone is not None and gone.deleted and gone.title == "Renamed"


def test_two_registries_in_one_real_chain(tmp_path: Path) -> None:
    node = peers.conductor_node()
    with scene(tmp_path, peers.FAST_AGENT) as world:
        second = f"sqlite://{tmp_path / 'second.db'}"
        links = [peers.link_command(world.store_url), peers.link_command(second, "--agent", "behind")]
        command = peers.chain_command(node, *links, peers.FAST_AGENT.command())
        with AcpProcess(command, env=peers.conductor_env(world.env), cwd=world.project) as chain:
            chain.call("initialize", INITIALIZE, timeout=120)
            sid = world.new_session(chain)
            world.turn(chain, sid, "Through two links")
            assert [s["sessionId"] for s in list_all(chain)] == [sid]
            assert chain.close() == 0, chain.stderr_tail()
        with world.registry() as front:
            state = front.state(f"fast-agent:{sid}")
            assert state is not None and state.messages == 2 and state.title == "Through two links"
        with SessionRegistry.open(second, follow=False) as behind:  # --agent behind: fast-agent is one name
            state = behind.state(f"fast-agent:{sid}")
            assert state is not None and state.messages == 2 and state.title == "Through two links"


def test_claude_agent_acp_history_a_turn_and_a_forwarded_delete_through_the_conductor(tmp_path: Path) -> None:
    node = peers.conductor_node()
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        kept, doomed = _history(world, "Refactor the parser", "Write the changelog")
        command = peers.chain_command(node, peers.link_command(world.store_url), peers.CLAUDE_AGENT_ACP.command())
        with AcpProcess(command, env=peers.conductor_env(world.env), cwd=world.project) as chain:
            init = chain.call("initialize", INITIALIZE, timeout=120)
            # Named from the agent's answer at the chain's end, as the importers name Claude Code.
            assert init["_meta"]["acp-session-registry/proxy"]["agent"] == "claude-code"
            sessions = by_id(wait_for_list(chain, lambda s: {kept, doomed} <= set(by_id(s))))
            assert sessions[kept]["title"] == "Refactor the parser"
            world.load(chain, kept)
            assert REPLY_PREFIX + "Refactor the parser" in chain.text(kept)
            world.turn(chain, kept, "Now add tests")
            assert REPLY_PREFIX + "Now add tests" in chain.text(kept)
            assert chain.call("session/delete", {"sessionId": doomed}) == {}
            assert set(by_id(list_all(chain))) == {kept}
            assert chain.close() == 0, chain.stderr_tail()
        assert doomed not in _transcripts(world)  # forwarded through the conductor: the agent deleted it
        with world.registry() as registry:
            state = registry.state(f"claude-code:{kept}")
            assert state is not None and state.title == "Refactor the parser"
            assert [s.session_id for s in registry.list().sessions] == [f"claude-code:{kept}"]
