"""Codex's rollouts imported (after the format ``docs/agent-histories.md`` describes; ``registry/importers/codex.py``
names the code it follows), with their pitfalls: file names in local time, thread names from the rollout and from
``session_index.jsonl``, subagent and ``codex exec`` runs skipped, archive and compression moves (the agent's
archive is the registry's), forked rollouts with a second ``session_meta``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from events import MemoryStore
from registry import SessionRegistry
from registry.importers.importer import META_GIT_BRANCH, META_PATH
from registry.model import META_ARCHIVED, META_MESSAGES
from tests.importing import facts, only, run_import, skipped, write_lines

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


def codex_tree(tmp_path: Path) -> Path:
    """A ``CODEX_HOME`` with one rollout (named by a ``thread_name_updated`` event) and a subagent's rollout."""
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


codex = pytest.fixture(codex_tree, name="codex")


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
