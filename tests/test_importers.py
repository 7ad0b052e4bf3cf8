"""Importing Claude Code's histories end to end: a session from the spec's fixture, its title's sources and
priority, what is not a session (subagents, odd files, the SDK's hidden tag), cwds and recency from records only,
hostile input; and what holds for every importer: each writes through one function (never the facade), fails
with registry errors, and all run in one pass with their default roots from the environment.

What a later pass does (incremental reads, idempotency, deletes) is in ``test_importers_incremental.py``; the
other agents' formats in ``test_importers_codex.py``, ``_gemini``, ``_kimi``, ``_qwen`` and ``_databases`` (goose
and opencode), files shaped like the agents' own in ``_recordings``, the command in ``_command``; the helpers and
Claude Code records they share in ``tests/importing.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from events import MemoryStore, TitleSource
from events.errors import RegistryError
from events.store import EventStore
from registry import SessionRegistry
from registry.agents import META_SOURCE_GONE
from registry.importers import Importer, ImportStateError, sources
from registry.importers.databases import SchemaError
from registry.importers.importer import (
    META_AGENT_ARCHIVED,
    META_AGENT_MESSAGES,
    META_AGENT_SESSION_ID,
    META_GIT_BRANCH,
    META_PATH,
)
from registry.importers.lines import GLUED
from registry.model import META_AGENT, META_MESSAGES, META_TITLE_SOURCE, parse_time
from tests.importing import PROJECT, SID, listing, only, prompt, reply, run_import, session_file, skipped, write_lines
from tests.test_importers_codex import codex_tree
from tests.test_importers_gemini import gemini_tree
from tests.test_importers_kimi import kimi_tree
from tests.test_importers_qwen import qwen_tree

# -- Claude Code -----------------------------------------------------------------------------------------


def test_claude_code_session_from_the_spec_fixture(claude: Path) -> None:
    store = MemoryStore()
    summary = run_import(store, "claude-code", claude)
    assert (summary.agents[0].added, summary.agents[0].skipped) == (1, [])
    session = only(store)
    assert session == {
        "sessionId": f"claude-code:{SID}",
        "cwd": "/home/dev/acme-api",
        "title": "orders pagination",
        "updatedAt": "2026-03-02T09:14:09.120Z",  # the last user/assistant record, never the file's mtime
        "_meta": {
            "acp-session-registry/agent": "claude-code",
            "acp-session-registry/agentSessionId": SID,
            META_PATH: str(session_file(claude)),
            META_AGENT_MESSAGES: 2,  # one prompt + one assistant message split over two lines; tool result excluded
            META_GIT_BRANCH: "main",
            META_TITLE_SOURCE: "user",
            META_MESSAGES: 2,
        },
    }
    state = SessionRegistry(store, follow=False).state(f"claude-code:{SID}")
    assert state is not None and state.created_at == parse_time("2026-03-02T09:14:05.118Z")


def test_claude_code_title_priority_and_sources(tmp_path: Path) -> None:
    root = tmp_path / "claude"
    path = session_file(root)
    store = MemoryStore()
    write_lines(
        path,
        [
            prompt("2026-03-02T09:00:00Z", "<ide_opened_file>x</ide_opened_file>"),
            prompt("2026-03-02T09:00:01Z", "Fix\nthe   build"),
        ],
    )
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Fix the build", "prompt")
    # Claude Code writes summaries of other sessions into the open transcript: their leafUuid is not ours.
    write_lines(path, [{"type": "summary", "summary": "Tailwind catalog", "leafUuid": "u-elsewhere"}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Fix the build", "prompt")
    write_lines(path, [{"type": "summary", "summary": "Build fix", "leafUuid": "u-2026-03-02T09:00:01Z"}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Build fix", "agent")
    write_lines(path, [{"type": "last-prompt", "lastPrompt": "and the tests", "sessionId": SID}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("and the tests", "prompt")
    write_lines(path, [{"type": "ai-title", "aiTitle": "Repair CI", "sessionId": SID}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Repair CI", "agent")
    write_lines(path, [{"type": "custom-title", "customTitle": "ci", "sessionId": SID}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("ci", "user")
    # A title-only append is metadata: updatedAt stays at the last prompt.
    assert only(store)["updatedAt"] == "2026-03-02T09:00:01.000Z"


def test_a_title_the_user_set_in_the_registry_survives_generated_titles(claude: Path, tmp_path: Path) -> None:
    path = session_file(claude, "11111111-2222-4333-8444-555555555555")
    write_lines(path, [prompt("2026-03-02T10:00:00Z", "first", session="11111111-2222-4333-8444-555555555555")])
    store = MemoryStore()
    run_import(store, "claude-code", claude)
    sid = "claude-code:11111111-2222-4333-8444-555555555555"
    with SessionRegistry(store, follow=False) as registry:
        registry.change_info(sid, title="mine", title_source=TitleSource.USER)
    write_lines(path, [{"type": "ai-title", "aiTitle": "Generated", "sessionId": "x"}], mode="a")
    write_lines(path, [reply("2026-03-02T10:05:00Z", "m2", session="11111111-2222-4333-8444-555555555555")], mode="a")
    summary = run_import(store, "claude-code", claude)
    assert summary.agents[0].changed == 1
    mine = next(s for s in listing(store) if s["sessionId"] == sid)
    assert (mine["title"], mine["updatedAt"]) == ("mine", "2026-03-02T10:05:00.000Z")


def test_subagent_transcripts_and_odd_files_are_not_sessions(claude: Path) -> None:
    project = claude / "projects" / PROJECT
    sidechain = {**prompt("2026-03-02T09:15:00Z", "Find all callers of listOrders"), "isSidechain": True}
    write_lines(project / "agent-7e2f9c1a.jsonl", [sidechain])  # legacy subagent file
    write_lines(project / SID / "subagents" / "agent-1.jsonl", [sidechain])  # current layout
    write_lines(project / "99999999-0000-4000-8000-000000000000.jsonl", [sidechain])  # sidechain first line
    write_lines(project / "notes.jsonl", [prompt("2026-03-02T09:15:00Z", "not a session file name")])
    write_lines(project / "88888888-0000-4000-8000-000000000000.jsonl", [{"type": "permission-mode"}])
    store = MemoryStore()
    summary = run_import(store, "claude-code", claude)
    assert [s["sessionId"] for s in listing(store)] == [f"claude-code:{SID}"]
    assert skipped(summary) == {
        "subagent transcript (isSidechain)": 1,
        "no cwd recorded": 1,
        "not a file claude-code writes (left alone)": 1,  # notes.jsonl: said, not read
    }


def test_lossy_folder_names_never_decide_the_cwd(claude: Path) -> None:
    # /home/dev/acme/api and /home/dev/acme-api share the folder name -home-dev-acme-api.
    other = "22222222-0000-4000-8000-000000000000"
    write_lines(
        session_file(claude, other), [prompt("2026-03-02T11:00:00Z", "hi", session=other, cwd="/home/dev/acme/api")]
    )
    store = MemoryStore()
    run_import(store, "claude-code", claude)
    assert sorted(s["cwd"] for s in listing(store)) == ["/home/dev/acme-api", "/home/dev/acme/api"]


def test_the_sdk_hidden_tag_is_a_delete(claude: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    run_import(store, "claude-code", claude, state=tmp_path / "a")
    hidden = "44444444-0000-4000-8000-000000000000"
    write_lines(
        session_file(claude, hidden),
        [
            prompt("2026-03-02T13:00:00Z", "secret", session=hidden),
            {"type": "tag", "tag": "__hidden", "sessionId": hidden},
        ],
    )
    summary = run_import(store, "claude-code", claude, state=tmp_path / "a")
    assert skipped(summary) == {"hidden by the agent (tag __hidden)": 1}  # never created
    assert [s["sessionId"] for s in listing(store)] == [f"claude-code:{SID}"]
    write_lines(session_file(claude), [{"type": "tag", "tag": "__hidden", "sessionId": SID}], mode="a")
    assert run_import(store, "claude-code", claude, state=tmp_path / "a").agents[0].removed == 1
    assert listing(store) == []


def test_recency_comes_from_records_never_from_file_times(claude: Path) -> None:
    os.utime(session_file(claude), (4_000_000_000, 4_000_000_000))  # year 2096
    store = MemoryStore()
    run_import(store, "claude-code", claude)
    assert only(store)["updatedAt"] == "2026-03-02T09:14:09.120Z"


def test_hostile_lines_are_skipped_and_counted_never_fatal(tmp_path: Path) -> None:
    root = tmp_path / "claude"
    path = session_file(root)
    write_lines(
        path,
        [
            prompt("2026-03-02T09:00:00Z", "start"),
            "{not json",
            "INVALID-UTF8",
            json.dumps(prompt("2026-03-02T09:00:01Z", "glued one")) + json.dumps(reply("2026-03-02T09:00:02Z", "g2")),
            prompt("2026-03-02T09:00:03Z", "x" * 5000),  # over the cap below
            {"type": "from-the-future", "timestamp": "2026-03-02T09:00:04Z", "payload": [1, 2, 3]},
            {"type": "user", "timestamp": "99999-01-01T00:00:00Z", "cwd": 5, "message": [1]},
            [1, 2, 3],
            reply("2026-03-02T09:00:05Z", "m3"),
        ],
    )
    path.write_bytes(path.read_bytes().replace(b"INVALID-UTF8", b'{"type": "\xff\xfe"}'))
    os.mkfifo(path.with_name("77777777-0000-4000-8000-000000000000.jsonl"))  # would block a reader forever
    store = MemoryStore()
    summary = run_import(store, "claude-code", root, line_cap=4096)
    assert skipped(summary) == {
        "not a regular file": 1,
        "line is not a JSON record, skipped": 3,
        "line over 4096 bytes skipped": 1,
        "record not understood (ValidationError), skipped": 1,  # "message": [1]
        GLUED: 1,  # both records are read (below), and the damaged line is named
    }
    examples = {g.reason: g.examples for g in summary.agents[0].skipped}
    assert examples["line is not a JSON record, skipped"] == [f"{path}:2"]  # file:line of the first one
    assert examples[GLUED] == [f"{path}:4"]
    session = only(store)
    assert (session["title"], session["_meta"][META_MESSAGES], session["updatedAt"]) == (
        "start",
        4,  # start, the glued prompt and its reply, the last reply
        "2026-03-02T09:00:05.000Z",
    )


# -- every importer ----------------------------------------------------------------------------------


def test_importers_write_through_one_function_and_never_through_the_facade(
    claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write of a pass goes through ``append_sessions`` (one batch append across sessions), and no importer
    module imports ``SessionRegistry``: the importers decide with ``registry.commands``."""
    import ast  # noqa: PLC0415

    from registry.importers import importer  # noqa: PLC0415

    calls: list[str] = []
    real = importer.append_sessions

    def counted(store: EventStore, requests: Any) -> None:
        calls.extend(request.session_id for request in requests)
        real(store, requests)

    monkeypatch.setattr(importer, "append_sessions", counted)
    store = MemoryStore()
    head = store.head()
    other = "12121212-0000-4000-8000-000000000000"
    write_lines(session_file(claude, other), [prompt("2026-03-02T10:00:00Z", "x", session=other)])
    run_import(store, "claude-code", claude)
    assert len(calls) == len({r.session_id for r in store.read()}) == 2 and store.head() > head
    folder = Path(importer.__file__).parent
    for module in folder.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = {alias.name for alias in node.names}
                assert node.module not in ("registry.service", "registry") or "SessionRegistry" not in names, module
                assert node.module != "registry.service", module


