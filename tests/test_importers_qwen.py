"""Qwen Code's chats imported (after the format ``docs/agent-histories.md`` describes;
``registry/importers/qwen.py`` names the code it follows): records glued on one line, manual and automatic
titles, the archive folder, sub-sessions and the other files Qwen Code keeps beside its chats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events import MemoryStore
from registry.importers.lines import GLUED
from registry.model import META_ARCHIVED
from tests.importing import facts, only, run_import, skipped, write_lines

QWEN_ID = "a3b4c5d6-e7f8-4a9b-8c0d-1e2f3a4b5c6d"


def qwen_record(uuid: str, at: str, kind: str, **fields: Any) -> dict[str, Any]:
    """A record of the chat ``QWEN_ID`` in /home/dev/acme-api, as Qwen Code writes one."""
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


def _said(uuid: str, at: str, kind: str, text: str, **fields: Any) -> dict[str, Any]:
    """A prompt (``user``) or a reply (``assistant``, whose message's role Qwen Code writes as ``model``)."""
    message = {"role": "user" if kind == "user" else "model", "parts": [{"text": text}]}
    return qwen_record(uuid, at, kind, message=message, **fields)


def _qwen_title(uuid: str, at: str, title: str, source: str) -> dict[str, Any]:
    return qwen_record(
        uuid, at, "system", subtype="custom_title", systemPayload={"customTitle": title, "titleSource": source}
    )


def qwen_tree(tmp_path: Path) -> Path:
    """A Qwen Code folder with one chat: a prompt, a reply, an automatic title, a manual one, and a glued line."""
    root = tmp_path / ".qwen"
    glued = json.dumps(_qwen_title("q-0005", "2026-03-02T10:07:31.000Z", "healthz", "manual")) + json.dumps(
        _said("q-0006", "2026-03-02T10:08:00.000Z", "user", "Also add readiness")
    )
    write_lines(
        root / "projects" / "-home-dev-acme-api" / "chats" / f"{QWEN_ID}.jsonl",
        [
            _said("q-0001", "2026-03-02T10:05:00.100Z", "user", "Add a health check endpoint", gitBranch="main"),
            _said("q-0002", "2026-03-02T10:05:06.400Z", "assistant", "Added GET /healthz.", gitBranch="main"),
            _qwen_title("q-0003", "2026-03-02T10:05:07.000Z", "Health check endpoint", "auto"),
            _qwen_title("q-0004", "2026-03-02T10:07:30.000Z", "healthz", "manual"),
            glued,
        ],
    )
    return root


qwen = pytest.fixture(qwen_tree, name="qwen")


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
            qwen_record(
                "c-1",
                "2026-03-02T11:00:00Z",
                "system",
                subtype="parent_session",
                systemPayload={"parentSessionId": QWEN_ID},
            )
        ],
    )
    write_lines(chats / f"{child}-agent-x.jsonl", [qwen_record("c-2", "2026-03-02T11:00:00Z", "user")])
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
