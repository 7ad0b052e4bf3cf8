"""``acp-registry search``, ``transcript`` and ``delete`` as a user runs them: their exact JSON, their words on a
terminal, their exit codes - and ``session/list`` with a query over ACP, as ``serve`` answers it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from events.model import Message, Role
from registry import SessionRegistry
from tests.cli_runner import Cli, one_error_line

MARKER = "zqxv-erase-me-4471"
T0 = 1_800_000_000_000_000_000


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        registry.create(
            "/work/app", session_id="claude-code:6b1d2c3e-aaaa-bbbb-cccc-000000000001", agent="claude-code", at=T0
        )
        registry.record_messages(
            "claude-code:6b1d2c3e-aaaa-bbbb-cccc-000000000001",
            [
                Message(role=Role.USER, text=f"Why does login_handler fail? {MARKER}", at=T0 + 1),
                Message(role=Role.THOUGHT, text="look at the token path", at=T0 + 2),
                Message(role=Role.AGENT, text="The token refresh drops the key.", at=T0 + 3),
            ],
            at=T0 + 3,
        )
        registry.create("/work/lib", session_id="mine", at=T0)
        registry.record_messages("mine", [Message(role=Role.USER, text="unrelated words", at=None)], at=T0 + 9)
    return path


def test_search_json_is_the_documented_shape(run: Cli, store: Path) -> None:
    result = run("--json", "search", "login", store=store)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "hits": [
            {
                "sessionId": "6b1d2c3e-aaaa-bbbb-cccc-000000000001",
                "agent": "claude-code",
                "cwd": "/work/app",
                "title": None,
                "updatedAt": "2027-01-15T08:00:00.000Z",
                "snippets": [{"role": "user", "text": f"Why does **login**_handler fail? {MARKER}"}],
            }
        ]
    }
    nothing = run("search", "nothing-like-it", "--json", store=store)
    assert nothing.returncode == 0 and json.loads(nothing.stdout) == {"hits": []}


def test_search_on_a_pipe_and_its_filters(run: Cli, store: Path) -> None:
    shown = run("search", "token", "--agent", "claude-agent-acp", "--since", "2027-01-01", store=store)
    assert shown.returncode == 0 and shown.stdout.startswith("6b1d2c3e-aaaa-bbbb-cccc-000000000001  claude-code")
    assert "    agent: The **token** refresh drops the key." in shown.stdout
    assert run("search", "token", "--cwd", "/work/lib", store=store).stdout == ""
    assert "no session matches" in run("search", "token", "--until", "2026-01-01", store=store).stderr
    for bad, why in (("--limit", "0"), ("--since", "yesterday"), ("--archived", "maybe")):
        line = one_error_line(run("search", "token", bad, why, store=store))
        assert bad in line or why in line
    assert "no words" in one_error_line(run("search", "()", store=store))


def test_transcript_json_markdown_and_text(run: Cli, store: Path) -> None:
    result = run("transcript", "6b1d2c3e", "--json", store=store)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "sessionId": "6b1d2c3e-aaaa-bbbb-cccc-000000000001",
        "messages": [
            {"role": "user", "text": f"Why does login_handler fail? {MARKER}", "at": "2027-01-15T08:00:00.000Z"},
            {"role": "thought", "text": "look at the token path", "at": "2027-01-15T08:00:00.000Z"},
            {"role": "agent", "text": "The token refresh drops the key.", "at": "2027-01-15T08:00:00.000Z"},
        ],
    }
    markdown = run("transcript", "6b1d2c3e-aaaa-bbbb-cccc-000000000001", "--markdown", store=store).stdout
    assert markdown.startswith("# claude-code:6b1d2c3e-aaaa-bbbb-cccc-000000000001\n")
    assert "## User · 2027-01-15T08:00:00.000Z" in markdown and "## Thought" in markdown
    text = run("transcript", "mine", store=store)
    assert "User" in text.stdout and "unrelated words" in text.stdout
    assert "no session 'nobody'" in one_error_line(run("transcript", "nobody", store=store))
    with SessionRegistry.open(f"sqlite://{store}") as registry:
        registry.create("/w", session_id="quiet")
    assert json.loads(run("transcript", "quiet", "--json", store=store).stdout) == {
        "sessionId": "quiet",
        "messages": [],
    }


def test_delete_erases_the_conversation_from_the_files(run: Cli, tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        registry.create("/w", session_id="victim")
        registry.record_messages("victim", [Message(role=Role.USER, text=f"say {MARKER} once")])  # short: kept plain
        registry.create("/w", session_id="other")
        registry.record_messages("other", [Message(role=Role.USER, text="stays")])
        registry.search(MARKER)  # the index holds it too

    def raw() -> bytes:
        return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("plain.db"))

    assert MARKER.encode() in raw()
    result = run("delete", "victim", store=path)
    assert result.returncode == 0 and "erased" in result.stdout
    assert MARKER.encode() not in raw()
    assert json.loads(run("search", MARKER, "--json", store=path).stdout) == {"hits": []}
    assert json.loads(run("--json", "delete", "victim", store=path).stdout) == {
        "sessionId": "victim",
        "deleted": True,
        "erased": 0,
    }
    verify = run("verify", "--json", store=path)
    assert verify.returncode == 0 and json.loads(verify.stdout)["healthy"] is True
    assert "no session" in one_error_line(run("delete", "nobody", store=path))
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
    db.close()


def _serve(store: Path, *requests: dict[str, object]) -> list[dict[str, object]]:
    lines = "".join(json.dumps({"jsonrpc": "2.0", "id": n, **r}) + "\n" for n, r in enumerate(requests))
    done = subprocess.run(
        [sys.executable, "-m", "registry.cli", "--store", f"sqlite://{store}", "serve"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_session_list_with_a_query_answers_only_the_matches(store: Path) -> None:
    init, found, goose, none, bad = _serve(
        store,
        {"method": "initialize", "params": {"protocolVersion": 1}},
        {"method": "session/list", "params": {"_meta": {"acp-session-registry/query": "token"}}},
        {"method": "session/list", "params": {"_meta": {"query": "unrelated"}}},
        {"method": "session/list", "params": {"cwd": "/work/lib", "_meta": {"acp-session-registry/query": "token"}}},
        {"method": "session/list", "params": {"_meta": {"acp-session-registry/query": ["token"]}}},
    )
    capabilities = init["result"]["agentCapabilities"]["sessionCapabilities"]  # type: ignore[index]
    assert capabilities["list"] == {"_meta": {"acp-session-registry/query": {}}}
    sessions = found["result"]["sessions"]  # type: ignore[index]
    assert [s["sessionId"] for s in sessions] == ["claude-code:6b1d2c3e-aaaa-bbbb-cccc-000000000001"]
    assert sessions[0]["_meta"]["acp-session-registry/snippets"][0]["role"] == "thought"
    assert [s["sessionId"] for s in goose["result"]["sessions"]] == ["mine"]  # type: ignore[index]
    assert none["result"] == {"sessions": []}
    assert bad["error"]["code"] == -32602  # type: ignore[index]
