"""What the proxy records of real agents' turns: claude-agent-acp against the LLM stub (its words found by search, its
``usage_update`` and the prompt answer's usage kept with the turn), codex-acp against the stub (found from another
process while the proxy runs), and fast-agent with ``--model passthrough`` (its echo found, a load's replay kept for
a session the proxy's store held no message of). Run with ``make test-agents``; each test skips with one line when
its agent is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agents import peers
from tests.agents.llm_stub import REPLY_PREFIX
from tests.agents.scene import scene

pytestmark = pytest.mark.real_agents


def test_claude_agent_acp_turns_are_found_by_search_with_their_usage(tmp_path: Path) -> None:
    """claude-agent-acp reports the session's cumulative cost in its last ``usage_update`` of a turn, and the turn's
    own tokens in the prompt answer (``PER_TURN_USAGE``): each turn keeps what it added."""
    with scene(tmp_path, peers.CLAUDE_AGENT_ACP, stub=True) as world:
        proxy = world.proxy()
        sid = world.new_session(proxy)
        answers, reported = [], []
        for text in ("Explain the wombatgrid layout", "Now the quollmesh one"):
            seen = len(proxy.updates(sid, "usage_update"))
            answers.append(world.turn(proxy, sid, text))
            reported.append(proxy.updates(sid, "usage_update")[seen:])
        assert proxy.text(sid).startswith(REPLY_PREFIX + "Explain the wombatgrid layout")
        assert proxy.close() == 0, proxy.stderr_tail()
        with world.registry() as registry:
            (hit,) = registry.search("wombatgrid").hits
            assert hit.agent == "claude-code" and hit.session_id == sid
            assert [h.session_id for h in registry.search("quollmesh").hits] == [sid]
            lines = registry.transcript(f"claude-code:{sid}").lines()
            used = [e.usage for e in registry.activity(f"claude-code:{sid}") if e.content is not None]
    assert lines[0].role == "user" and lines[0].text == "Explain the wombatgrid layout"
    said = [line.text for line in lines if line.role == "agent"]
    assert any(text.startswith(REPLY_PREFIX + "Explain the wombatgrid layout") for text in said), said
    assert len(used) == 2
    cost_before = 0
    for usage, answer, updates in zip(used, answers, reported, strict=True):
        assert usage is not None and updates, "claude-agent-acp sent no usage_update"
        last = updates[-1]
        assert (usage.context_used, usage.context_size) == (last["used"], last["size"])
        assert usage.model == last["_meta"]["_claude/model"]
        (cost,) = [u["cost"] for u in updates if isinstance(u.get("cost"), dict)]  # once a turn, cumulative
        nanos = round(cost["amount"] * 1_000_000_000)
        assert (usage.currency, usage.cost_nanos) == (cost["currency"], nanos - cost_before)
        cost_before = nanos
        tokens = answer["usage"]  # the turn's own
        assert (usage.input_tokens, usage.output_tokens) == (tokens["inputTokens"], tokens["outputTokens"])
        assert (usage.cached_read_tokens, usage.cached_write_tokens) == (
            tokens["cachedReadTokens"],
            tokens["cachedWriteTokens"],
        )


def test_fast_agent_echo_is_found_and_a_load_replay_is_kept(tmp_path: Path) -> None:
    with scene(tmp_path, peers.FAST_AGENT) as world:
        proxy = world.proxy(name="fast-agent")
        sid = world.new_session(proxy)
        world.turn(proxy, sid, "the numbat manifest")
        assert proxy.close() == 0, proxy.stderr_tail()
        with world.registry() as registry:
            assert [h.session_id for h in registry.search("numbat").hits] == [sid]
            lines = [(line.role, line.text) for line in registry.transcript(f"fast-agent:{sid}").lines()]
        assert lines[0] == ("user", "the numbat manifest") and any(
            role == "agent" and "numbat" in text for role, text in lines[1:]
        ), lines
        # A second store that has the session from the agent's own list, but none of its messages: a load fills it.
        world.store_url = f"sqlite://{tmp_path / 'second.db'}"
        again = world.proxy(name="fast-agent")
        world.load(again, sid)
        assert again.close() == 0, again.stderr_tail()
        with world.registry() as registry:
            replayed = [(line.role, line.text) for line in registry.transcript(f"fast-agent:{sid}").lines()]
        assert replayed[0] == ("user", "the numbat manifest") and [r for r, _ in replayed] == [r for r, _ in lines]


def test_codex_acp_turn_is_found_from_another_process_while_the_proxy_runs(tmp_path: Path) -> None:
    """codex-acp against the LLM stub: a word of a turn is found - while the proxy still runs - by
    ``acp-registry search`` in a process of its own, and by the proxy's ``session/list`` with the query key; the
    transcript shows the turn in order."""
    with scene(tmp_path, peers.CODEX_ACP, stub=True) as world:
        proxy = world.proxy()
        assert proxy.call("authenticate", {"methodId": "codex-api-key"}) == {}
        sid = world.new_session(proxy)
        world.turn(proxy, sid, "Port the bandicootqueue scheduler")
        command = [sys.executable, "-m", "registry.cli", "--store", world.store_url, "search", "bandicootqueue"]
        deadline = time.monotonic() + 30  # bounded: durable on the answer; the wait is for a loaded machine
        while True:
            found = subprocess.run([*command, "--json"], capture_output=True, text=True, check=False, timeout=60)
            assert found.returncode == 0, found.stderr
            hits = json.loads(found.stdout)["hits"]
            if hits or time.monotonic() > deadline:
                break
        assert [(h["sessionId"], h["agent"]) for h in hits] == [(sid, "codex")], found.stdout
        listed = proxy.call("session/list", {"_meta": {"acp-session-registry/query": "bandicootqueue"}})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        assert proxy.call("session/list", {"_meta": {"acp-session-registry/query": "wallabyqueue"}})["sessions"] == []
        assert proxy.close() == 0, proxy.stderr_tail()
        with world.registry() as registry:
            lines = [(line.role, line.text) for line in registry.transcript(f"codex:{sid}").lines()]
    assert lines[0] == ("user", "Port the bandicootqueue scheduler"), lines
    assert any(role == "agent" and REPLY_PREFIX in text for role, text in lines[1:]), lines
