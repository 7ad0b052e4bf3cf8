"""The importers held to files shaped like the agents' own (``tests/fixtures/agents/<agent>/``, each folder's
``SOURCE.md`` says where its shapes come from): message counts by each agent's own rule, a session's own
created time, Kimi's legacy layouts and Kimi Code, goose's listing rules, and databases read without a byte
changing beside them."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from events import MemoryStore
from registry import SessionRegistry
from registry.importers.importer import META_AGENT_MESSAGES, META_GIT_BRANCH
from registry.model import META_ARCHIVED, META_MESSAGES, META_TITLE_SOURCE
from tests.importing import FIXTURES, listing, only, run_import, skipped
from tests.test_importers_databases import opencode_db


def fixture(agent: str, tmp_path: Path) -> Path:
    """A copy of an agent's fixture folder (the importer must not need to write there, but a test may)."""
    root = tmp_path / agent
    shutil.copytree(FIXTURES / agent, root, ignore=shutil.ignore_patterns("SOURCE.md", "*.sql"))
    return root


def tree(root: Path) -> dict[str, bytes | None]:
    """Every name under ``root`` with its bytes (None for a folder): what 'unchanged' is measured against."""
    out: dict[str, bytes | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


# -- Claude Code -----------------------------------------------------------------------------------------------


def test_claude_code_counts_what_its_transcript_shows_and_its_own_created_time(tmp_path: Path) -> None:
    root = fixture("claude-code", tmp_path)
    store = MemoryStore()
    assert run_import(store, "claude-code", root).agents[0].added == 1
    session = only(store)
    assert (session["title"], session["updatedAt"]) == ("now add tests for the cursor", "2026-03-02T09:03:00.000Z")
    meta = session["_meta"]
    # 2 prompts (not the caveat, the /model echo and its output, the interrupt marker, the hook line) and
    # 3 replies (msg_01A streamed over three lines counts once); the carried-over history is not this session's.
    assert (meta[META_AGENT_MESSAGES], meta[META_MESSAGES]) == (5, 5)
    assert (meta[META_TITLE_SOURCE], meta[META_GIT_BRANCH]) == ("prompt", "feature/pagination")
    state = SessionRegistry(store, follow=False).state("claude-code:7f3e2a10-5b6c-4d7e-8f90-a1b2c3d4e5f6")
    assert state is not None
    created = SessionRegistry(store, follow=False).state(state.session_id)
    assert created is not None and created.created_at == 1_772_442_000 * 1_000_000_000  # 2026-03-02T09:00:00Z


def test_claude_code_titles_only_by_its_own_summaries_and_counts_image_only_prompts(tmp_path: Path) -> None:
    root = fixture("claude-code-summaries", tmp_path)
    store = MemoryStore()
    assert run_import(store, "claude-code", root).agents[0].added == 2
    sessions = {s["sessionId"].rsplit("-", 1)[1]: s for s in listing(store)}
    own, foreign = sessions["000000000a01"], sessions["000000000b02"]
    # The summaries at the head of ...0b02 are about other sessions (one about ...0a01, one about a session
    # not here): ...0b02 keeps its first prompt, ...0a01 gets the summary that names its own leaf.
    assert (foreign["title"], foreign["_meta"][META_TITLE_SOURCE], foreign["_meta"][META_MESSAGES]) == (
        "say hi",
        "prompt",
        2,
    )
    # 2 prompts, one of them a pasted screenshot only, and 2 replies.
    assert (own["title"], own["_meta"][META_TITLE_SOURCE], own["_meta"][META_MESSAGES]) == (
        "Orders page double render",
        "agent",
        4,
    )


# -- Kimi CLI and Kimi Code ------------------------------------------------------------------------------------

KIMI_HASH = hashlib.md5(b"/home/dev/acme-api", usedforsecurity=False).hexdigest()


def test_kimi_legacy_layouts_are_listed_as_kimi_lists_them(tmp_path: Path) -> None:
    root = fixture("kimi", tmp_path)
    folder = root / "sessions" / KIMI_HASH
    context = folder / "0b6f3c1e-2d4a-4e5f-9a8b-7c6d5e4f3a2b" / "context.jsonl"
    flat = folder / "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a.jsonl"
    os.utime(context, (1_772_442_000, 1_772_442_000))  # 2026-03-02T09:00:00Z
    os.utime(flat, (1_769_940_000, 1_769_940_000))  # 2026-02-01T10:00:00Z
    before = tree(root)
    store = MemoryStore()
    summary = run_import(store, "kimi", root)
    assert (summary.agents[0].added, skipped(summary)) == (2, {})
    sessions = {s["sessionId"]: s for s in listing(store)}
    moved = sessions["kimi:0b6f3c1e-2d4a-4e5f-9a8b-7c6d5e4f3a2b"]
    assert (moved["cwd"], moved["title"], moved["updatedAt"]) == (
        "/home/dev/acme-api",
        "Rename Order.total to Order.amount everywhere",
        "2026-03-02T09:00:00.000Z",  # no times in context records: the file's, as Kimi shows it
    )
    assert moved["_meta"][META_MESSAGES] == 4  # two turns, the injected CHECKPOINT message not counted
    oldest = sessions["kimi:9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"]
    assert (oldest["title"], oldest["_meta"][META_MESSAGES]) == ("Why is CI red on main?", 2)
    assert tree(root) == before  # the flat file is read where it is, never moved


def test_kimi_code_is_its_own_agent(tmp_path: Path) -> None:
    root = fixture("kimi-code", tmp_path)
    store = MemoryStore()
    summary = run_import(store, "kimi-code", root)
    assert skipped(summary) == {"migrated from Kimi CLI (Kimi Code hides it; imported as a kimi session)": 1}
    session = only(store)
    assert (session["sessionId"], session["cwd"], session["title"]) == (
        "kimi-code:session_01JQ8ZK3T5W7Y9B2C4D6F8H0J2",
        "/home/dev/acme-api",
        "Add a health check endpoint",
    )
    assert session["updatedAt"] == "2026-05-20T06:03:30.001Z"  # the last step, not the usage record after it
    meta = session["_meta"]
    assert (meta[META_MESSAGES], meta[META_TITLE_SOURCE]) == (5, "agent")


def test_a_root_of_another_agents_layout_is_said_not_silent(tmp_path: Path) -> None:
    root = fixture("kimi-code", tmp_path)
    summary = run_import(MemoryStore(), "kimi", root)  # --root kimi=~/.kimi-code
    assert summary.agents[0].added == 0
    (group,) = summary.agents[0].skipped
    assert group.reason == "not a file kimi writes (left alone)"
    assert "Kimi Code sessions, read with --agent kimi-code" in group.examples[0]
    summary = run_import(MemoryStore(), "claude-code", root)
    assert list(skipped(summary)) == ["no projects/ here: not claude-code's data folder"]


# -- goose -----------------------------------------------------------------------------------------------------


def _goose(tmp_path: Path) -> Path:
    root = tmp_path / "goose"
    (root / "sessions").mkdir(parents=True)
    db = sqlite3.connect(root / "sessions" / "sessions.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    for script in ("schema.sql", "sessions.sql"):
        db.executescript((FIXTURES / "goose" / script).read_text())
    db.close()  # goose not running: the last connection checkpoints and removes -wal and -shm
    assert sorted(p.name for p in (root / "sessions").iterdir()) == ["sessions.db"]
    return root


def test_goose_lists_what_goose_lists_and_counts_what_it_shows(tmp_path: Path) -> None:
    root = _goose(tmp_path)
    store = MemoryStore()
    summary = run_import(store, "goose", root)
    assert skipped(summary) == {
        "session type 'hidden' is not listed by goose": 1,
        "session type 'terminal' is not listed by goose": 1,
        "sub-session (has a parent session)": 1,
    }
    sessions = {s["sessionId"]: s for s in listing(store)}
    assert set(sessions) == {"goose:20260302_3", "goose:20260303_1", "goose:20260303_2"}  # scheduled and acp too
    fix = sessions["goose:20260302_3"]
    # The compaction summary (userVisible: false) is neither a message nor activity.
    assert (fix["_meta"][META_MESSAGES], fix["updatedAt"]) == (3, "2026-03-02T10:00:00.000Z")
    assert sessions["goose:20260303_1"]["_meta"][META_MESSAGES] == 2  # NULL metadata counts as visible
    assert sessions["goose:20260303_2"]["_meta"][META_TITLE_SOURCE] == "user"


def test_goose_folder_is_unchanged_byte_for_byte_and_not_read_twice(tmp_path: Path) -> None:
    root = _goose(tmp_path)
    before = tree(root)
    store = MemoryStore()
    state = tmp_path / "state"
    assert run_import(store, "goose", root, state=state).agents[0].added == 3
    assert tree(root) == before  # no -wal, no -shm, not a byte changed
    assert run_import(store, "goose", root, state=state).agents[0].files_read == 0


def test_a_wal_without_its_shm_is_read_from_a_private_copy(tmp_path: Path) -> None:
    root = _goose(tmp_path)
    db_path = root / "sessions" / "sessions.db"
    writer = sqlite3.connect(db_path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE sessions SET name = 'Fix CSV export (BOM)' WHERE id = '20260302_3'")
    # What a crashed goose leaves: its -wal with the newest rows, no -shm.
    shutil.copyfile(f"{db_path}-wal", tmp_path / "wal")
    shutil.copyfile(db_path, tmp_path / "db")
    writer.close()
    shutil.copyfile(tmp_path / "db", db_path)
    shutil.copyfile(tmp_path / "wal", f"{db_path}-wal")
    before = tree(root)
    store = MemoryStore()
    run_import(store, "goose", root)
    assert tree(root) == before
    titles = {s["sessionId"]: s.get("title") for s in listing(store)}
    assert titles["goose:20260302_3"] == "Fix CSV export (BOM)"  # seen through the WAL


# -- opencode --------------------------------------------------------------------------------------------------


def test_opencode_folder_is_unchanged_after_an_import(tmp_path: Path) -> None:
    root, writer = opencode_db(tmp_path)
    writer.execute("UPDATE session SET time_archived = 1772450000000 WHERE slug = 'brave-otter'")
    writer.close()
    before = tree(root)
    store = MemoryStore()
    state = tmp_path / "state"
    assert run_import(store, "opencode", root, state=state).agents[0].added == 2
    assert tree(root) == before
    assert run_import(store, "opencode", root, state=state).agents[0].files_read == 0
    archived = next(s for s in listing(store) if s.get("title") == "Speed up order search")
    assert archived["_meta"][META_ARCHIVED] is True


@pytest.mark.parametrize("agent", ["goose", "opencode"])
def test_a_running_agent_is_read_through_its_wal(agent: str, tmp_path: Path) -> None:
    """With the agent's writer open (-wal and -shm present) the newest rows are seen, and nothing is added."""
    if agent == "goose":
        root = _goose(tmp_path)
        path, update = root / "sessions" / "sessions.db", "UPDATE sessions SET name = 'live' WHERE id = '20260303_1'"
    else:
        root, setup = opencode_db(tmp_path)
        setup.close()
        path, update = root / "opencode.db", "UPDATE session SET title = 'live' WHERE slug = 'brave-otter'"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute(update)
    names = sorted(p.name for p in path.parent.iterdir())
    store = MemoryStore()
    run_import(store, agent, root)
    assert sorted(p.name for p in path.parent.iterdir()) == names
    assert "live" in {s.get("title") for s in listing(store)}
    writer.close()
