"""The SQLite store keeps the store contract, and refuses files that are not its own."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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
from events.testing import StoreContract, fake_clock
from events.verify import verify_log
from tests.waiting import wait_until


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str | None:
        return f"sqlite://{tmp_path}/log.db"

    def tamper(self, store: EventStore, statement: str, params: tuple[object, ...] = ()) -> None:
        assert isinstance(store, SqliteStore)
        db = sqlite3.connect(store.path)
        with db:
            db.execute(statement, params)
        db.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused_and_untouched(path: Path, message: str) -> None:
    before = _digest(path)
    with pytest.raises(StoreFormatError, match=message):
        open_store(f"sqlite://{path}")
    assert _digest(path) == before


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
    _refused_and_untouched(path, r"notes\.db: not an SQLite database")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
    db.close()
    _refused_and_untouched(path, r"app\.db: not an acp-session-registry store")


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    _refused_and_untouched(path, rf"newer schema \(version {SCHEMA_VERSION + 1}\)")


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
        ("postgresql://db.example/app?cache=big", "unknown option 'cache'"),
        ("postgresql://db.example/app?cache=big&mode=x", "unknown options 'cache', 'mode'"),
        ("postgresql://db.example/app?schema=Sessions", "schema must be a lowercase SQL identifier"),
        ("postgresql://db.example/app?schema=pg_sessions", "not starting with a digit or pg_"),
        ("postgresql://db.example/app?schema=a%3Bdrop", "got 'a;drop'"),
        ("postgresql://db.example/app?schema=", "got ''"),
        ("postgresql://db.example/app?schema=a&schema=b", "schema is given 2 times"),
        ("postgresql://db.example/app#main", "takes no #fragment"),
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


# -- issue 16: private files, symlinks, no silent new stores, read-only files, integrity ------------------------


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def _modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}


@pytest.mark.usefixtures("umask_022")
@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_the_store_and_its_wal_and_shm_are_private_whatever_the_umask(tmp_path: Path, synchronous: str) -> None:
    with open_store(f"sqlite://{tmp_path}/log.db?synchronous={synchronous}") as store:
        store.append("s", [SessionCreated(cwd="/a", at=1, title="a private prompt")])
        assert _modes(tmp_path) == {"log.db": 0o600, "log.db-wal": 0o600, "log.db-shm": 0o600}
    with open_store(f"sqlite://{tmp_path}/log.db") as store:  # SQLite makes the -wal and -shm anew
        store.append("s", [SessionUpdated(at=2)])
        assert _modes(tmp_path) == {"log.db": 0o600, "log.db-wal": 0o600, "log.db-shm": 0o600}


def test_a_store_path_that_is_a_symlink_is_refused_unless_allowed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the attacker wants this overwritten\n")
    link = tmp_path / "log.db"
    link.symlink_to(victim)
    with pytest.raises(StoreError, match=rf"{link}: is a symbolic link \(to {victim}\).*follow_symlinks=True"):
        SqliteStore(link)
    assert victim.read_text() == "the attacker wants this overwritten\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.db", "victim.txt"]

    real = tmp_path / "real.db"
    SqliteStore(real).close()
    link.unlink()
    link.symlink_to(real)
    with SqliteStore(link, follow_symlinks=True) as store:
        assert store.path == str(real)
        store.append("s", [SessionUpdated(at=1)])
    with open_store(f"sqlite://{link}", follow_symlinks=True) as store:
        assert store.head() == 1


def test_a_planted_wal_or_shm_link_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    SqliteStore(tmp_path / "log.db").close()
    for suffix in ("-wal", "-shm", "-journal"):
        planted = tmp_path / f"log.db{suffix}"
        planted.symlink_to(victim)
        with pytest.raises(StoreError, match=rf"log\.db{suffix}: is a symbolic link"):
            SqliteStore(tmp_path / "log.db")
        planted.unlink()
    assert victim.read_text() == "keep me\n"


def test_an_empty_file_is_a_store_only_when_the_opener_asks_to_create_one(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(StoreFormatError, match=rf"{path}: is empty, not a registry store; left untouched"):
        SqliteStore(path, create=False)
    with pytest.raises(StoreFormatError, match="is empty"):
        open_store(f"sqlite://{path}", create=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"] and path.stat().st_size == 0
    with pytest.raises(StoreError, match="no store there"):
        SqliteStore(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


def test_a_truncated_store_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    with SqliteStore(path) as store:
        for n in range(200):
            store.append(f"s{n}", [SessionCreated(cwd="/a", at=n, title="t" * 200)])
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size // 2)
    before = _digest(path)
    for create in (True, False):
        with pytest.raises(StoreFormatError, match=rf"{path}: is damaged or truncated \(.* has {size // 2:,} bytes\)"):
            SqliteStore(path, create=create)
    assert _digest(path) == before


def test_tables_of_others_in_the_same_file_are_tolerated(tmp_path: Path) -> None:
    """The registry's read model keeps its tables beside the log."""
    with SqliteStore(tmp_path / "log.db") as store:
        store.append("s", [SessionUpdated(at=1)])
        db = store.connect()
        db.execute("CREATE TABLE rm_sessions (session_id TEXT PRIMARY KEY, info BLOB)")
        db.close()
    with SqliteStore(tmp_path / "log.db", create=False) as store:
        assert store.head() == 1 and verify_log(store).healthy


