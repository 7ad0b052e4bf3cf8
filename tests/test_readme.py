"""The README as a newcomer meets it: every block runs as written, never on the reader's own store.

Python blocks run twice each, in a fresh process with a temporary HOME and data directories. The first screen
runs after the recipe ``make demo`` would run (read from ``make --dry-run``, on a temporary demo folder). The
command-line block runs line by line under ``bash -e`` against a temporary store; ``tail``, which follows the
log until Ctrl-C, gets its Ctrl-C after two seconds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks(language: str) -> list[tuple[int, str]]:
    """Each block of ``language``: (its first line in the README, its text)."""
    return [
        (README.count("\n", 0, match.start()) + 1, match.group(2))
        for match in _BLOCK.finditer(README)
        if match.group(1) == language
    ]


def _section(heading: str) -> str:
    start = README.index(f"\n## {heading}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def _env(home: Path) -> dict[str, str]:
    """The reader's environment, with HOME, the XDG folders and the store variable pointing into ``home``."""
    env = {k: v for k, v in os.environ.items() if k != "ACP_REGISTRY_STORE" and not k.startswith("XDG_")}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        COLUMNS="120",
    )
    home.mkdir(parents=True, exist_ok=True)
    return env


PYTHON_BLOCKS = _blocks("python")


def test_the_readme_has_the_blocks_these_tests_run() -> None:
    assert len(PYTHON_BLOCKS) >= 4
    assert _blocks("sh") and _blocks("json")


@pytest.mark.parametrize(("line", "code"), PYTHON_BLOCKS, ids=[f"README.md:{line}" for line, _ in PYTHON_BLOCKS])
def test_every_python_block_runs_as_written_and_runs_again(line: int, code: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _env(home)
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    for attempt in ("first", "second"):
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, f"README.md:{line}, {attempt} run:\n{result.stderr}"
    assert not (home / ".local" / "share" / "acp-registry").exists()  # nothing went to the default store


def _first_screen() -> list[str]:
    (_, block), *_ = [(n, text) for n, text in _blocks("sh") if "make demo" in text]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_first_screen_gets_a_newcomer_to_acp_registry_list(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    alone = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # under make test
    recipe = subprocess.run(
        ["make", "--no-print-directory", "--dry-run", "--always-make", "demo", f"DEMO_DIR={demo}"],
        cwd=ROOT,
        env=alone,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    installs = [line for line in recipe if "pip install" in line]
    assert installs and all(line.endswith("-e .") for line in installs)  # only what the demo needs: no extra
    steps = recipe[recipe.index(next(line for line in recipe if line.startswith("rm "))) :]
    commands = _first_screen()
    assert commands[0] == "make demo" and commands[1] == ". .venv/bin/activate"
    assert commands[-1].startswith("acp-registry") and commands[-1].endswith(" list")
    # The demo folder the reader's $PWD/.demo is, here a temporary one; the activation is the checkout's own.
    rest = [command.replace("$PWD/.demo", str(demo)) for command in commands[1:]]
    script = "set -e\n" + "\n".join([*steps, *rest]) + "\n"
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "healthy" in result.stdout  # the demo ran to its end
    listing = result.stdout[result.stdout.rindex("sessions") - 3 :]
    assert "codex-3" in listing and "claude-4" in listing  # and `list` shows what its agents left behind


def test_the_command_line_block_runs_line_by_line(tmp_path: Path) -> None:
    (block,) = [text for _, text in _blocks("sh") if "acp-registry demo --store" in text]
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert all("/tmp/acp-demo/" in line for line in lines if "--store" in line or ">" in line)
    place = tmp_path / "acp-demo"
    script = ["set -e", f"mkdir -p {shlex.quote(str(place))}"]
    for line in lines:
        command = line.replace("/tmp/acp-demo/", f"{place}/")
        if command.startswith("acp-registry tail"):  # follows the log until Ctrl-C, which ends it with exit 0
            command = f"timeout --preserve-status -s INT 2 {command}"
        script.append(command)
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp_path,
        env=_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    again = json.loads(_last_json(result.stdout))
    assert again["imported"] == 0 and again["alreadyPresent"] == again["records"] > 0


def _last_json(out: str) -> str:
    """The one JSON object the block prints on a line of its own (the second import's summary)."""
    (line,) = [line for line in out.splitlines() if line.startswith('{"records"')]
    return line


def test_the_zed_snippet_is_valid_and_says_what_to_replace() -> None:
    (snippet,) = [json.loads(text) for _, text in _blocks("json")]
    agent = snippet["agent_servers"]["Session registry"]
    assert agent["args"][0] == "serve" and agent["command"].endswith("/acp-registry")
    store = agent["args"][agent["args"].index("--store") + 1]
    assert store.startswith("sqlite:///")  # absolute
    before = _section("The ACP agent: `acp-registry serve`")
    assert "Replace two parts: the `command`" in before and "the store in `args`" in before


def test_make_bench_and_make_demo_leave_git_status_clean() -> None:
    paths = ["benchmarks/results/quick.json", "benchmarks/results/quick.md", "benchmarks/results/quick-growth.png"]
    paths += [".demo/sessions.db", ".demo/sessions.db.snapshot"]
    result = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.stdout.split() == paths
    kept = subprocess.run(
        ["git", "check-ignore", "benchmarks/results/full.md"], cwd=ROOT, capture_output=True, check=False
    )
    assert kept.returncode == 1  # the published full run stays tracked
