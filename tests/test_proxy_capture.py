"""What the proxy records of the conversations it relays: each turn's messages, in order, with their roles, and
what the turn used; the past an agent replays on load; and a user's delete that erases it. Real processes: the
proxy, the scripted agent (``tests/proxy_agent.py``) or ``acp-registry serve``, and the official ACP Python SDK
client."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from acp import Client, image_block, resource_link_block, spawn_agent_process, text_block

from events.model import Usage
from registry.service import SessionRegistry
from tests.proxy_wire import ROOT, ProxyProcess, prompt, proxy_command, started
from tests.test_proxy_sdk import SdkClient

_SEARCHER = """
import sys, time
from registry.service import SessionRegistry
with SessionRegistry.open(sys.argv[1]) as registry:
    registry.search(sys.argv[2])  # warm: the index and the statements are ready before the turn
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.monotonic()
    while not registry.search(sys.argv[2]).hits and time.monotonic() - started < 30:
        pass
    print(time.monotonic() - started, flush=True)
"""


def _stored(session: str) -> str:
    return f"scripted-agent:{session}"


def _on_disk(path: Path) -> bytes:
    """The bytes of a SQLite store: its file and its WAL."""
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def _lines(url: str, session: str) -> list[tuple[str, str]]:
    with SessionRegistry.open(url) as registry:
        return [(line.role, line.text) for line in registry.transcript(session).lines()]


@pytest.mark.idle  # a second from the turn to another process finding it: a bound a busy machine may pass
def test_a_word_said_through_the_proxy_is_found_by_another_process_within_a_second(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        searcher = subprocess.Popen(
            [sys.executable, "-c", _SEARCHER, url, "kumquatish"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        assert searcher.stdout is not None and searcher.stdin is not None
        assert searcher.stdout.readline().strip() == "ready"
        assert proxy.result(2, "session/prompt", prompt(session, "the kumquatish plan")) == {"stopReason": "end_turn"}
        searcher.stdin.write("go\n")
        searcher.stdin.flush()
        elapsed = float(searcher.stdout.readline())
        assert searcher.wait(30) == 0
        assert elapsed < 1.0, f"found {elapsed:.3f} s after the turn was answered"
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        (hit,) = registry.search("kumquatish").hits
        assert hit.agent == "scripted-agent" and {s.role for s in hit.snippets} == {"user", "agent"}


def test_a_turn_is_kept_in_order_with_every_role(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "first words"))
        proxy.result(3, "session/prompt", prompt(session, "rich parser"))
        assert proxy.close() == 0
    assert _lines(url, _stored(session)) == [
        ("user", "first words"),
        ("agent", "first words"),
        ("user", "rich parser"),
        ("thought", "think parser"),
        ("plan", "[completed] plan parser"),  # where the plan first appeared, as it last stood
        ("tool", "Edit parser.py [edit, completed]\noutput parser\n/src/parser.py\nnew parser"),
        ("agent", "answer parser [resource: notes.md <file:///notes.md>] done"),
    ]
    with SessionRegistry.open(url) as registry:
        state = registry.state(_stored(session))
        assert state is not None and state.messages == 4  # what the user and the agent said: two turns
        assert [e.messages for e in registry.activity(_stored(session))] == [2, 2]


def test_the_python_sdk_client_through_the_proxy_is_recorded(tmp_path: Path) -> None:
    """The official SDK client's prompt blocks: text, an image (a marker, never its bytes) and a resource link."""
    url = f"sqlite://{tmp_path}/sessions.db"

    async def main() -> str:
        client = SdkClient()
        command = proxy_command(url)
        async with spawn_agent_process(cast(Client, client), command[0], *command[1:], cwd=ROOT) as (conn, _):
            await conn.initialize(protocol_version=1)
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            blocks: list[Any] = [
                text_block("Look at"),
                image_block("iVBORw0KGgoAAAANSUhEUg==", "image/png"),
                resource_link_block("main.py", "file:///w/main.py"),
            ]
            await conn.prompt(session_id=session, prompt=blocks)
            await conn.prompt(session_id=session, prompt=[text_block("rich lexer")])
            return session

    session = asyncio.run(main())
    lines = _lines(url, _stored(session))
    assert lines[0] == ("user", "Look at [image: image/png] [resource: main.py <file:///w/main.py>]")
    assert [role for role, _ in lines] == ["user", "agent", "user", "thought", "plan", "tool", "agent"]
    assert b"iVBORw0KGgoAAAANSUhEUg" not in _on_disk(
        tmp_path / "sessions.db"
    )  # the image's bytes went to the agent, not into the store


