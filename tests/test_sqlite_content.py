"""The SQLite file with conversations in it: an erased conversation leaves no byte of its text in the files, and a
process of an older version still running after the upgrade to format 3 cannot write any more (the fence)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from events import SessionCreated, SessionDeleted, SqliteStore, StoreError
from events.schema import FENCE_MESSAGE, SCHEMA_VERSION
from events.sqlite_content import at_keys
from events.testing_content import turn
from events.verify import verify_log
from tests.older import fenced_after_upgrade, old_writer

MARKER = "zqx-marker-7f3a91"


def _raw(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def test_an_erased_conversation_leaves_no_byte_of_its_text_in_the_files(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path, compress=False) as store:
        store.append("s", [SessionCreated(cwd="/w", at=1)])
        for n in range(20):  # several transactions: older copies of the pages sit in the WAL
            event, messages = turn(f"question {n} about {MARKER}", f"answer {n}: {MARKER} " * 50, at=10 + n)
            store.append("s", [event], content=[messages])
        keep, kept = turn("another conversation stays", at=99)
        store.append("t", [keep], content=[kept])
        reader = sqlite3.connect(path)  # another process's idle connection does not hold the WAL
        assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 41
        assert MARKER.encode() in _raw(path)
        store.append("s", [SessionDeleted()])
        assert store.erase("s") == 40
        assert MARKER.encode() not in _raw(path)
        assert b"another conversation stays" in _raw(path)
        assert verify_log(store).healthy
        reader.close()


def test_messages_are_looked_up_by_their_key_not_found_by_reading_the_table(tmp_path: Path) -> None:
    """A search's hits and their passages are read by key: a page costs its hits, not the size of every kept
    conversation (a row value ``IN (VALUES ...)`` made SQLite read the whole table)."""
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        for n in range(50):
            event, messages = turn(f"question {n}", f"answer {n}", at=10 + n)
            store.append(f"s{n}", [SessionCreated(cwd="/w", at=1), event], content=[None, messages])
        keys = [(2 * n + 2, 1) for n in range(0, 50, 5)]  # session n's turn is the event at 2n + 2
        found = store.messages_at(keys)
        assert sorted(found) == keys
        assert [found[k].message.text for k in keys] == [f"answer {n}" for n in range(0, 50, 5)]
        db = sqlite3.connect(path)
        plan = " / ".join(
            row[3] for row in db.execute("EXPLAIN QUERY PLAN " + at_keys("m.body", 3), [2, 1, 6, 1, 10, 0])
        )
        db.close()
        assert "SEARCH m USING PRIMARY KEY" in plan, plan
        assert "SCAN m" not in plan, plan


def test_erasing_waits_for_a_reader_and_then_says_what_it_could_not_do(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path, compress=False, busy_timeout=0.2) as store:
        event, messages = turn(MARKER)
        store.append("s", [event, SessionDeleted()], content=[messages, None])
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchone()  # a read transaction holds its snapshot
        with pytest.raises(StoreError, match="a reader held the WAL"):
            store.erase("s")
        reader.execute("COMMIT")
        assert store.messages("s") == []  # the rows went; the next erase of nothing leaves the WAL as it is
        reader.close()


# -- the fence: an older writer after the upgrade ------------------------------------------------------------

_OLD_INSERT = (
    "INSERT INTO events (position, session_id, version, event_id, recorded_at, data, chain, stream)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def test_an_insert_that_names_no_format_is_refused_with_the_fence_message(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="upgraded by a newer acp-session-registry"):
        db.execute(_OLD_INSERT, (1, "s", 1, os.urandom(16), 1, b"\x80", b"x" * 32, 1))
    db.close()
    assert FENCE_MESSAGE.startswith("this store was upgraded")


def test_the_commit_before_cannot_write_after_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    child = old_writer(f"sqlite://{path}", tmp_path)  # it made a format-2 store and wrote to it
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    db.close()
    with SqliteStore(path) as store:  # this version upgrades it while the old one still has it open
        fenced_after_upgrade(store, child)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()
