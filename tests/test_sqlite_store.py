"""The SQLite store keeps the store contract, and refuses files that are not its own."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from events import (
    NO_STREAM,
    EventStore,
    SessionCreated,
    SessionUpdated,
    SqliteStore,
    StoreError,
    StoreFormatError,
    open_store,
)
from events.schema import SCHEMA_VERSION
from events.sqlite import APPLICATION_ID
from events.testing import StoreContract


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str | None:
        return f"sqlite://{tmp_path}/log.db"

    def corrupt(self, store: EventStore, position: int) -> None:
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE events SET data = x'c1ff00' WHERE position = ?", (position,))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_store_survives_reopening_with_its_identity(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    with open_store(url) as store:
        store.append("s", [SessionCreated(cwd="/a", at=1)], NO_STREAM)
        identity = store.identity
    with open_store(url) as store:
        assert store.identity == identity
        assert [r.event for r in store.read()] == [SessionCreated(cwd="/a", at=1)]
    with open_store(f"sqlite://{tmp_path}/other.db") as other:
        assert other.identity.store_id != identity.store_id
        assert other.identity.secret != identity.secret


def test_a_text_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 100)
    before = _digest(path)
    with pytest.raises(StoreFormatError, match=r"notes\.db: not an SQLite database"):
        open_store(f"sqlite://{path}")
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
    db.close()
    before = _digest(path)
    with pytest.raises(StoreFormatError, match=r"app\.db: not an acp-session-registry store"):
        SqliteStore(path)
    assert _digest(path) == before


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    before = _digest(path)
    with pytest.raises(StoreFormatError, match=rf"newer schema \(version {SCHEMA_VERSION + 1}\)"):
        SqliteStore(path)
    assert _digest(path) == before


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with SqliteStore(path) as store:
        store.append("s", [SessionUpdated(at=1)])
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_missing_directory_and_directory_paths_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        SqliteStore(tmp_path / "nope" / "log.db")
    with pytest.raises(StoreFormatError, match="is a directory"):
        SqliteStore(tmp_path)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://relative/log.db", "absolute path after three slashes"),
        ("sqlite:///", "must be an absolute file path"),
        ("sqlite:////tmp/x.db?synchronous=sometimes", "synchronous must be one of"),
        ("sqlite:////tmp/x.db?cache=big", "unknown option 'cache'"),
        ("memory://x", "take nothing after the scheme"),
        ("redis://localhost", "unknown store URL scheme"),
        ("/tmp/x.db", "unknown store URL scheme"),
    ],
)
def test_bad_store_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_store(url)


def test_durability_setting_comes_from_the_url(tmp_path: Path) -> None:
    with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore) and store.synchronous == "full"
    with open_store(f"sqlite://{tmp_path}/b.db?synchronous=normal") as store:
        assert isinstance(store, SqliteStore) and store.synchronous == "normal"


def test_a_writer_holding_the_file_too_long_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    with SqliteStore(path, busy_timeout=0.1) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match=r"another writer held the database for over 0\.1 s"):
                store.append("s", [SessionUpdated(at=1)])
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.append("s", [SessionUpdated(at=1)]) == [1]
