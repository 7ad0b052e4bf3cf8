"""What the command line says to a newcomer: help without phantom arguments, a watch that says what it watches,
messages in the user's terms, and the README's import-agents lines running as written on a fresh machine."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from events import SessionCreated, open_store
from events.store import AppendRequest
from tests.cli_runner import Cli, one_error_line
from tests.importing import prompt, session_file, write_lines
from tests.test_readme import _blocks, _env
from tests.waiting import catches_signal, wait_until


def test_demo_help_shows_no_phantom_positional(run: Cli) -> None:
    result = run("demo", "--help")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "usage: acp-registry demo [-h] [--json] [--store URL]"
    assert "\n  URL " not in result.stdout  # the shared --store, redefined by demo, once showed as a positional


def test_a_missing_postgresql_schema_is_said_in_the_users_terms(run: Cli, postgres_schemas: Callable[[], str]) -> None:
    line = one_error_line(run("list", store=postgres_schemas()))
    assert "no store in schema" in line and "opened only to read" in line
    assert "create=False" not in line  # a keyword argument of the library, not something a CLI user typed


def test_import_agents_watch_says_what_it_watches_and_how_it_stops(run: Cli, tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    write_lines(session_file(claude), [prompt("2026-03-02T09:00:00Z", "hello")])
    controller, terminal = pty.openpty()
    agents = ["--agent", "claude-code", "--agent", "codex", "--root", f"claude-code={claude}", "--watch"]
    process = subprocess.Popen(
        [sys.executable, "-m", "registry.cli", "--store", f"sqlite://{tmp_path}/reg.db", "import-agents", *agents],
        stdout=subprocess.PIPE,
        stderr=terminal,
        env={**run.env, "HOME": str(tmp_path / "home")},
    )
    os.close(terminal)
    said = b""
    deadline = time.monotonic() + 20
    with contextlib.suppress(OSError):
        while b"Ctrl-C stops" not in said and time.monotonic() < deadline:
            if select.select([controller], [], [], 0.5)[0]:  # never block: a watch that says nothing must fail
                said += os.read(controller, 4096)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=30)
    os.close(controller)
    text = said.decode()
    assert f"watching claude-code ({claude}) for changes" in text, text
    assert "looking for codex every 2 s" in text and "(Ctrl-C stops)" in text
    assert process.returncode == 0 and b"claude-code" in out  # the summary on stdout, the words on the terminal


def test_the_readmes_import_agents_lines_run_as_written_on_a_fresh_machine(tmp_path: Path) -> None:
    (block,) = [text for _, text in _blocks("sh") if text.startswith("acp-registry import-agents")]
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    env = _env(tmp_path / "home")
    assert len(lines) == 3
    for line in lines:
        process = subprocess.Popen(["bash", "-c", f"exec {line}"], env=env, stdout=subprocess.PIPE, text=True)
        first = ""
        if "--watch" in line:
            first = _first_line(process)  # its first pass is over: it watches now
            process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0, (line, first + out)


def _first_line(process: subprocess.Popen[str], timeout: float = 60) -> str:
    """The first line the process writes on stdout (its readiness), waited for with a bound."""
    out = process.stdout
    assert out is not None
    wait_until(lambda: select.select([out], [], [], 0)[0], timeout, "the command's first line on stdout")
    return out.readline()


_SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def _until_stopped(args: list[str], env: dict[str, str], name: str, moment: str) -> tuple[int, str]:
    """Runs ``acp-registry ARGS``, sends it the signal ``name`` at ``moment`` - "at start", as soon as its ``main``
    runs (it has taken SIGTERM: it has yet to parse its arguments), or "working", after its first line on stdout -
    and returns its exit code and stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "registry.cli", *args],
        env=env,
        stdin=subprocess.PIPE,  # serve's input: open, so that only the signal ends it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if moment == "at start":
            wait_until(lambda: catches_signal(process.pid, signal.SIGTERM), 60, "the command's main to run")
        else:
            _first_line(process)
        process.send_signal(_SIGNALS[name])
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    return process.returncode, err


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("moment", ["at start", "working"])
def test_a_watch_stopped_at_any_moment_exits_0(run: Cli, tmp_path: Path, name: str, moment: str) -> None:
    args = ["--store", f"sqlite://{tmp_path}/reg.db", "import-agents", "--agent", "claude-code", "--watch"]
    code, err = _until_stopped(args, {**run.env, "HOME": str(tmp_path / "home")}, name, moment)
    assert code == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["tail", "serve"])
