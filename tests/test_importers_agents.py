"""Each other agent's format, from synthetic fixtures after the formats ``docs/agent-histories.md`` describes
(each parser module names the agent's own code it follows), with its pitfalls: local-time file names, archive
and compression moves, re-emitted records and rewinds, glued lines, lossy or missing cwds, subagents, and SQLite
files read in WAL mode, locked, or of a schema we do not know."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from events import MemoryStore
from registry import SessionRegistry
from registry.importers import Importer, sources
from registry.importers.importer import META_ARCHIVED, META_GIT_BRANCH, META_PATH
from registry.importers.lines import GLUED
from registry.model import META_MESSAGES, META_TITLE_SOURCE
from tests.test_importers import listing, only, run_import, skipped, write_lines

# -- Codex ---------------------------------------------------------------------------------------------------

CODEX_ID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
CODEX_NAME = f"rollout-2026-03-02T10-20-11-{CODEX_ID}.jsonl"  # local time (UTC+1): the records say 09:20Z


def _codex_meta(session: str, at: str, source: Any = "cli") -> dict[str, Any]:
    payload = {
        "id": session,
        "timestamp": at,
        "cwd": "/home/dev/acme-api",
        "originator": "codex_cli_rs",
        "cli_version": "0.121.0",
        "source": source,
        "model_provider": "openai",
        "git": {"commit_hash": "9f1c2e7d", "branch": "main", "repository_url": "git@example.com:acme/api.git"},
    }
    return {"timestamp": at, "type": "session_meta", "payload": payload}


def _event(at: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": at, "type": "event_msg", "payload": payload}


@pytest.fixture
def codex(tmp_path: Path) -> Path:
    root = tmp_path / "codex"
    context = "<environment_context>\n  <cwd>/home/dev/acme-api</cwd>\n</environment_context>"
    write_lines(
        root / "sessions" / "2026" / "03" / "02" / CODEX_NAME,
        [
            _codex_meta(CODEX_ID, "2026-03-02T09:20:11.398Z"),
            {"timestamp": "2026-03-02T09:20:11.530Z", "type": "turn_context", "payload": {"turn_id": "turn_1"}},
            {
                "timestamp": "2026-03-02T09:20:11.531Z",
                "type": "response_item",
                "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": context}]},
            },
            _event("2026-03-02T09:20:11.533Z", type="user_message", message="Why does test_refund flake on CI?"),
            _event("2026-03-02T09:20:19.870Z", type="agent_message", message="It compares against wall-clock time."),
            _event(
                "2026-03-02T09:20:21.004Z",
                type="thread_name_updated",
                thread_id=CODEX_ID,
                thread_name="Flaky refund test",
            ),
        ],
    )
    subagent = "0199a1b3-0000-7aaa-8bbb-0c1d2e3f4a5c"
    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": CODEX_ID, "depth": 1, "agent_nickname": "Ada"}}}
    write_lines(
        root / "sessions" / "2026" / "03" / "02" / f"rollout-2026-03-02T10-21-30-{subagent}.jsonl",
        [_codex_meta(subagent, "2026-03-02T09:21:30.000Z", spawn)],
    )
    return root


def facts(session: dict[str, Any]) -> tuple[object, ...]:
    """What is checked of every agent's imported session: its id, cwd, title, updatedAt, the title's source and
    the message count."""
    meta = session["_meta"]
    return (
        session["sessionId"],
        session["cwd"],
        session["title"],
        session["updatedAt"],
        meta[META_TITLE_SOURCE],
        meta[META_MESSAGES],
    )


def test_codex_rollout_with_its_thread_name_and_a_skipped_subagent(codex: Path) -> None:
    store = MemoryStore()
    summary = run_import(store, "codex", codex)
    assert skipped(summary) == {"subagent thread": 1}
    session = only(store)
    assert facts(session) == (
        f"codex:{CODEX_ID}",
        "/home/dev/acme-api",
        "Flaky refund test",
        "2026-03-02T09:20:19.870Z",  # the rename at 09:20:21 is not activity
        "user",
        2,
    )
    assert session["_meta"][META_GIT_BRANCH] == "main"


def test_codex_session_index_rename_wins_when_newer_and_exec_runs_are_skipped(codex: Path, tmp_path: Path) -> None:
    write_lines(
        codex / "session_index.jsonl",
        [
            {"id": CODEX_ID, "thread_name": "Flaky refund test", "updated_at": "2026-03-02T09:20:21Z"},
            {"id": CODEX_ID, "thread_name": "Refund test: freeze clock", "updated_at": "2026-03-02T11:02:40Z"},
        ],
    )
    other = "0199a1b4-0000-7aaa-8bbb-0c1d2e3f4a5d"
    write_lines(
        codex / "sessions" / "2026" / "03" / "03" / f"rollout-2026-03-03T00-30-00-{other}.jsonl",
        [
            _codex_meta(other, "2026-03-02T23:30:00Z", "exec"),
            _event("2026-03-02T23:30:01Z", type="user_message", message="x"),
        ],
    )
    store = MemoryStore()
    state = tmp_path / "state"
    summary = run_import(store, "codex", codex, state=state)
    assert skipped(summary)["non-interactive run (codex exec)"] == 1
    assert only(store)["title"] == "Refund test: freeze clock"
    write_lines(
        codex / "session_index.jsonl",
        [{"id": CODEX_ID, "thread_name": "refunds", "updated_at": "2026-03-02T12:00:00Z"}],
        mode="a",
    )
    assert run_import(store, "codex", codex, state=state).agents[0].changed == 1  # the index alone changed
    assert only(store)["title"] == "refunds"
    # A copy of the index that lost its final newline: its last line still counts, and again once it grows.
    with open(codex / "session_index.jsonl", "a") as f:
        f.write(json.dumps({"id": CODEX_ID, "thread_name": "no newline", "updated_at": "2026-03-02T12:01:00Z"}))
    run_import(store, "codex", codex, state=state)
    assert only(store)["title"] == "no newline"
    with open(codex / "session_index.jsonl", "a") as f:
        f.write("\n" + json.dumps({"id": CODEX_ID, "thread_name": "last", "updated_at": "2026-03-02T12:02:00Z"}) + "\n")
    run_import(store, "codex", codex, state=state)
    assert only(store)["title"] == "last"


def test_codex_archive_and_compression_keep_the_session(codex: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "codex", codex, state=state)
    before = only(store)
    archived = codex / "archived_sessions" / CODEX_NAME
    archived.parent.mkdir()
    (codex / "sessions" / "2026" / "03" / "02" / CODEX_NAME).rename(archived)  # same inode, another folder
    summary = run_import(store, "codex", codex, state=state)
    assert (summary.agents[0].changed, summary.agents[0].removed, summary.agents[0].added) == (1, 0, 0)
    after = only(store)  # listing() includes archived sessions
    assert after["_meta"][META_ARCHIVED] is True and after["_meta"][META_PATH] == str(archived)
    assert {k: after[k] for k in ("sessionId", "title", "updatedAt")} == {
        k: before[k] for k in ("sessionId", "title", "updatedAt")
    }
    # codex's background worker replaces the archived rollout by a .zst of it (read with zstandard: no binary).
    Path(f"{archived}.zst").write_bytes(zstandard.ZstdCompressor().compress(archived.read_bytes()))
    archived.unlink()
    summary = run_import(store, "codex", codex, state=state)
    assert (summary.agents[0].changed, summary.agents[0].removed, skipped(summary)) == (1, 0, {})
    compressed = only(store)
    assert compressed["_meta"][META_PATH] == str(archived) + ".zst"
    assert {k: compressed[k] for k in ("title", "updatedAt", "cwd")} == {
        k: before[k] for k in ("title", "updatedAt", "cwd")
    }
    assert compressed["_meta"][META_MESSAGES] == before["_meta"][META_MESSAGES]


def test_the_agents_archive_is_the_registrys_archive_and_a_registry_unarchive_stays(
    codex: Path, tmp_path: Path
) -> None:
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "codex", codex, state=state)
    sid = only(store)["sessionId"]
    active = codex / "sessions" / "2026" / "03" / "02" / CODEX_NAME
    archived = codex / "archived_sessions" / CODEX_NAME
    archived.parent.mkdir()
    active.rename(archived)
    run_import(store, "codex", codex, state=state)
    with SessionRegistry(store, follow=False) as registry:
        # Archived as the registry archives: out of the default list, in --archived only.
        assert registry.list().sessions == []
        assert [i.session_id for i in registry.list(archived="only").sessions] == [sid]
        registry.unarchive(sid)  # the user brings it back in the registry
    write_lines(archived, [_event("2026-03-02T12:00:00Z", type="agent_message", message="later")], mode="a")
    run_import(store, "codex", codex, state=state)  # the agent's mark did not change: the user's unarchive stays
    with SessionRegistry(store, follow=False) as registry:
        assert [i.session_id for i in registry.list().sessions] == [sid]
        registry.archive(sid)
    archived.rename(active)  # unarchived in codex: unarchived here too
    run_import(store, "codex", codex, state=state)
    with SessionRegistry(store, follow=False) as registry:
        assert [i.session_id for i in registry.list().sessions] == [sid]


def test_codex_forked_rollout_uses_only_its_first_session_meta(tmp_path: Path) -> None:
    root = tmp_path / "codex"
    fork = "0199a1c0-0000-7aaa-8bbb-0c1d2e3f4a5e"
    parent = _codex_meta(CODEX_ID, "2026-03-01T08:00:00Z")
    parent["payload"]["cwd"] = "/home/dev/elsewhere"
    write_lines(
        root / "sessions" / f"rollout-2026-03-02T12-00-00-{fork}.jsonl",  # the legacy flat layout
        [
            _codex_meta(fork, "2026-03-02T11:00:00Z"),
            parent,
            _event("2026-03-02T11:00:05Z", type="user_message", message="context\n## My request for Codex:\nGo on"),
        ],
    )
    store = MemoryStore()
    run_import(store, "codex", root)
    session = only(store)
    assert (session["sessionId"], session["cwd"], session["title"]) == (f"codex:{fork}", "/home/dev/acme-api", "Go on")


# -- Gemini CLI ----------------------------------------------------------------------------------------------

GEMINI_ID = "5e1f2a3b-7c8d-4e9f-a0b1-c2d3e4f5a6b7"
ACME_HASH = hashlib.sha256(b"/home/dev/acme-api").hexdigest()


def _gemini_chat() -> list[dict[str, Any] | str]:
    return [
        {
            "sessionId": GEMINI_ID,
            "projectHash": ACME_HASH,
            "startTime": "2026-03-02T09:40:02.511Z",
            "lastUpdated": "2026-03-02T09:40:02.511Z",
        },
        {
            "id": "c1",
            "timestamp": "2026-03-02T09:40:10.004Z",
            "type": "user",
            "content": [{"text": "Summarize what changed in src/billing this week"}],
        },
        {"$set": {"lastUpdated": "2026-03-02T09:40:10.005Z"}},
        {
            "id": "c2",
            "timestamp": "2026-03-02T09:40:14.880Z",
            "type": "gemini",
            "content": [{"text": "Three commits"}],
            "model": "gemini-2.5-pro",
        },
        {
            "id": "c2",
            "timestamp": "2026-03-02T09:40:14.880Z",
            "type": "gemini",
            "content": [{"text": "Three commits touched billing"}],
            "model": "gemini-2.5-pro",
        },
        {"$set": {"lastUpdated": "2026-03-02T09:40:15.120Z"}},
        {"id": "c3", "timestamp": "2026-03-02T09:41:00.000Z", "type": "user", "content": [{"text": "/stats"}]},
        {"$rewindTo": "c3"},
        {"$set": {"summary": "Summarize recent billing module changes"}},
    ]


@pytest.fixture
def gemini(tmp_path: Path) -> Path:
    root = tmp_path / ".gemini"
    (root / "tmp" / "acme-api").mkdir(parents=True)
    (root / "projects.json").write_text(json.dumps({"projects": {"/home/dev/acme-api": "acme-api"}}))
    (root / "tmp" / "acme-api" / ".project_root").write_text("/home/dev/acme-api\n")
    write_lines(root / "tmp" / "acme-api" / "chats" / "session-2026-03-02T09-40-5e1f2a3b.jsonl", _gemini_chat())
    return root


def test_gemini_chat_with_re_emitted_messages_a_rewind_and_an_ai_summary(gemini: Path) -> None:
    store = MemoryStore()
    run_import(store, "gemini", gemini)
    session = only(store)
    assert facts(session) == (
        f"gemini:{GEMINI_ID}",
        "/home/dev/acme-api",
        "Summarize recent billing module changes",
        "2026-03-02T09:40:15.120Z",
        "agent",
        2,
    )


def test_gemini_legacy_documents_hash_folders_subagents_and_unknown_projects(gemini: Path, tmp_path: Path) -> None:
    legacy = {
        "sessionId": "1a2b3c4d-0000-4000-8000-000000000001",
        "projectHash": ACME_HASH,
        "startTime": "2026-01-10T08:00:00.000Z",
        "lastUpdated": "2026-01-10T08:05:00.000Z",
        "messages": [
            {
                "id": "m1",
                "timestamp": "2026-01-10T08:00:05.000Z",
                "type": "user",
                "content": "Explain the retry policy",
            },
            {"id": "m2", "timestamp": "2026-01-10T08:00:09.000Z", "type": "gemini", "content": "It retries 3 times."},
        ],
    }
    (gemini / "tmp" / ACME_HASH / "chats").mkdir(parents=True)  # an older sha256-named project folder
    (gemini / "tmp" / ACME_HASH / "chats" / "session-2026-01-10T08-00-1a2b3c4d.json").write_text(json.dumps(legacy))
    sub = [
        {"sessionId": "sub-1", "startTime": "2026-03-02T09:45:00Z", "kind": "subagent"},
        {"id": "s1", "type": "user", "content": "look", "timestamp": "2026-03-02T09:45:01Z"},
    ]
    write_lines(gemini / "tmp" / "acme-api" / "chats" / "session-2026-03-02T09-45-sub00001.jsonl", sub)
    write_lines(gemini / "tmp" / "acme-api" / "chats" / GEMINI_ID / "child.jsonl", sub)  # chats/<parent>/ never read
    orphan = [
        {"sessionId": "orphan-1", "startTime": "2026-03-02T10:00:00Z"},
        {"id": "o1", "type": "user", "content": "hi", "timestamp": "2026-03-02T10:00:01Z"},
    ]
    write_lines(gemini / "tmp" / "scratch" / "chats" / "session-2026-03-02T10-00-orphan01.jsonl", orphan)
    store = MemoryStore()
    state = tmp_path / "state"
    summary = run_import(store, "gemini", gemini, state=state)
    assert skipped(summary) == {
        "subagent chat": 1,
        "project root unknown (not in projects.json, no .project_root, no known directory hashes to it)": 1,
    }
    legacy_session = next(s for s in listing(store) if s["sessionId"] == "gemini:1a2b3c4d-0000-4000-8000-000000000001")
    assert (legacy_session["cwd"], legacy_session["title"], legacy_session["_meta"][META_MESSAGES]) == (
        "/home/dev/acme-api",
        "Explain the retry policy",
        2,
    )
    # The project gets registered later: its sessions are imported then, though their files did not change.
    (gemini / "projects.json").write_text(
        json.dumps({"projects": {"/home/dev/acme-api": "acme-api", "/home/dev/scratch": "scratch"}})
    )
    assert run_import(store, "gemini", gemini, state=state).agents[0].added == 1
    assert len(listing(store)) == 3


def test_gemini_chats_of_its_own_setup_alone_are_not_sessions(gemini: Path) -> None:
    # Gemini CLI 0.61 writes a chat file when a client authenticates that holds only its "<session_context>" setup
    # message; its own listing skips a chat with no prompt (nor /command, ?help, setup) and no model reply.
    context = (
        "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n</session_context>"
    )
    chats = gemini / "tmp" / "acme-api" / "chats"
    header: dict[str, Any] = {"projectHash": ACME_HASH, "startTime": "2026-03-02T10:00:00Z", "kind": "main"}
    setup: list[dict[str, Any] | str] = [
        header | {"sessionId": "setup-1"},
        {"$set": {"messages": [{"id": "x1", "timestamp": "2026-03-02T10:00:00Z", "type": "user", "content": context}]}},
    ]
    write_lines(chats / "session-2026-03-02T10-00-setup001.jsonl", setup)
    command = [
        header | {"sessionId": "cmd-1"},
        {"id": "y1", "type": "user", "content": "/stats", "timestamp": "2026-03-02T10:01:00Z"},
    ]
    write_lines(chats / "session-2026-03-02T10-01-cmd00001.jsonl", command)
    answered = [
        header | {"sessionId": "ans-1"},
        {"id": "z1", "type": "user", "content": [{"text": context}], "timestamp": "2026-03-02T10:02:00Z"},
        {"id": "z2", "type": "gemini", "content": "Ready.", "timestamp": "2026-03-02T10:02:01Z"},
    ]
    write_lines(chats / "session-2026-03-02T10-02-ans00001.jsonl", answered)
    store = MemoryStore()
    summary = run_import(store, "gemini", gemini)
    assert skipped(summary) == {"no prompt and no model message (Gemini CLI does not list it)": 2}
    sessions = {s["sessionId"]: s for s in listing(store)}
    assert set(sessions) == {f"gemini:{GEMINI_ID}", "gemini:ans-1"}
    assert "title" not in sessions["gemini:ans-1"]  # the setup message is nobody's prompt


def test_gemini_hash_named_folders_are_recovered_from_directories_the_registry_knows(
    gemini: Path, tmp_path: Path
) -> None:
    # An older project folder, tmp/<sha256 of the root>/, with neither projects.json nor .project_root naming it.
    web = hashlib.sha256(b"/home/dev/web").hexdigest()
    chat = [
        {"sessionId": "9a8b7c6d-0000-4000-8000-000000000001", "projectHash": web, "startTime": "2026-01-12T08:00:00Z"},
        {"id": "w1", "type": "user", "content": "Why is the header blurry?", "timestamp": "2026-01-12T08:00:01Z"},
    ]
    write_lines(gemini / "tmp" / web / "chats" / "session-2026-01-12T08-00-9a8b7c6d.jsonl", chat)
    qwen = tmp_path / ".qwen"
    write_lines(
        qwen / "projects" / "-home-dev-web" / "chats" / f"{QWEN_ID}.jsonl",
        [_qwen("q-1", "2026-03-01T08:00:00Z", "user", cwd="/home/dev/web", message={"parts": [{"text": "Header"}]})],
    )
    # In one pass with another agent that worked in that directory (Gemini is read after it).
    store = MemoryStore()
    both = Importer(store, sources(["gemini", "qwen"]), roots={"gemini": gemini, "qwen": qwen})
    summary = both.run()
    assert [a.agent for a in summary.agents] == ["gemini", "qwen"]  # the summary keeps the usual order
    assert (skipped(summary), summary.agents[0].added) == ({}, 2)
    cwds = {s["sessionId"]: s["cwd"] for s in listing(store)}
    assert cwds["gemini:9a8b7c6d-0000-4000-8000-000000000001"] == "/home/dev/web"
    # Or from the store alone: the directory of a session imported earlier.
    later = MemoryStore()
    run_import(later, "qwen", qwen)
    assert (run_import(later, "gemini", gemini).agents[0].added, len(listing(later))) == (2, 3)


def test_gemini_rewind_to_an_unknown_id_clears_and_a_checkpoint_replaces(gemini: Path, tmp_path: Path) -> None:
    chat = gemini / "tmp" / "acme-api" / "chats" / "session-2026-03-02T09-40-5e1f2a3b.jsonl"
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "gemini", gemini, state=state)
    write_lines(
        chat,
        [{"$set": {"messages": [{"id": "k1", "type": "user", "content": "x"}], "lastUpdated": "2026-03-02T10:00:00Z"}}],
        mode="a",
    )
    run_import(store, "gemini", gemini, state=state)
    session = only(store)
    # The agent's count follows the checkpoint; the registry's own count never shrinks.
    assert (session["_meta"]["acp-session-registry/agentMessageCount"], session["_meta"][META_MESSAGES]) == (1, 2)
    assert session["updatedAt"] == "2026-03-02T10:00:00.000Z"


# -- Kimi CLI ------------------------------------------------------------------------------------------------

KIMI_ID = "8c7d6e5f-4a3b-4c2d-9e1f-0a9b8c7d6e5f"
KIMI_HASH = "ce3fa0aa9e98006977055c78d826399a"


def _spaced(records: list[dict[str, Any]]) -> list[dict[str, Any] | str]:
    return [json.dumps(r) for r in records]  # kimi writes with json.dumps defaults: spaces after : and ,


@pytest.fixture
def kimi(tmp_path: Path) -> Path:
    root = tmp_path / ".kimi"
    root.mkdir()
    (root / "kimi.json").write_text(
        json.dumps({"work_dirs": [{"path": "/home/dev/acme-api", "kaos": "local", "last_session_id": KIMI_ID}]})
    )
    session = root / "sessions" / KIMI_HASH / KIMI_ID
    write_lines(
        session / "wire.jsonl",
        _spaced(
            [
                {"type": "metadata", "protocol_version": "1.10"},
                {
                    "timestamp": 1772442845.12,
                    "message": {
                        "type": "TurnBegin",
                        "payload": {"user_input": "Rename Order.total to Order.amount everywhere"},
                    },
                },
                {"timestamp": 1772442845.31, "message": {"type": "StepBegin", "payload": {"n": 1}}},
                {"timestamp": 1772442871.90, "message": {"type": "TurnEnd", "payload": {}}},
            ]
        ),
    )
    write_lines(session / "context.jsonl", _spaced([{"role": "_system_prompt", "content": "You are Kimi CLI..."}]))
    state = {
        "version": 1,
        "custom_title": "Rename Order.total to Order.amount everywhere",
        "title_generated": False,
        "archived": False,
        "additional_dirs": [],
    }
    (session / "state.json").write_text(json.dumps(state))
    return root


def test_kimi_session_from_wire_and_state(kimi: Path, tmp_path: Path) -> None:
    assert hashlib.md5(b"/home/dev/acme-api", usedforsecurity=False).hexdigest() == KIMI_HASH
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "kimi", kimi, state=state)
    session = only(store)
    assert facts(session) == (
        f"kimi:{KIMI_ID}",
        "/home/dev/acme-api",
        "Rename Order.total to Order.amount everywhere",
        "2026-03-02T09:14:31.900Z",
        "prompt",
        2,
    )
    # state.json is rewritten whole: a new title and the archive flag arrive without any wire change.
    folder = kimi / "sessions" / KIMI_HASH / KIMI_ID
    (folder / "state.json").write_text(json.dumps({"custom_title": "Order rename", "archived": True}))
    assert run_import(store, "kimi", kimi, state=state).agents[0].changed == 1
    session = only(store)
    assert (session["title"], session["_meta"][META_TITLE_SOURCE], session["_meta"][META_ARCHIVED]) == (
        "Order rename",
        "agent",
        True,
    )
    shutil.rmtree(folder)  # kimi's delete
    assert run_import(store, "kimi", kimi, state=state).agents[0].removed == 1


def test_kimi_unknown_work_dirs_and_empty_sessions_are_skipped(kimi: Path) -> None:
    orphan = kimi / "sessions" / ("0" * 32) / "11111111-2222-4333-8444-555555555555"
    write_lines(
        orphan / "wire.jsonl",
        _spaced(
            [
                {
                    "timestamp": 1772442845.0,
                    "message": {"type": "TurnBegin", "payload": {"user_input": [{"type": "text", "text": "hi"}]}},
                }
            ]
        ),
    )
    write_lines(orphan / "context.jsonl", _spaced([{"role": "user", "content": "hi"}]))
    empty = kimi / "sessions" / KIMI_HASH / "22222222-2222-4333-8444-555555555555"
    write_lines(empty / "wire.jsonl", _spaced([{"type": "metadata", "protocol_version": "1.10"}]))
    write_lines(empty / "context.jsonl", _spaced([{"role": "_system_prompt", "content": "You are Kimi CLI..."}]))
    store = MemoryStore()
    summary = run_import(store, "kimi", kimi)
    assert skipped(summary) == {"work dir unknown (no kimi.json entry hashes to its folder)": 1, "empty session": 1}
    assert [s["sessionId"] for s in listing(store)] == [f"kimi:{KIMI_ID}"]


# -- Qwen Code -----------------------------------------------------------------------------------------------

QWEN_ID = "a3b4c5d6-e7f8-4a9b-8c0d-1e2f3a4b5c6d"


def _qwen(uuid: str, at: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "parentUuid": None,
        "sessionId": QWEN_ID,
        "timestamp": at,
        "type": kind,
        "cwd": "/home/dev/acme-api",
        "version": "0.14.2",
        **fields,
    }


def _qwen_title(uuid: str, at: str, title: str, source: str) -> dict[str, Any]:
    return _qwen(
        uuid, at, "system", subtype="custom_title", systemPayload={"customTitle": title, "titleSource": source}
    )


@pytest.fixture
def qwen(tmp_path: Path) -> Path:
    root = tmp_path / ".qwen"
    glued = json.dumps(_qwen_title("q-0005", "2026-03-02T10:07:31.000Z", "healthz", "manual")) + json.dumps(
        _qwen(
            "q-0006",
            "2026-03-02T10:08:00.000Z",
            "user",
            message={"role": "user", "parts": [{"text": "Also add readiness"}]},
        )
    )
    write_lines(
        root / "projects" / "-home-dev-acme-api" / "chats" / f"{QWEN_ID}.jsonl",
        [
            _qwen(
                "q-0001",
                "2026-03-02T10:05:00.100Z",
                "user",
                gitBranch="main",
                message={"role": "user", "parts": [{"text": "Add a health check endpoint"}]},
            ),
            _qwen(
                "q-0002",
                "2026-03-02T10:05:06.400Z",
                "assistant",
                gitBranch="main",
                message={"role": "model", "parts": [{"text": "Added GET /healthz."}]},
            ),
            _qwen_title("q-0003", "2026-03-02T10:05:07.000Z", "Health check endpoint", "auto"),
            _qwen_title("q-0004", "2026-03-02T10:07:30.000Z", "healthz", "manual"),
            glued,
        ],
    )
    return root


def test_qwen_session_with_a_glued_line_and_a_manual_title(qwen: Path) -> None:
    store = MemoryStore()
    summary = run_import(store, "qwen", qwen)
    assert skipped(summary) == {GLUED: 1}  # recovered, and named
    session = only(store)
    assert facts(session) == (
        f"qwen:{QWEN_ID}",
        "/home/dev/acme-api",
        "healthz",
        "2026-03-02T10:08:00.000Z",
        "user",
        3,
    )


def test_qwen_archive_children_and_stray_files(qwen: Path, tmp_path: Path) -> None:
    chats = qwen / "projects" / "-home-dev-acme-api" / "chats"
    child = "b0000000-0000-4000-8000-000000000001"
    write_lines(
        chats / f"{child}.jsonl",
        [
            _qwen(
                "c-1",
                "2026-03-02T11:00:00Z",
                "system",
                subtype="parent_session",
                systemPayload={"parentSessionId": QWEN_ID},
            )
        ],
    )
    write_lines(chats / f"{child}-agent-x.jsonl", [_qwen("c-2", "2026-03-02T11:00:00Z", "user")])
    (chats / ".runtime.json").write_text("{}")
    (chats / f"{QWEN_ID}.worktree.json").write_text("{}")
    store = MemoryStore()
    state = tmp_path / "state"
    summary = run_import(store, "qwen", qwen, state=state)
    assert skipped(summary) == {"sub-session (parent_session record)": 1, GLUED: 1}
    (chats / "archive").mkdir()
    (chats / f"{QWEN_ID}.jsonl").rename(chats / "archive" / f"{QWEN_ID}.jsonl")
    summary = run_import(store, "qwen", qwen, state=state)
    assert (summary.agents[0].changed, summary.agents[0].removed) == (1, 0)
    assert only(store)["_meta"][META_ARCHIVED] is True


# -- goose ---------------------------------------------------------------------------------------------------

GOOSE_SCHEMA = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (
  id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
  user_set_name BOOLEAN DEFAULT FALSE, session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  provider_name TEXT, model_config_json TEXT, archived_at TIMESTAMP, project_id TEXT, parent_session_id TEXT);
CREATE TABLE messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT, session_id TEXT NOT NULL REFERENCES sessions(id),
  role TEXT NOT NULL, content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
  timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
CREATE INDEX idx_messages_session ON messages(session_id);
INSERT INTO schema_version(version) VALUES (16);
INSERT INTO sessions (id, name, user_set_name, session_type, working_dir, created_at, updated_at, archived_at,
  parent_session_id) VALUES
 ('20260302_3', 'Fix CSV export encoding', 0, 'user', '/home/dev/acme-api', '2026-03-02 09:50:12',
  '2026-03-02 09:58:40', NULL, NULL),
 ('20260302_4', '', 0, 'sub_agent', '/home/dev/acme-api', '2026-03-02 09:52:00', '2026-03-02 09:53:10', NULL,
  '20260302_3'),
 ('20260215_1', 'Old spike', 1, 'user', '/home/dev/scratch', '2026-02-15 14:00:00', '2026-02-15 14:20:00',
  '2026-02-20 08:00:00', NULL);
INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, metadata_json) VALUES
 ('msg_a1', '20260302_3', 'user', '[{"type":"text","text":"CSV export mangles umlauts"}]', 1772445012, '{}'),
 ('msg_a2', '20260302_3', 'assistant', '[{"type":"text","text":"Write the BOM."}]', 1772445520, '{}');
"""


