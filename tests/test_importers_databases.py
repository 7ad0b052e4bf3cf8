"""The agents that keep their sessions in SQLite, imported: goose's ``sessions.db`` and opencode's
``opencode.db``, read in WAL mode without writing beside them; a database that is locked, of a newer schema, or
not a database at all is skipped with its reason and deletes nothing; opencode's child sessions and placeholder
titles. The recorded goose fixture and opencode's files left unchanged are in ``test_importers_recordings.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from events import MemoryStore
from registry.agents import META_SOURCE_GONE
from registry.model import META_ARCHIVED, META_MESSAGES, META_TITLE_SOURCE
from tests.importing import FIXTURES, listing, run_import, skipped

# -- goose ---------------------------------------------------------------------------------------------------

# goose's tables at schema version 16, as the recorded fixture has them; the rows are this module's own.
GOOSE_SCHEMA = (FIXTURES / "goose" / "schema.sql").read_text()
GOOSE_ROWS = """
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
    writer.executescript(GOOSE_SCHEMA + GOOSE_ROWS)
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
    sessions = {s["sessionId"]: s for s in listing(store)}
    assert sessions["goose:20260302_3"]["updatedAt"] == "2026-03-02T11:13:19.000Z"  # milliseconds, read as such
    assert sessions["goose:20260215_1"]["_meta"][META_SOURCE_GONE] is True  # its row is gone: kept, marked


def test_goose_locked_or_newer_schema_databases_are_skipped_with_a_reason(tmp_path: Path) -> None:
    root = tmp_path / "goose"
    (root / "sessions").mkdir(parents=True)
    path = root / "sessions" / "sessions.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.executescript(GOOSE_SCHEMA + GOOSE_ROWS)  # rollback-journal mode: an exclusive lock keeps readers out
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
    sessions = {s["sessionId"]: s for s in listing(store)}
    session = sessions["opencode:ses_3a9f1c2b7ffeQk2m9PpLr4TzVw"]
    assert (session["title"], session["_meta"][META_ARCHIVED]) == ("Order search index", True)
    assert sessions["opencode:ses_3a9f1c2b8100Aa1b2Cc3Dd4Ee5"]["_meta"][META_SOURCE_GONE] is True


def test_opencode_without_a_database_reads_nothing_and_deletes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    (root / "storage" / "session").mkdir(parents=True)
    summary = run_import(MemoryStore(), "opencode", root)
    assert list(skipped(summary)) == [
        "only the legacy JSON storage/ exists (opencode migrates it to opencode.db on its next start)"
    ]
