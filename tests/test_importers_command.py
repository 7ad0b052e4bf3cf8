"""``acp-registry import-agents`` as a user runs it: the summary, its errors as one line and exit 2, the import
state kept private and never a planted link's victim, and ``--watch`` woken by file events in a real process."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events import open_store
from registry.cli import main
from tests.importing import SID, only, prompt, reply, session_file, spec_session, write_lines


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _import(store: str, *argv: str) -> list[str]:
    return ["--store", store, "import-agents", *argv]


def test_the_command_imports_prints_a_summary_and_counts_unchanged_sessions(
    claude: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(3):
        other = f"3333333{n}-0000-4000-8000-000000000000"
        write_lines(session_file(claude, other), [prompt("2026-03-03T08:00:00Z", f"task {n}", session=other)])
    url = f"sqlite:///{tmp_path}/reg.db"
    argv = _import(url, "--agent", "claude-code", "--root", f"claude-code={claude}", "--json")
    code, out, _ = _run(capsys, *argv)
    first = msgspec.json.decode(out)["agents"][0]
    assert (code, first["added"], first["unchanged"]) == (0, 4, 0)
    assert (tmp_path / "reg.db.import-state").exists()
    code, out, _ = _run(capsys, *argv)
    again = msgspec.json.decode(out)["agents"][0]
    # Nothing was read again (no file moved), and every session the agent has is counted as unchanged.
    assert (code, again["added"], again["changed"], again["unchanged"], again["filesRead"]) == (0, 0, 0, 4, 0)
    # camelCase keys, as every other --json of the command line.
    assert set(again) >= {"agent", "root", "skipped", "filesRead", "bytesRead", "seconds", "unavailable"}
    code, out, _ = _run(capsys, *argv[:-1])
    assert code == 0 and "claude-code" in out and "unchanged" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--root", "claude-code"], "--root takes AGENT=PATH"),
        (["--root", "vim=/tmp"], "unknown agent 'vim'"),
        (["--interval", "0", "--watch"], "--interval must be a positive"),
        (
            ["--root", "claude-code=/nonexistent/claude"],
            "--root claude-code=/nonexistent/claude: the folder is missing",
        ),
    ],
)
def test_the_command_refuses_bad_options_in_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, *_import(f"sqlite:///{tmp_path}/reg.db", *argv))
    assert (code, out) == (2, "")
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "reg.db.import-state").exists()  # refused before anything was read or written


def test_a_root_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    code, _, err = _run(capsys, *_import(f"sqlite:///{tmp_path}/reg.db", "--root", f"codex={tmp_path / 'file'}"))
    assert code == 2 and "not a folder" in err


def test_the_command_refuses_a_store_it_cannot_open(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *_import("nosuch://x", "--agent", "codex"))
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("where", ["state", "lock"])
def test_a_folder_at_the_state_or_lock_path_is_one_line_and_exit_2(
    where: str, claude: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "reg.db.import-state"
    (state if where == "state" else Path(f"{state}.lock")).mkdir()
    url = f"sqlite:///{tmp_path}/reg.db"
    code, out, err = _run(capsys, *_import(url, "--agent", "claude-code", "--root", f"claude-code={claude}"))
    assert (code, out) == (2, "")
    created, refused = err.strip().splitlines()  # the store was made before its import state was looked at
    assert created == f"acp-registry: created a new store at {tmp_path}/reg.db"
    assert "a folder is where the import state" in refused
    assert "Traceback" not in err


def test_the_import_state_and_its_lock_are_private_and_stay_so(
    claude: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = os.umask(0o022)
    try:
        url = f"sqlite:///{tmp_path}/reg.db"
        argv = _import(url, "--agent", "claude-code", "--root", f"claude-code={claude}", "--json")
        assert _run(capsys, *argv)[0] == 0
        state, lock = tmp_path / "reg.db.import-state", tmp_path / "reg.db.import-state.lock"
        assert (stat.S_IMODE(state.stat().st_mode), stat.S_IMODE(lock.stat().st_mode)) == (0o600, 0o600)
        inode = state.stat().st_ino
        write_lines(session_file(claude), [prompt("2026-03-02T12:00:00Z", "more")], mode="a")
        assert _run(capsys, *argv)[0] == 0
        assert state.stat().st_ino != inode  # replaced atomically...
        assert stat.S_IMODE(state.stat().st_mode) == 0o600  # ...and still private
        nested = tmp_path / "new" / "folder" / "state"
        assert _run(capsys, *argv, "--state", str(nested))[0] == 0
        assert stat.S_IMODE(nested.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(nested.stat().st_mode) == 0o600
    finally:
        os.umask(old)


@pytest.mark.parametrize("planted", ["lock", "state", "old temp names"])
def test_links_planted_in_a_shared_folder_are_never_followed(
    planted: str, claude: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp: anyone may create names here
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    state = shared / "import-state"
    names = {
        "lock": [Path(f"{state}.lock")],
        "state": [state],
        # The names the importer used to write its temporary file under (pid-based, predictable).
        "old temp names": [shared / f".import-state.{pid}.tmp" for pid in range(os.getpid() - 5, os.getpid() + 50)],
    }[planted]
    for name in names:
        name.symlink_to(victim)
    url = f"sqlite:///{tmp_path}/reg.db"
    argv = _import(url, "--agent", "claude-code", "--root", f"claude-code={claude}", "--state", str(state))
    code, _, err = _run(capsys, *argv)
    assert victim.read_bytes() == b"precious\n" and stat.S_IMODE(victim.stat().st_mode) != 0o600
    if planted == "old temp names":
        assert code == 0 and stat.S_IMODE(state.stat().st_mode) == 0o600 and not state.is_symlink()
    else:
        assert code == 2 and "symbolic link; refusing to follow it" in err
        assert all(name.is_symlink() for name in names)  # left as they were, not replaced


def test_a_line_nested_5000_deep_costs_that_line_only(
    claude: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = session_file(claude)
    with open(path, "a") as f:
        f.write('{"type":"user","sessionId":"' + SID + '","message":' + "[" * 5000 + "]" * 5000 + "}\n")
    write_lines(
        path, [prompt("2026-03-02T12:00:00Z", "after the bad line"), reply("2026-03-02T12:00:05Z", "m2")], mode="a"
    )
    url = f"sqlite:///{tmp_path}/reg.db"
    code, out, err = _run(capsys, *_import(url, "--agent", "claude-code", "--root", f"claude-code={claude}", "--json"))
    agent = msgspec.json.decode(out)["agents"][0]
    assert (code, err, agent["unavailable"], agent["added"]) == (0, _created(tmp_path / "reg.db"), None, 1)
    groups = {g["reason"]: g for g in agent["skipped"]}
    assert groups["line nests too deep to read, skipped"]["examples"] == [f"{path}:{len(spec_session()) + 1}"]
    with open_store(url) as store:
        session = only(store)
    assert session["updatedAt"] == "2026-03-02T12:00:05.000Z"  # the lines after it were read
    assert session["_meta"]["acp-session-registry/messageCount"] == 4


def _created(store: Path) -> str:
    """What a command says when it makes a new store."""
    return f"acp-registry: created a new store at {store}\n"


# -- --watch, in a real process ------------------------------------------------------------------------------


class _Lines:
    """The lines a child process prints, as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._lines: list[str] = []
        self._ready = threading.Condition()
        assert proc.stdout is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self._ready:
                self._lines.append(line)
                self._ready.notify_all()

    def wait_for(self, count: int, timeout: float) -> list[str]:
        with self._ready:
            self._ready.wait_for(lambda: len(self._lines) >= count, timeout)
            return list(self._lines)


@pytest.fixture
def watcher(claude: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], _Lines]]:
    url = f"sqlite:///{tmp_path}/reg.db"
    argv = _import(url, "--agent", "claude-code", "--root", f"claude-code={claude}", "--watch", "--json")
    # An interval far longer than the test waits: only a file event can wake the second pass in time.
    command = [sys.executable, "-m", "registry.cli", *argv, "--interval", "600"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc, _Lines(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_watch_wakes_on_file_events_and_ctrl_c_exits_0(
    watcher: tuple[subprocess.Popen[str], _Lines], claude: Path
) -> None:
    proc, lines = watcher
    first = lines.wait_for(1, timeout=60)
    assert [json.loads(first[0])["agents"][0]["added"]] == [1]
    write_lines(session_file(claude), [prompt("2026-03-02T12:00:00Z", "live")], mode="a")
    second = lines.wait_for(2, timeout=60)
    assert len(second) == 2, "no pass after the file changed"
    assert json.loads(second[1])["agents"][0]["changed"] == 1
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