def test_tail_and_serve_stopped_while_they_start_exit_0(run: Cli, tmp_path: Path, name: str, command: str) -> None:
    code, err = _until_stopped(["--store", f"sqlite://{tmp_path}/reg.db", command], run.env, name, "at start")
    assert code == 0 and "Traceback" not in err, err


def test_ctrl_c_stops_any_other_command_with_130_and_no_traceback(run: Cli, tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "registry.cli", "--store", f"sqlite://{tmp_path}/reg.db", "import", "-"],
        env=run.env,
        stdin=subprocess.PIPE,  # import reads its records from it: open and empty, it waits
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: _spooling(process.pid), 60, "import to spool its standard input")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130 and "Traceback" not in err, err


_MASK_WHILE_MSGSPEC_LOADS = """
import json, signal, sys
assert "msgspec" not in sys.modules
masks = []

class Probe:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "msgspec":
            masks.append(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))

sys.meta_path.insert(0, Probe)
from registry.cli.start import import_msgspec
import_msgspec()
now = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
print(json.dumps([masks, now, "msgspec" in sys.modules]))
"""


def test_ctrl_c_and_sigterm_wait_while_msgspec_loads() -> None:
    """msgspec's module set-up does not survive an exception raised inside it: a Ctrl-C there left it half made, and
    the process's next decoder crashed it (SIGSEGV; seen on SIGTERM to ``tail`` at its start). The start holds both
    signals while msgspec loads, and only then."""
    done = subprocess.run([sys.executable, "-c", _MASK_WHILE_MSGSPEC_LOADS], capture_output=True, text=True, check=True)
    masks, after, loaded = json.loads(done.stdout)
    assert loaded and masks and all({signal.SIGINT, signal.SIGTERM} <= set(mask) for mask in masks), done.stdout
    assert signal.SIGINT not in after and signal.SIGTERM not in after


def _spooling(pid: int) -> bool:
    """Whether the process holds an unlinked temporary file open (``import -`` spools its input to one)."""
    try:
        fds = [fd for fd in Path(f"/proc/{pid}/fd").iterdir() if int(fd.name) > 2]  # not stdout, a pytest capture
        return any("(deleted)" in os.readlink(fd) for fd in fds)
    except OSError:
        return False


@pytest.mark.slow
def test_a_slow_first_open_says_what_it_waits_for_on_a_terminal(run: Cli, tmp_path: Path) -> None:
    # A store written straight to its log (as import and import-agents do): its read model is built at first open,
    # which takes seconds at 60,000 sessions: the terminal is told once an open takes longer than half a second.
    path = tmp_path / "cold.db"
    with open_store(f"sqlite://{path}?synchronous=off") as store:
        for start in range(0, 60_000, 5_000):
            ids = range(start, start + 5_000)
            store.append_batch(
                [AppendRequest(f"s{n}", [SessionCreated(cwd=f"/w/{n % 50}", at=10**18 + n)]) for n in ids]
            )
    result, shown = run.on_terminal("list", "--json", store=f"sqlite://{path}", columns=120, timeout=120)
    assert b"bringing the read model up to the log (60,000 events" in shown, shown
    assert len(json.loads(result.stdout)["sessions"]) == 50  # stdout holds only the answer


def test_an_agent_filter_that_names_no_known_agent_suggests_the_nearest(run: Cli, tmp_path: Path) -> None:
    store = tmp_path / "reg.db"
    assert run("import", "-", store=store, stdin="").returncode == 0
    mistyped = run("list", "--agent", "codx", store=store)
    assert mistyped.returncode == 0 and "0 sessions of codx" in mistyped.stdout  # the answer stays an empty list
    assert mistyped.stderr == "acp-registry: no agent the registry knows is named 'codx'; did you mean 'codex'?\n"
    unlike = run("list", "--agent", "zzz", "--json", store=store)
    assert unlike.returncode == 0 and json.loads(unlike.stdout) == {"sessions": []}
    assert "'zzz'; the agents known by name: claude-code, codex, gemini" in unlike.stderr
    named = run("list", "--agent", "codex-acp", store=store)  # a name codex goes by: known, nothing to suggest
    assert named.returncode == 0 and named.stderr == ""
