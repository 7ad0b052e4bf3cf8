"""An older version of the library, taken from this clone's history, for tests that run it beside this one."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from events.store import EventStore
from events.testing_content import turn
from events.verify import verify_log

__all__ = ["BEFORE_CONTENT", "OLD_WRITER", "checkout", "fenced_after_upgrade", "old_writer"]

REPO = Path(__file__).resolve().parent.parent
BEFORE_CONTENT = "e20322d31ade7a9e6c844da81846a58683f97c86"
"""The last commit before conversations (SQLite format 3, PostgreSQL 4): what a still-running older writer is."""

OLD_WRITER = """
import sys
from events import SessionUpdated, open_store
store = open_store(sys.argv[1])
print(store.append("old", [SessionUpdated(at=1)])[0], flush=True)
sys.stdin.readline()  # the newer version upgrades the store meanwhile
try:
    store.append("old", [SessionUpdated(at=2)])
    print("appended", flush=True)
except Exception as exc:
    print(type(exc).__name__, str(exc).replace(chr(10), " "), flush=True)
"""
"""A writer that appends, waits for a line on stdin, appends again and prints what happened (``PYTHONPATH``: the
older package)."""


def checkout(commit: str, into: Path) -> Path:
    """The ``events`` package as ``commit`` had it (from this clone's history) under ``into``, or a skip saying why
    it cannot be had."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and this project's history to run an older commit")
    done = subprocess.run(["git", "-C", str(REPO), "archive", commit, "events"], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"commit {commit[:8]} is not in this clone's history ({done.stderr.decode().strip()})")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(into, filter="data")
    return into


def fenced_after_upgrade(store: EventStore, child: subprocess.Popen[str]) -> None:
    """This version writes a message to ``store`` (just upgraded under the old writer ``child``, which waits for a
    line to append again): the old writer's append is refused, naming the upgrade, and the log stays whole."""
    assert child.stdin is not None and child.stdout is not None
    event, messages = turn("kept beside the log")
    store.append("new", [event], content=[messages])
    child.stdin.write("\n")
    child.stdin.flush()
    answer = child.stdout.readline()
    child.wait(timeout=60)
    assert answer.startswith("StoreError") and "upgraded by a newer acp-session-registry" in answer, answer
    assert [r.session_id for r in store.read()] == ["old", "new"]
    assert verify_log(store).healthy


def old_writer(url: str, folder: Path) -> subprocess.Popen[str]:
    """``OLD_WRITER`` of the commit before conversations, on the store ``url`` names, once it has appended."""
    old = checkout(BEFORE_CONTENT, folder / "old")
    child = subprocess.Popen(
        [sys.executable, "-c", OLD_WRITER, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(old)},
        cwd=folder,
    )
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "1", child.stderr.read() if child.stderr else ""
    return child
