"""What the command-line tests share: ``Cli`` runs ``acp-registry`` as a user does (a subprocess, its output and
exit code; on a terminal too), ``one_error_line`` holds a failure to its one line, and ``populate`` writes the
small story the read-only commands are checked against (``Populated`` says what it holds). The fixtures that give
them to a test (``run``, ``populated``, ``copy``) are in ``conftest.py``."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from events import TitleSource
from registry import SessionRegistry

START = 1_796_000_000_000_000_000  # 2026-11-30T00:53:20Z
PAGE = 2


class _Clock:
    """One second per reading: every event gets a distinct, known time."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        self.now += 1_000_000_000
        return self.now


@dataclass
class Populated:
    path: Path
    middle: int
    """A log position halfway through the story."""
    middle_pages: list[dict[str, Any]]
    """``session/list`` pages of PAGE sessions, walked at ``middle``."""
    final_pages: list[dict[str, Any]]
    head: int
    shown: dict[str, Any]
    """``session/list``'s view of s3 at the end."""

    @property
    def url(self) -> str:
        return f"sqlite://{self.path}"


def _walk(registry: SessionRegistry) -> list[dict[str, Any]]:
    """Every ``session/list`` page, as a client walks them."""
    pages = [registry.handle("session/list", {})]
    while "nextCursor" in pages[-1]:
        pages.append(registry.handle("session/list", {"cursor": pages[-1]["nextCursor"]}))
    return pages


def populate(path: Path) -> Populated:
    """Five sessions in three cwds, one event a second; by the end s2 is deleted and s1's title and s4's time are
    cleared."""
    with SessionRegistry.open(f"sqlite://{path}", clock=_Clock(), page_size=PAGE) as registry:
        registry.create("/work/app", session_id="s1", title="Fix login")
        registry.record_activity("s1", messages=2)
        registry.create("/work/app", session_id="s2")
        registry.change_info("s2", title="Add tests", title_source=TitleSource.AGENT)
        registry.create("/work/api", session_id="s3")
        registry.record_activity("s3", messages=3)
        registry.create("/work/docs", session_id="s4", title="Docs")
        middle, middle_pages = registry.position, _walk(registry)
        registry.create("/work/api", session_id="s5")
        registry.change_info("s1", title=None)
        registry.delete("s2")
        registry.record_activity("s3", messages=1)
        registry.change_info("s4", updated_at=None)
        populated = Populated(
            path, middle, middle_pages, _walk(registry), registry.position, msgspec.to_builtins(registry.get("s3"))
        )
    return populated


class Cli:
    """Runs ``acp-registry`` with its default store under a temporary folder (never the user's own)."""

    def __init__(self, data: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if k != "ACP_REGISTRY_STORE"}
        self.env["XDG_DATA_HOME"] = str(data)

    def start(
        self, *args: str, store: str | Path | None = None, env: dict[str, str] | None = None, stdin: bool = False
    ) -> subprocess.Popen[str]:
        prefix = [] if store is None else ["--store", store if isinstance(store, str) else f"sqlite://{store}"]
        return subprocess.Popen(
            [sys.executable, "-m", "registry.cli", *prefix, *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **(env or {})},
        )

    def __call__(
        self, *args: str, store: str | Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.finish(self.start(*args, store=store, env=env, stdin=stdin is not None), stdin)

    def all(
        self, *commands: tuple[str, ...], store: str | Path | None = None
    ) -> list[subprocess.CompletedProcess[str]]:
        """Several commands at once (each is a process of its own: running them side by side saves time)."""
        return [self.finish(process) for process in [self.start(*command, store=store) for command in commands]]

    def on_terminal(
        self, *args: str, store: str, columns: int = 100, timeout: float = 60
    ) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
        """Runs a command with its stderr on a terminal (a pty) and stdout piped: what it answered, and what the
        terminal showed (progress bars and messages meant for a person)."""
        controller, terminal = pty.openpty()
        try:
            result = subprocess.run(
                [sys.executable, "-m", "registry.cli", "--store", store, *args],
                stdout=subprocess.PIPE,
                stderr=terminal,
                env={**self.env, "COLUMNS": str(columns)},
                timeout=timeout,
                check=True,
            )
        finally:
            os.close(terminal)
        shown = b""
        with contextlib.suppress(OSError):  # the terminal's other end is closed once everything is read
            while select.select([controller], [], [], 1)[0] and (chunk := os.read(controller, 65536)):
                shown += chunk
        os.close(controller)
        return result, shown

    @staticmethod
    def finish(process: subprocess.Popen[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            out, err = process.communicate(stdin, timeout=60)
        finally:
            process.kill()
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("acp-registry")
    return lines[0]