def test_usage_is_recorded_per_turn_as_what_the_turn_added(tmp_path: Path) -> None:
    """The scripted agent reports as the schema words it: cumulative tokens in the answer, cumulative cost in
    ``usage_update``; each turn keeps its own share."""
    url = f"sqlite://{tmp_path}/sessions.db"
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "spend 1000 200 0.25"))
        proxy.result(3, "session/prompt", prompt(session, "plain words"))  # reports nothing
        proxy.result(4, "session/prompt", prompt(session, "spend 500 50 0.125"))
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        used = [e.usage for e in registry.activity(_stored(session))]
    # The scripted agent's costs are in dollars and its context holds 200,000 tokens.
    spent = functools.partial(Usage, currency="USD", context_size=200000)
    assert used == [
        spent(input_tokens=1000, output_tokens=200, cost_nanos=250_000_000, context_used=1200),
        None,
        spent(input_tokens=500, output_tokens=50, cost_nanos=125_000_000, context_used=1750),
    ]


@pytest.mark.parametrize("keeps_totals", [True, False])
def test_a_later_proxy_counts_a_loaded_session_from_what_was_recorded(tmp_path: Path, keeps_totals: bool) -> None:
    """A session loaded by a second proxy. An agent that keeps its cumulative figures with the session reports
    them including the turns the first proxy recorded: the next turn counts from what the registry holds. One
    whose count starts again with its process reports less than that: all it reports is the new turn's."""
    url = f"sqlite://{tmp_path}/sessions.db"
    keep = tmp_path / "kept.json"
    first, session = started(url, "--keep", str(keep), cwd=str(tmp_path))
    with first:
        first.result(2, "session/prompt", prompt(session, "spend 100 10 1"))
        assert first.close() == 0
    if not keeps_totals:
        kept = json.loads(keep.read_text())
        del kept[session]["spent"]
        keep.write_text(json.dumps(kept))
    with ProxyProcess(proxy_command(url, "--keep", str(keep))) as second:
        second.result(0, "initialize", {"protocolVersion": 1})
        second.result(1, "session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        answer = second.result(2, "session/prompt", prompt(session, "spend 30 3 0.5"))
        assert answer["usage"]["inputTokens"] == (130 if keeps_totals else 30)
        assert second.close() == 0
    with SessionRegistry.open(url) as registry:
        used = [e.usage for e in registry.activity(_stored(session))]
    assert [(u.input_tokens, u.output_tokens, u.cost_nanos) for u in used if u is not None] == [
        (100, 10, 1_000_000_000),
        (30, 3, 500_000_000),
    ]


def _past(tmp_path: Path, history: list[list[str]]) -> str:
    path = tmp_path / "past.json"
    session = {"sessionId": "old-1", "cwd": str(tmp_path), "title": "An old session", "history": history}
    path.write_text(json.dumps([session]))
    return str(path)


def test_a_load_replay_fills_a_session_that_had_no_messages_once(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"
    history = [["user", "How do I parse TOML?"], ["thought", "tomllib exists"], ["agent", "Use tomllib."]]
    past = _past(tmp_path, history)
    for run in range(2):  # the second load replays it again: not kept twice
        with ProxyProcess(proxy_command(url, "--list", "--past", past)) as proxy:
            proxy.result(0, "initialize", {"protocolVersion": 1})
            listed = proxy.result(1, "session/list", {})
            assert [s["sessionId"] for s in listed["sessions"]] == ["old-1"]
            proxy.result(2, "session/load", {"sessionId": "old-1", "cwd": str(tmp_path), "mcpServers": []})
            if run == 1:
                proxy.result(3, "session/prompt", prompt("old-1", "And YAML?"))
            assert proxy.close() == 0
        with SessionRegistry.open(url) as registry:
            state = registry.state(_stored("old-1"))
            assert state is not None and state.messages == 2 + 2 * run
            lines = [(line.role, line.text) for line in registry.transcript(_stored("old-1")).lines()]
            assert lines == [*map(tuple, history), *([("user", "And YAML?"), ("agent", "And YAML?")] * run)]
            assert registry.search("tomllib").hits


def test_serve_behind_the_proxy_replays_its_transcript_into_the_proxy_store(tmp_path: Path) -> None:
    """``acp-registry serve`` records its own turns and replays them from its transcript on load; the proxy,
    whose store has the session from serve's list but none of its messages, keeps the replay."""
    agent_store = f"sqlite://{tmp_path}/agent.db"
    with SessionRegistry.open(agent_store) as own:  # a turn from before messages were kept, in the payload
        own.create(str(tmp_path), session_id="before-1")
        own.record_activity("before-1", messages=2, payload={"prompt": [{"type": "text", "text": "hi"}], "reply": "hi"})
    url = f"sqlite://{tmp_path}/proxy.db"
    serve = [sys.executable, "-m", "registry.cli", "serve", "--store", agent_store]
    with ProxyProcess(proxy_command(url, command=serve)) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        proxy.result(1, "session/load", {"sessionId": "before-1", "cwd": str(tmp_path), "mcpServers": []})
        proxy.result(2, "session/prompt", prompt("before-1", "a served lorikeet"))
        assert proxy.close() == 0
    with SessionRegistry.open(agent_store) as own:  # serve kept its own turn as messages
        assert [(line.role, line.text) for line in own.transcript("before-1").lines()] == [
            ("user", "a served lorikeet"),
            ("agent", "a served lorikeet"),
        ]
    with ProxyProcess(proxy_command(str(url), command=serve)) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        proxy.result(1, "session/load", {"sessionId": "before-1", "cwd": str(tmp_path), "mcpServers": []})
        replayed = [u["sessionUpdate"] for u in (n["params"]["update"] for n in proxy.notifications)]
        assert replayed.count("user_message_chunk") == 2 and replayed.count("agent_message_chunk") == 2
        assert proxy.close() == 0
    assert _lines(url, "acp-session-registry:before-1") == [
        ("user", "hi"),
        ("agent", "hi"),
        ("user", "a served lorikeet"),
        ("agent", "a served lorikeet"),
    ]


def test_a_delete_through_the_proxy_erases_the_conversation_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    url = f"sqlite://{path}"
    marker = "zqxvmarker"  # short: kept as it is (compression starts with longer texts)
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "a title"))  # a title stays in the tombstone
        proxy.result(3, "session/prompt", prompt(session, f"the {marker} words"))
        proxy.result(5, "session/list", {})  # answered once the recorder wrote the turn
        assert marker.encode() in _on_disk(path)  # the test can fail: the words are on disk before
        assert proxy.result(4, "session/delete", {"sessionId": session}) == {}
        assert marker.encode() not in _on_disk(path)
        assert proxy.close() == 0
    with SessionRegistry.open(url) as registry:
        assert not registry.search(marker).hits
        state = registry.state(_stored(session))
        assert state is not None and state.deleted
        assert registry.transcript(_stored(session)).lines() == []
    verified = subprocess.run(
        [sys.executable, "-m", "registry.cli", "verify", "--store", url], cwd=ROOT, capture_output=True, check=False
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
