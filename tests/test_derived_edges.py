"""The edges of derived state an outside hostile pass found (issue 35), each with the smallest reproduction: a
state blob edited and resealed by whoever can edit the store's file, a write that committed while the read model
could not follow it, concurrent first starts on a new file, and oddities planted where kept snapshots live."""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from pathlib import Path

import msgspec
import pytest
from msgspec import UNSET

from events.factory import open_store
from registry import SessionRegistry, SessionState
from registry.backend import Backend
from registry.readmodel.tables import SEAL, Seal


def _resealed(blob: bytes, how: str, path: Path) -> bytes:
    """``blob`` with its title edited and sealed again as an editor of the store's file can: with a CRC-32 trailer
    (the seal before issue 35), or with the keyed seal and the only key the file holds (derived from the store's
    secret in ``registry_meta``, as a backend that keeps no key apart derives it)."""
    if how == "crc32":
        body = blob[:-4].replace(b"mine", b"evil")
        return body + zlib.crc32(body).to_bytes(4, "little")
    with open_store(f"sqlite://{path}", create=False) as store:
        key = Backend(store).seal_key()
    edited = msgspec.msgpack.decode(blob[:-SEAL].replace(b"mine", b"evil"), type=SessionState)
    return Seal(key).seal(edited)


@pytest.mark.parametrize("how", ["crc32", "the store's secret"])
def test_a_state_edited_and_resealed_without_the_key_kept_apart_is_never_served(tmp_path: Path, how: str) -> None:
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}", follow=False) as registry:
        registry.create("/w", session_id="s", title="mine")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            (blob,) = db.execute("SELECT state FROM rm_sessions WHERE session_id = 's'").fetchone()
            db.execute("UPDATE rm_sessions SET state = ? WHERE session_id = 's'", (_resealed(blob, how, path),))
        assert [s.title for s in registry.list().sessions] == ["mine"]  # found when read, rebuilt from the log
        assert registry.get("s").title == "mine"
    assert (tmp_path / "log.db.seal-key").stat().st_mode & 0o777 == 0o600


def test_tables_sealed_with_a_lost_key_are_rebuilt_at_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}", follow=False) as registry:
        registry.create("/w", session_id="s", title="mine")
    (tmp_path / "log.db.seal-key").unlink()  # a copy of the file without its key, or a key lost
    with SessionRegistry.open(f"sqlite://{path}", follow=False) as registry:
        assert [s.title for s in registry.list().sessions] == ["mine"]
        assert registry.read_model.schema_problems() == []
    assert "sealed with another key" in caplog.text


@pytest.mark.parametrize(
    "trigger",
    [
        "CREATE TRIGGER rm_no BEFORE UPDATE ON rm_meta BEGIN SELECT RAISE(ABORT, 'no'); END",
        "CREATE TRIGGER rm_no BEFORE INSERT ON rm_sessions BEGIN SELECT RAISE(ABORT, 'no'); END",
    ],
)
def test_a_write_that_committed_is_answered_as_committed_whatever_fails_after(tmp_path: Path, trigger: str) -> None:
    """A trigger that refuses the read model's writes, added behind a serving registry's back: the append commits,
    the fold in its transaction fails - and the answer is the session made, once (a client told -32603 retries,
    and makes it twice); the tables are rebuilt (the trigger goes with them) and list it."""
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}", follow=False) as registry:
        registry.create("/w", session_id="a", at=1_000_000_000)
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            db.execute(trigger)
        head = registry.store.head()
        made = registry.create("/w", session_id="b", at=2_000_000_000)
        assert made.session_id == "b" and registry.store.head() == head + 1
        assert registry.set_title("b", "named") == "named"
        assert [(s.session_id, s.title) for s in registry.list().sessions] == [("b", "named"), ("a", UNSET)]
        assert registry.read_model.schema_problems() == []
