"""One agent, one name, whichever way it is started: ``--agent``, ``agentInfo``, the command, before or after
``initialize`` - and sessions an older proxy recorded under another name of the agent are taken over, not listed
twice; a deletion made under the other name holds.

Real proxy processes in front of the scripted agent (``tests/proxy_agent.py``, here calling itself
``fast-agent-acp`` as fast-agent does) on a real SQLite store; its ``--log`` shows exactly what reached it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from events.model import Message, Role, TitleSource, Usage
from registry.agents import agent_name, command_name
from registry.service import SessionRegistry
from tests.proxy_wire import ProxyProcess, prompt, proxy_command

OLD_AT = 1_767_000_000_000_000_000  # 2025-12-29: made long before these proxies started


def _agent(proxy: ProxyProcess) -> str:
    answer = proxy.result(0, "initialize", {"protocolVersion": 1})
    name = answer["_meta"]["acp-session-registry/proxy"]["agent"]
    assert isinstance(name, str)
    return name


@pytest.mark.parametrize(
    "given", [None, "fast-agent", "fast-agent-acp", "Fast Agent", "@evalstate/fast-agent-mcp", "fast-agent-mcp"]
)
def test_fast_agent_is_one_name_however_it_is_started(url: str, given: str | None) -> None:
    with ProxyProcess(proxy_command(url, "--name", "fast-agent-acp", agent=given)) as proxy:
        assert _agent(proxy) == "fast-agent"
        assert proxy.close() == 0


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("@agentclientprotocol/claude-agent-acp", "claude-code"),
        ("@zed-industries/claude-code-acp", "claude-code"),
        ("@zed-industries/claude-agent-acp", "claude-code"),
        ("claude-agent-acp@0.101.0", "claude-code"),
        ("claude-code-acp", "claude-code"),
        ("fast-agent-acp", "fast-agent"),
        ("fast-agent", "fast-agent"),
        ("@mistralai/mistral-vibe", "mistral-vibe"),
        ("vibe-acp", "mistral-vibe"),
        ("Kimi CLI", "kimi"),
        ("Kimi Code CLI", "kimi"),  # kimi-cli 1.x's agentInfo.name; its history is kimi's (~/.kimi)
        ("kimi-code", "kimi-code"),  # the separate Kimi Code product keeps its own name
        ("@zed-industries/codex-acp", "codex"),
        ("codex-acp", "codex"),
        ("codex-acp@0.16.0", "codex"),
        ("/usr/local/bin/codex-acp", "codex"),
        ("@google/gemini-cli", "gemini"),
        ("gemini-cli", "gemini"),
        ("@qwen-code/qwen-code", "qwen"),
        ("qwen-code", "qwen"),
        ("opencode", "opencode"),
    ],
)
def test_the_names_known_agents_go_by_map_to_their_one_name(name: str, known: str) -> None:
    """As ``agentInfo.name`` says it, and as the program or package a command starts."""
    assert agent_name(name) == known
    assert command_name(["npx", "-y", name]) == known


def test_sessions_held_under_another_name_are_taken_over_once_with_what_the_user_set(url: str, tmp_path: Path) -> None:
    """A store an older proxy wrote as ``fast-agent-acp`` (before the alias was declared): the same sessions, one
    record each, under ``fast-agent``; the user's title stays; a session deleted there is refused and never
    reaches the agent, and its ``load`` is not recorded as a new copy."""
    log = tmp_path / "agent.log"
    with SessionRegistry.open(url) as registry:
        for native in ("titled", "plain", "gone"):
            registry.create(str(tmp_path), session_id=f"fast-agent-acp:{native}", agent="fast-agent-acp", at=OLD_AT)
            registry.record_activity(f"fast-agent-acp:{native}", messages=2, at=OLD_AT + 1)
        registry.change_info("fast-agent-acp:titled", title="Mine", title_source=TitleSource.USER)
        registry.delete("fast-agent-acp:gone")
    past = tmp_path / "past.json"  # the agent still has all three
    past.write_text(json.dumps([{"sessionId": n, "cwd": str(tmp_path)} for n in ("titled", "plain", "gone")]))
    command = proxy_command(url, "--name", "fast-agent-acp", "--list", "--past", str(past), "--log", str(log))
    with ProxyProcess(command) as proxy:
        assert _agent(proxy) == "fast-agent"
        listed = {s["sessionId"]: s for s in proxy.result(1, "session/list", {})["sessions"]}
        assert sorted(listed) == ["plain", "titled"]
        assert listed["titled"]["title"] == "Mine"
        assert listed["titled"]["_meta"]["acp-session-registry/messageCount"] == 2
        load = {"sessionId": "gone", "cwd": str(tmp_path), "mcpServers": []}
        assert proxy.call(2, "session/load", load)["error"]["code"] == -32002
        old_form = {"sessionId": "fast-agent-acp:plain", "cwd": str(tmp_path), "mcpServers": []}
        assert proxy.result(3, "session/load", old_form) == {}  # the id the command line printed before
        assert proxy.close() == 0
    loads = [json.loads(line) for line in log.read_text().splitlines() if '"session/load"' in line]
    assert [line["params"]["sessionId"] for line in loads] == ["plain"]
    with SessionRegistry.open(url) as registry:
        everything = registry.list(archived="include").sessions
        assert sorted(s.session_id for s in everything) == ["fast-agent:plain", "fast-agent:titled"]
        gone = registry.state("fast-agent:gone")
        assert gone is None or gone.deleted


def test_a_taken_over_session_keeps_its_conversation_and_usage_under_the_one_name(url: str, tmp_path: Path) -> None:
    """The conversation and what each turn used move with the record: the transcript reads the same under the new
    name, a word said is found there once, and the usage totals are what they were."""
    old = "fast-agent-acp:talked"
    with SessionRegistry.open(url) as registry:
        registry.create(str(tmp_path), session_id=old, agent="fast-agent-acp", at=OLD_AT)
        for n in range(2):
            said = [
                Message(role=Role.USER, text=f"turn {n}: why is zorblax_handler slow", at=OLD_AT + 10 * n + 1),
                Message(role=Role.AGENT, text=f"answer {n}", at=OLD_AT + 10 * n + 2),
            ]
            registry.record_messages(old, said, at=OLD_AT + 10 * n + 2, usage=Usage(input_tokens=100, output_tokens=7))
        registry.record_activity(old, messages=1, at=OLD_AT + 50)  # counted without a turn of its own
        before = registry.transcript(old).lines()
        used = registry.state(old)
        assert used is not None and used.usage is not None
    past = tmp_path / "past.json"
    past.write_text(json.dumps([{"sessionId": "talked", "cwd": str(tmp_path)}]))
    with ProxyProcess(proxy_command(url, "--name", "fast-agent-acp", "--list", "--past", str(past))) as proxy:
        assert _agent(proxy) == "fast-agent"
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        assert registry.transcript("fast-agent:talked").lines() == before
        found = registry.search("zorblax_handler").hits
        assert [(h.session_id, h.agent) for h in found] == [("talked", "fast-agent")]
        state = registry.state("fast-agent:talked")
        assert state is not None
        assert (state.messages, state.usage, state.updated_at) == (used.messages, used.usage, used.updated_at)


def test_a_mismatch_between_agent_and_agent_info_is_resolved_once_and_said_once(url: str, tmp_path: Path) -> None:
    """``--agent foo`` in front of fast-agent, with sessions recorded as ``foo`` before: one name, the agent's,
    the ``foo`` sessions taken over, and one line on stderr saying so."""
    with SessionRegistry.open(url) as registry:
        registry.create(str(tmp_path), session_id="foo:s1", agent="foo", at=OLD_AT)
        registry.record_activity("foo:s1", messages=2, at=OLD_AT + 1)
    with ProxyProcess(proxy_command(url, "--name", "fast-agent-acp", agent="foo")) as proxy:
        assert _agent(proxy) == "fast-agent"
        session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        proxy.result(2, "session/prompt", prompt(session, "hello"))
        assert sorted(s["sessionId"] for s in proxy.result(3, "session/list", {})["sessions"]) == sorted(
            [session, "s1"]
        )
        assert proxy.close() == 0
    said = [line for line in proxy.stderr_lines if "foo" in line]
    assert len(said) == 1 and "fast-agent" in said[0], proxy.stderr_lines
    with SessionRegistry.open(url) as registry:
        assert [s.session_id for s in registry.list(agent="foo").sessions] == []
        assert {s.session_id for s in registry.list(agent="fast-agent").sessions} == {
            f"fast-agent:{session}",
            "fast-agent:s1",
        }
