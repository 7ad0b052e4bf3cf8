"""The read model's seal key (``<store file>.seal-key``) under every condition an outside hostile pass tried (issue
42): not a private regular file, lost while a process serves, lost with a log cut short - real files, real
processes, a real second owner where the tests run as root."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from registry import SessionRegistry
from tests.proxy_wire import AGENT, ROOT


def cli(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``acp-registry ARGS`` in a process of its own (``check=False``: the test reads its exit code)."""
    return subprocess.run(
        [sys.executable, "-m", "registry.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def _filled(path: Path, sessions: int = 3) -> str:
    url = f"sqlite://{path}"
    with SessionRegistry.open(url, follow=False) as registry:
        for n in range(sessions):  # a second apart: newest first is not a tie
            registry.create("/w", session_id=f"s{n}", at=(n + 1) * 1_000_000_000)
    return url


INITIALIZE = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
COMMANDS = {
    "list": ("list",),
    "verify": ("verify",),
    "title": ("title", "s0", "Named"),
    "serve": ("serve",),
    "proxy": ("proxy", "--", sys.executable, AGENT),
}


def _plant(key: Path, what: str, elsewhere: Path) -> None:
    key.unlink()
    if what == "a directory":
        key.mkdir()
    elif what == "a FIFO":
        os.mkfifo(key)
    else:
        elsewhere.write_bytes(b"k" * 32)
        key.symlink_to(elsewhere)


@pytest.mark.parametrize("what", ["a directory", "a FIFO", "a symbolic link"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_key_that_is_not_a_regular_file_is_refused_with_one_line(tmp_path: Path, what: str, command: str) -> None:
    url = _filled(tmp_path / "log.db")
    key = tmp_path / "log.db.seal-key"
    _plant(key, what, tmp_path / "elsewhere")
    done = cli("--store", url, *COMMANDS[command], stdin=INITIALIZE)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if "seal-key" in line]
    assert len(said) == 1 and str(key) in said[0] and "refused" in said[0], done.stderr
    assert not done.stdout.strip() or command in ("serve", "proxy")  # nothing listed from tables it cannot check
    kinds = {"a directory": stat.S_ISDIR, "a FIFO": stat.S_ISFIFO, "a symbolic link": stat.S_ISLNK}
    assert kinds[what](os.lstat(key).st_mode)  # left as it was found


def test_a_key_others_can_read_is_made_private_and_the_tables_stay(tmp_path: Path) -> None:
    url = _filled(tmp_path / "log.db")
    key = tmp_path / "log.db.seal-key"
    key.chmod(0o644)
    done = cli("--store", url, "list", "--json")
    assert done.returncode == 0, done.stderr
    assert [s["sessionId"] for s in json.loads(done.stdout)["sessions"]] == ["s2", "s1", "s0"]
    assert key.stat().st_mode & 0o777 == 0o600
    assert [line for line in done.stderr.splitlines() if "seal key" in line] == [
        f"acp-registry: {key}: other users could read the read model's seal key (mode 0644); it is 0600 now"
    ]
    assert "rebuild" not in done.stderr  # the same key: the tables sealed with it serve
    assert cli("--store", url, "list").stderr == ""  # said once: it is private now


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user can only be made by root")
def test_a_key_of_another_user_is_refused_unless_the_store_is_shared_on_purpose(tmp_path: Path) -> None:
    url = _filled(tmp_path / "log.db")
    key = tmp_path / "log.db.seal-key"
    os.chown(key, 65534, 65534)
    done = cli("--store", url, "list")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    (said,) = done.stderr.splitlines()
    assert str(key) in said and "another user (uid 65534)" in said and "refused" in said
    shared = cli("--store", url, "list", "--json", env={"ACP_REGISTRY_FOREIGN_STORE": "allow"})
    assert shared.returncode == 0 and len(json.loads(shared.stdout)["sessions"]) == 3, shared.stderr
    assert key.stat().st_uid == 65534  # left as it is


def _rebuilds(text: str) -> int:
    return text.count("rebuilding it from the log")


def test_a_key_deleted_while_a_process_serves_is_rebuilt_for_once_not_in_turns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A long-lived registry (``serve``, a proxy) and short commands beside it, the key deleted between them: the
    first command that finds no key makes one and rebuilds the tables with it; the serving process takes that key
    up (its reads and its writes) instead of rebuilding them back, so no later command rebuilds again."""
    path = tmp_path / "log.db"
    url = _filled(path)
    key = tmp_path / "log.db.seal-key"
    elsewhere: list[str] = []
    with SessionRegistry.open(url, follow=False) as serving:
        assert len(serving.list().sessions) == 3
        key.unlink()
        for n in range(4):
            done = cli("--store", url, "title", f"s{n % 3}", f"From outside {n}")
            assert done.returncode == 0, done.stderr
            elsewhere.append(done.stderr)
            serving.create("/w", session_id=f"mine{n}", at=(10 + n) * 1_000_000_000)  # folded with the new key
            assert serving.get(f"s{n % 3}").title == f"From outside {n}"
            assert len(serving.list().sessions) == 4 + n
        listed = cli("--store", url, "list", "--json")
        assert listed.returncode == 0 and len(json.loads(listed.stdout)["sessions"]) == 7
        elsewhere.append(listed.stderr)
    assert _rebuilds(elsewhere[0]) == 1  # the first command after the loss: a new key, the tables rebuilt with it
    assert sum(_rebuilds(text) for text in elsewhere[1:]) == 0, elsewhere
    assert _rebuilds(caplog.text) == 0, caplog.text
    assert cli("--store", url, "verify").returncode == 0


def test_a_lost_key_the_serving_process_still_holds_is_put_back(tmp_path: Path) -> None:
    """The key file deleted, and the serving process is the first to need it again (a fault): it writes back the
    key it holds, and the tables sealed with it stay valid for every other process."""
    path = tmp_path / "log.db"
    url = _filled(path)
    key = tmp_path / "log.db.seal-key"
    held = key.read_bytes()
    with SessionRegistry.open(url, follow=False) as serving:
        key.unlink()
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            db.execute("UPDATE rm_sessions SET state = x'00' WHERE session_id = 's0'")  # a damaged row: a fault
        assert len(serving.list().sessions) == 3  # rebuilt, with the key it holds
    assert key.read_bytes() == held and key.stat().st_mode & 0o777 == 0o600
    listed = cli("--store", url, "list")
    assert listed.returncode == 0 and _rebuilds(listed.stderr) == 0, listed.stderr


def _cut(path: Path) -> None:
    """Records cut from the log's end behind the registry's back (positions 2 and 3 of 3)."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM events WHERE position > 1")
        db.execute("UPDATE streams SET version = 0 WHERE session_id IN ('s1', 's2')")


def test_a_copy_without_its_key_keeps_the_evidence_of_a_log_cut_short(tmp_path: Path) -> None:
    """A ``cp`` backup of the file alone (the key stays behind), of a log that had been cut short: the copy's tables
    are sealed with a key it has not and are rebuilt - after the finding is recorded, read from them first."""
    original = tmp_path / "log.db"
    _filled(original)
    _cut(original)
    copy = tmp_path / "backup" / "log.db"
    copy.parent.mkdir()
    shutil.copyfile(original, copy)
    url = f"sqlite://{copy}"
    listed = cli("--store", url, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["sessionId"] for s in json.loads(listed.stdout)["sessions"]] == ["s0"]
    assert "integrity: " in listed.stderr and "position 3" in listed.stderr
    verified = cli("--store", url, "verify", "--json")
    assert verified.returncode == 1
    (problem,) = json.loads(verified.stdout)["problems"]
    assert problem["position"] == 3 and "integrity" in problem["problem"]


def test_tables_rebuilt_for_a_lost_key_of_a_whole_log_record_nothing(tmp_path: Path) -> None:
    copy = tmp_path / "backup" / "log.db"
    copy.parent.mkdir()
    _filled(tmp_path / "log.db")
    shutil.copyfile(tmp_path / "log.db", copy)
    listed = cli("--store", f"sqlite://{copy}", "list")
    assert listed.returncode == 0 and "integrity" not in listed.stderr and _rebuilds(listed.stderr) == 1
    assert cli("--store", f"sqlite://{copy}", "verify").returncode == 0