def test_the_importers_errors_are_registry_errors(claude: Path, tmp_path: Path) -> None:
    # One error tree: a caller catching RegistryError catches the importers' errors too (and ValueError still).
    state = tmp_path / "state"
    state.mkdir()  # a folder where the import state belongs
    with pytest.raises(RegistryError) as caught:
        run_import(MemoryStore(), "claude-code", claude, state=state)
    assert isinstance(caught.value, ImportStateError) and isinstance(caught.value, ValueError)
    assert issubclass(SchemaError, RegistryError) and issubclass(SchemaError, ValueError)


def test_every_agent_at_once_with_default_roots_from_the_environment(tmp_path: Path) -> None:
    codex, gemini, kimi, qwen = (tree(tmp_path) for tree in (codex_tree, gemini_tree, kimi_tree, qwen_tree))
    claude = tmp_path / "claude-home"
    write_lines(
        claude / "projects" / "-w" / "66666666-0000-4000-8000-000000000000.jsonl",
        [
            {
                "type": "user",
                "cwd": "/w",
                "timestamp": "2026-03-02T08:00:00Z",
                "message": {"role": "user", "content": "hi"},
            }
        ],
    )
    environ = {
        "HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(claude),
        "CODEX_HOME": str(codex),
        "GEMINI_CLI_HOME": str(gemini.parent),
        "KIMI_SHARE_DIR": str(kimi),
        "QWEN_RUNTIME_DIR": str(qwen),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    store = MemoryStore()
    summary = Importer(store, sources(), environ=environ, state_path=None).run()
    assert {a.agent: a.added for a in summary.agents} == {
        "claude-code": 1,
        "codex": 1,
        "gemini": 1,
        "kimi": 1,
        "kimi-code": 0,
        "qwen": 1,
        "goose": 0,
        "opencode": 0,
    }
    assert {a.agent for a in summary.agents if a.unavailable} == {"kimi-code", "goose", "opencode"}
    for session in listing(store):
        _holds_the_meta_key_rule(session["_meta"])
    assert sorted(s["sessionId"].split(":")[0] for s in listing(store)) == [
        "claude-code",
        "codex",
        "gemini",
        "kimi",
        "qwen",
    ]


def _holds_the_meta_key_rule(meta: dict[str, Any]) -> None:
    """docs/agent-histories.md: every imported session has the importer's four keys; the three others are there
    only when what they say is so (never ``null`` or ``false``), which is why they are on some sessions only."""
    always = {META_AGENT, META_AGENT_SESSION_ID, META_PATH, META_AGENT_MESSAGES}
    assert always <= set(meta), meta
    owned = {k for k in meta if k.startswith("acp-session-registry/")} - always
    when_so = {META_GIT_BRANCH, META_AGENT_ARCHIVED, META_SOURCE_GONE}
    assert owned - when_so <= {META_MESSAGES, META_TITLE_SOURCE, "acp-session-registry/archived"}, meta
    assert meta.get(META_GIT_BRANCH, "branch") and isinstance(meta.get(META_GIT_BRANCH, ""), str), meta
    assert meta.get(META_AGENT_ARCHIVED, True) is True and meta.get(META_SOURCE_GONE, True) is True, meta
