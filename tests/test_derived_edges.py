"""The edges of derived state an outside hostile pass found (issue 35), each with the smallest reproduction: a
state blob edited and resealed by whoever can edit the store's file, a write that committed while the read model
could not follow it, concurrent first starts on a new file, and oddities planted where kept snapshots live."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import msgspec
import pytest
from msgspec import UNSET

from events import NO_STREAM, SessionCreated
from events.factory import open_store
from registry import SessionRegistry, SessionState
from registry.backend import Backend
from registry.readmodel.keys import SEAL, Seal


def _resealed(blob: bytes, how: str, path: Path) -> bytes:
    """``blob`` with its title edited and sealed again as an editor of the store's file can: with a CRC-32 trailer
    (the seal before issue 35), or with the keyed seal and the only key the file holds (derived from the store's
    secret in ``registry_meta``, as a backend that keeps no key apart derives it)."""
    if how == "crc32":
        body = blob[:-4].replace(b"mine", b"evil")
        return body + zlib.crc32(body).to_bytes(4, "little")
    with open_store(f"sqlite://{path}", create=False) as store:
        key = Backend(store).seal_key()
    edited = msgspec.msgpack.decode(blob[SEAL:].replace(b"mine", b"evil"), type=SessionState)
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
        assert registry.read_model.tables.schema_problems() == []  # type: ignore[union-attr]
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
        assert registry.read_model.tables.schema_problems() == []  # type: ignore[union-attr]


def _verify(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "registry.cli", "--store", url, "verify", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("oddity", ["a FIFO past the checkpoint", "a FIFO for the folder", "a stray file"])
def test_every_oddity_where_snapshots_live_is_named_by_verify(tmp_path: Path, oddity: str) -> None:
    path = tmp_path / "log.db"
    url = f"sqlite://{path}"
    with SessionRegistry.open(url, follow=False) as registry:
        for n in range(4):
            registry.create("/w", session_id=f"s{n}")
    with open_store(url) as store:  # appended without the read model: its checkpoint lags the head
        store.append("late", [SessionCreated(cwd="/w", at=1)], NO_STREAM)
    folder = Path(f"{path}.snapshots")
    if oddity == "a FIFO for the folder":
        os.mkfifo(folder)
        named = f"{folder} is a FIFO"
    else:
        folder.mkdir(mode=0o700)
        planted = folder / (f"{5:020d}.snap" if oddity.startswith("a FIFO") else "notes.txt")
        if oddity.startswith("a FIFO"):
            os.mkfifo(planted)
        else:
            planted.write_text("not a snapshot")
        named = str(planted)
    done = _verify(url)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert any(named in problem["problem"] for problem in json.loads(done.stdout)["problems"]), done.stdout


class _Racing:
    """A connection on a new file that lets another opener create the store right after its first statement (the
    interleaving concurrent first starts met about once in 70)."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._path = path
        self.statements = 0

    def execute(self, statement: str) -> sqlite3.Cursor:
        cursor = self._db.execute(statement)
        rows = cursor.fetchall()
        if not self.statements:
            open_store(f"sqlite://{self._path}").close()  # the other first start, whole
        self.statements += 1
        return self._db.execute("SELECT " + ", ".join("?" * len(rows[0])), rows[0])


def test_the_format_is_read_in_one_snapshot_while_another_start_creates_the_store(tmp_path: Path) -> None:
    from events.sqlite_format import check_format  # noqa: PLC0415 - the step itself, interleaved by hand

    path = tmp_path / "new.db"
    racing = _Racing(path)
    assert check_format(racing, str(path), True, None) == 0  # type: ignore[arg-type]  # empty when it looked
    with open_store(f"sqlite://{path}", create=False) as store:  # and the store the other start made opens
        assert store.head() == 0