def _downgrade(path: Path, version: int) -> None:
    """What a store written by an older release looks like: version 2 has no messages table, no writer column and
    no fence; version 1 has no chain column either."""
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER events_writer_fence")
    db.execute("DROP TABLE messages")
    db.execute("ALTER TABLE events DROP COLUMN writer")
    if version < 2:
        db.execute("ALTER TABLE events DROP COLUMN chain")
    db.execute(f"PRAGMA user_version={version}")
    db.commit()
    db.close()


def _downgrade_to_version_1(path: Path) -> None:
    _downgrade(path, 1)


def test_a_version_1_store_is_upgraded_in_place_on_its_first_writable_open(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    with SqliteStore(path, clock=fake_clock()) as store:
        for n in range(30):
            store.append(f"s{n % 4}", [SessionUpdated(at=n)])
        expected = [store.chain_at(p) for p in range(31)]
    _downgrade_to_version_1(path)
    with SqliteStore(path) as store:
        assert [store.chain_at(p) for p in range(31)] == expected  # the same chain as if written by version 2
        assert verify_log(store).healthy
        store.append("s0", [SessionUpdated(at=99)])
        assert verify_log(store).healthy
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    db.close()


def test_an_idle_subscription_looks_at_data_version_not_at_the_log(tmp_path: Path) -> None:
    """Waiting costs a PRAGMA every poll interval: the log is read when the wait begins and ends, not in between."""
    with SqliteStore(tmp_path / "log.db", poll_interval=0.005) as store, store.subscribe() as sub:
        assert sub.poll(timeout=0.01) == []
        statements: list[str] = []
        store._reader().set_trace_callback(statements.append)
        assert sub.poll(timeout=0.3) == []
        reads = [s for s in statements if "FROM events" in s]
        assert statements.count("PRAGMA data_version") > 20 and len(reads) <= 2, statements[:5]
        other = SqliteStore(tmp_path / "log.db")  # another connection: the doorbell does not ring here
        threading.Timer(0.05, lambda: other.append("s", [SessionUpdated(at=1)])).start()
        assert [r.version for r in sub.poll(timeout=5)] == [1]
        other.close()


# -- read-only files: as a user who may not write them --------------------------------------------------------

_READER = """
import json, logging, sys
from events import SessionUpdated, StoreError, open_store
from events.verify import verify_log
store = open_store(sys.argv[1], create=False)
result = {"read_only": store.read_only, "head": store.head(), "chain1": store.chain_at(1) is not None}
result["healthy"] = verify_log(store).healthy
try:
    store.append("s", [SessionUpdated(at=1)])
except StoreError as exc:
    result["append"] = str(exc)
if len(sys.argv) > 2:  # wait for an append by the writer, which holds the store open
    with store.subscribe(after=store.head()) as sub:
        print(json.dumps(result), flush=True)
        result = {"seen": [r.position for r in sub.poll(timeout=20)]}
print(json.dumps(result), flush=True)
"""


_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _without_root_overrides() -> None:
    """In the child before exec: root keeps its uid but loses the capabilities that ignore file modes, so the
    modes below hold for it as for any user (a non-root user needs nothing dropped)."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
            if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _as_reader(url: str, *more: str) -> subprocess.Popen[str]:
    """The reader child, as a user who cannot write the store (its files and folder are made read-only)."""
    return subprocess.Popen(
        [sys.executable, "-c", _READER, url, *more],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_without_root_overrides,  # noqa: PLW1509 - no threads of ours run at this point
    )


def _make_unwritable(*paths: Path) -> None:
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder a test makes unwritable (``_make_unwritable``), writable again afterwards so it can be removed."""
    folder = tmp_path / "ro"
    folder.mkdir()
    yield folder
    folder.chmod(0o755)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_store_nobody_may_write_is_read_and_said_to_be_read_only(read_only_folder: Path, version: int) -> None:
    folder = read_only_folder
    path = folder / "log.db"
    with SqliteStore(path) as store:
        store.append("s", [SessionCreated(cwd="/a", at=1)])
    if version < SCHEMA_VERSION:
        _downgrade(path, version)
    _make_unwritable(folder, path)
    before = _digest(path)
    out, err = _as_reader(f"sqlite://{path}").communicate(timeout=60)
    result = json.loads(out)
    assert result["read_only"] is True and result["head"] == 1 and result["healthy"] is True
    assert result["chain1"] is (version >= 2)  # a version-1 store is upgraded only where it can be written
    assert "open read-only" in result["append"] and "nothing was appended" in result["append"]
    assert [line for line in err.splitlines() if "read-only" in line] == [
        f"{path}: opened read-only (the file is not writable): reading works, appends are refused"
    ]
    assert _digest(path) == before and sorted(p.name for p in folder.iterdir()) == ["log.db"]


def test_a_read_only_reader_follows_a_writer_that_holds_the_store_open(read_only_folder: Path) -> None:
    folder = read_only_folder
    path = folder / "log.db"
    with SqliteStore(path) as writer:
        writer.append("s", [SessionCreated(cwd="/a", at=1)])
        _make_unwritable(folder, path, folder / "log.db-wal", folder / "log.db-shm")
        reader = _as_reader(f"sqlite://{path}", "follow")
        assert reader.stdout is not None
        first = json.loads(reader.stdout.readline())
        assert first["read_only"] is True and first["head"] == 1
        writer.append("s", [SessionUpdated(at=2)])
        out, _ = reader.communicate(timeout=60)
        assert json.loads(out) == {"seen": [2]}


def test_appenders_waiting_on_a_commit_share_the_next_one(tmp_path: Path) -> None:
    """The first append holds the write (its clock is slow); the seven that arrive meanwhile commit together."""
    first_call = threading.Event()
    release = threading.Event()

    def clock() -> int:
        if not first_call.is_set():
            first_call.set()
            release.wait(10)
        return time.time_ns()

    with SqliteStore(tmp_path / "log.db", clock=clock) as store:
        statements: list[str] = []
        store._writer.set_trace_callback(statements.append)
        threads = [threading.Thread(target=store.append, args=(f"s{n}", [SessionUpdated(at=n)])) for n in range(8)]
        threads[0].start()
        assert first_call.wait(10)
        for t in threads[1:]:
            t.start()
        wait_until(lambda: len(store._group._queue) >= 7, 30, "the seven to queue behind the first commit")
        release.set()
        for t in threads:
            t.join(10)
        assert statements.count("COMMIT") == 2
        assert sorted(r.session_id for r in store.read()) == [f"s{n}" for n in range(8)]


def test_two_processes_making_one_new_store_at_once_both_open_it(tmp_path: Path) -> None:
    """Two proxies started at once on a store not made yet: each opens it (one makes it, the other waits and finds
    it) - neither is refused with "database is locked" nor loses the -wal and -shm files the other made."""
    code = (
        "import sys; from events.sqlite import SqliteStore; print('ready', flush=True); sys.stdin.readline(); "
        "SqliteStore(sys.argv[1]).close(); print('ok')"
    )
    for n in range(12):
        path = str(tmp_path / f"new-{n}.db")
        openers = [
            subprocess.Popen(
                [sys.executable, "-c", code, path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        for opener in openers:  # every one imported and waiting: then all are let go at once
            assert opener.stdout is not None and opener.stdout.readline() == "ready\n"
        for opener in openers:
            assert opener.stdin is not None
            opener.stdin.write("go\n")
            opener.stdin.flush()
        for opener in openers:
            out, err = opener.communicate(timeout=60)
            assert (opener.returncode, out) == (0, "ok\n"), err
