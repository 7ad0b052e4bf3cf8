"""Kimi CLI's sessions imported (after the format ``docs/agent-histories.md`` describes;
``registry/importers/kimi.py`` names the code it follows): a session from ``wire.jsonl`` and ``state.json`` (a
title and an archive flag that change without a wire record, a delete), folders hashed from a work dir
``kimi.json`` does not know, and empty sessions. Kimi's legacy layouts and Kimi Code are in
``test_importers_recordings.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from events import MemoryStore
from registry.model import META_ARCHIVED, META_TITLE_SOURCE
from tests.importing import facts, listing, only, run_import, skipped, write_lines

KIMI_ID = "8c7d6e5f-4a3b-4c2d-9e1f-0a9b8c7d6e5f"
KIMI_HASH = "ce3fa0aa9e98006977055c78d826399a"


def _spaced(records: list[dict[str, Any]]) -> list[dict[str, Any] | str]:
    return [json.dumps(r) for r in records]  # kimi writes with json.dumps defaults: spaces after : and ,


def kimi_tree(tmp_path: Path) -> Path:
    """A Kimi CLI share folder with one session in a work dir ``kimi.json`` knows, titled in ``state.json``."""
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


kimi = pytest.fixture(kimi_tree, name="kimi")


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