@pytest.fixture
def goose(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    root = tmp_path / "goose"
    (root / "sessions").mkdir(parents=True)
    writer = sqlite3.connect(root / "sessions" / "sessions.db", isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # everything stays in -wal: the reader must see it there
    writer.executescript(GOOSE_SCHEMA)
    yield root, writer
    writer.close()


def test_goose_rows_read_through_the_wal(goose: tuple[Path, sqlite3.Connection], tmp_path: Path) -> None:
    root, writer = goose
    store = MemoryStore()
    state = tmp_path / "state"
    summary = run_import(store, "goose", root, state=state)
    assert skipped(summary) == {"sub-session (has a parent session)": 1}
    sessions = {s["sessionId"]: s for s in listing(store)}
    assert set(sessions) == {"goose:20260302_3", "goose:20260215_1"}
    fix = sessions["goose:20260302_3"]
    assert (fix["title"], fix["updatedAt"], fix["_meta"][META_TITLE_SOURCE], fix["_meta"][META_MESSAGES]) == (
        "Fix CSV export encoding",
        "2026-03-02T09:58:40.000Z",
        "agent",
        2,
    )
    spike = sessions["goose:20260215_1"]
    assert (spike["_meta"][META_TITLE_SOURCE], spike["_meta"][META_ARCHIVED]) == ("user", True)
    assert run_import(store, "goose", root, state=state).agents[0].files_read == 0  # nothing moved: no query
    writer.execute(
        "INSERT INTO messages (session_id, role, content_json, created_timestamp)"
        " VALUES ('20260302_3', 'user', '[]', 1772449999000)"
    )
    writer.execute("DELETE FROM sessions WHERE id = '20260215_1'")
    summary = run_import(store, "goose", root, state=state)
    assert (summary.agents[0].changed, summary.agents[0].removed) == (1, 1)
    assert only(store)["updatedAt"] == "2026-03-02T11:13:19.000Z"  # a millisecond timestamp, read as such


def test_goose_locked_or_newer_schema_databases_are_skipped_with_a_reason(tmp_path: Path) -> None:
    root = tmp_path / "goose"
    (root / "sessions").mkdir(parents=True)
    path = root / "sessions" / "sessions.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.executescript(GOOSE_SCHEMA)  # rollback-journal mode: an exclusive lock keeps readers out
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "goose", root, state=state)
    writer.execute("UPDATE sessions SET name = 'renamed' WHERE id = '20260215_1'")  # a change to look at
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("DELETE FROM sessions")
    summary = run_import(store, "goose", root, state=state, sqlite_timeout=0.05)
    assert skipped(summary) == {"skipped: database is locked": 1}
    assert summary.agents[0].removed == 0  # nothing is taken for deleted while the file cannot be read
    writer.execute("ROLLBACK")
    writer.executescript(
        "ALTER TABLE sessions RENAME COLUMN working_dir TO workspace; INSERT INTO schema_version VALUES (30, NULL);"
    )
    writer.close()
    summary = run_import(store, "goose", root, state=state)
    assert skipped(summary) == {
        "skipped: schema not understood: missing working_dir; schema version 30 is newer than 16": 1
    }
    assert len(listing(store)) == 2
    path.write_bytes(b"not a database at all" * 100)
    assert list(skipped(run_import(store, "goose", root, state=state))) == ["skipped: file is not a database"]


# -- opencode ------------------------------------------------------------------------------------------------

OPENCODE_SCHEMA = """
CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, vcs TEXT, time_created INTEGER,
  time_updated INTEGER);
CREATE TABLE session (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL, directory TEXT NOT NULL,
  title TEXT NOT NULL, version TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
  time_archived INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
  time_updated INTEGER NOT NULL, data TEXT NOT NULL);
INSERT INTO project VALUES ('4b2e','/home/dev/acme-api','git',1772440000000,1772446000000);
INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated,
  time_archived) VALUES
 ('ses_3a9f1c2b7ffeQk2m9PpLr4TzVw', '4b2e', NULL, 'brave-otter', '/home/dev/acme-api', 'Speed up order search',
  '1.2.10', 1772443000000, 1772443900000, NULL),
 ('ses_3a9f1c2b8001Zz1y2Xx3Ww4Vv5', '4b2e', 'ses_3a9f1c2b7ffeQk2m9PpLr4TzVw', 'calm-heron', '/home/dev/acme-api',
  'Child session - 2026-03-02T09:55:00.000Z', '1.2.10', 1772445300000, 1772445400000, NULL),
 ('ses_3a9f1c2b8100Aa1b2Cc3Dd4Ee5', '4b2e', NULL, 'quiet-lynx', '/home/dev/acme-api',
  'New session - 2026-03-02T10:30:00.000Z', '1.2.10', 1772447400000, 1772447400000, NULL);
INSERT INTO message (id,session_id,time_created,time_updated,data) VALUES
 ('msg_01','ses_3a9f1c2b7ffeQk2m9PpLr4TzVw',1772443000500,1772443000500,'{"role":"user"}'),
 ('msg_02','ses_3a9f1c2b7ffeQk2m9PpLr4TzVw',1772443010000,1772443020000,'{"role":"assistant"}');
"""


def opencode_db(tmp_path: Path) -> tuple[Path, sqlite3.Connection]:
    """An opencode data folder whose ``opencode.db`` (WAL, as opencode keeps it) holds ``OPENCODE_SCHEMA``'s
    sessions: the folder, and the open connection that wrote it (the caller closes it)."""
    root = tmp_path / "opencode"
    root.mkdir()
    writer = sqlite3.connect(root / "opencode.db", isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.executescript(OPENCODE_SCHEMA)
    return root, writer


def test_opencode_sessions_children_and_placeholder_titles(tmp_path: Path) -> None:
    root, writer = opencode_db(tmp_path)
    store = MemoryStore()
    state = tmp_path / "state"
    summary = run_import(store, "opencode", root, state=state)
    assert skipped(summary) == {"child session (subagent)": 1}
    sessions = {s["sessionId"]: s for s in listing(store)}
    named = sessions["opencode:ses_3a9f1c2b7ffeQk2m9PpLr4TzVw"]
    assert (named["title"], named["updatedAt"], named["_meta"][META_MESSAGES]) == (
        "Speed up order search",
        "2026-03-02T09:17:00.000Z",  # the assistant message's completion, not session.time_updated (09:31:40)
        2,
    )
    untitled = sessions["opencode:ses_3a9f1c2b8100Aa1b2Cc3Dd4Ee5"]
    assert "title" not in untitled and untitled["_meta"][META_MESSAGES] == 0
    writer.execute(
        "UPDATE session SET title = 'Order search index', time_archived = 1772450000000 WHERE slug = 'brave-otter'"
    )
    writer.execute("DELETE FROM session WHERE slug = 'quiet-lynx'")
    writer.close()
    summary = run_import(store, "opencode", root, state=state)
    assert (summary.agents[0].changed, summary.agents[0].removed) == (1, 1)
    session = only(store)
    assert (session["title"], session["_meta"][META_ARCHIVED]) == ("Order search index", True)


def test_opencode_without_a_database_reads_nothing_and_deletes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    (root / "storage" / "session").mkdir(parents=True)
    summary = run_import(MemoryStore(), "opencode", root)
    assert list(skipped(summary)) == [
        "only the legacy JSON storage/ exists (opencode migrates it to opencode.db on its next start)"
    ]


def test_every_agent_at_once_with_default_roots_from_the_environment(
    codex: Path, gemini: Path, kimi: Path, qwen: Path, tmp_path: Path
) -> None:
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
    assert sorted(s["sessionId"].split(":")[0] for s in listing(store)) == [
        "claude-code",
        "codex",
        "gemini",
        "kimi",
        "qwen",
    ]
