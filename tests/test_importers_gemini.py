"""Gemini CLI's chats imported (after the format ``docs/agent-histories.md`` describes;
``registry/importers/gemini.py`` names the code it follows), with their pitfalls: re-emitted messages, rewinds and
checkpoints, AI summaries as titles, legacy JSON documents, project folders named by a hash of their root (found
from ``projects.json``, ``.project_root`` or a directory the registry already knows), subagent chats, and chats of
Gemini CLI's own setup that it does not list.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from events import MemoryStore
from registry.importers import Importer, sources
from registry.model import META_MESSAGES
from tests.importing import facts, listing, only, run_import, skipped, write_lines
from tests.test_importers_qwen import QWEN_ID, qwen_record

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


def gemini_tree(tmp_path: Path) -> Path:
    """A Gemini CLI home with one project (in ``projects.json`` and its ``.project_root``): ``_gemini_chat``."""
    root = tmp_path / ".gemini"
    (root / "tmp" / "acme-api").mkdir(parents=True)
    (root / "projects.json").write_text(json.dumps({"projects": {"/home/dev/acme-api": "acme-api"}}))
    (root / "tmp" / "acme-api" / ".project_root").write_text("/home/dev/acme-api\n")
    write_lines(root / "tmp" / "acme-api" / "chats" / "session-2026-03-02T09-40-5e1f2a3b.jsonl", _gemini_chat())
    return root


gemini = pytest.fixture(gemini_tree, name="gemini")


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
        [
            qwen_record(
                "q-1", "2026-03-01T08:00:00Z", "user", cwd="/home/dev/web", message={"parts": [{"text": "Header"}]}
            )
        ],
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
