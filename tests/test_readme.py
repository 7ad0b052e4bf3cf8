"""The README and the docs/ pages as a newcomer meets them: every code block runs as written, never on the
reader's own store, and every link leads somewhere.

Every fenced block with a language is claimed by exactly one runner (``RUNNERS``), so a block nobody runs fails
the suite. Python blocks run twice each, in a fresh process with a temporary HOME and data directories. The first
screen runs after the recipe ``make demo`` would run (read from ``make --dry-run``, on a temporary demo folder),
then the proxy try-out is pasted into the proxy line by line and its answer compared with the one shown. The
command-line block runs line by line under ``bash -e`` against a temporary store; ``tail``, which follows the log
until Ctrl-C, gets its Ctrl-C after two seconds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXTS = {page: page.read_text(encoding="utf-8") for page in PAGES}
README = TEXTS[ROOT / "README.md"]
BIN = Path(sys.executable).parent
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


class Block(NamedTuple):
    page: Path
    line: int
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


BLOCKS = [
    Block(page, text.count("\n", 0, match.start()) + 1, match.group(1), match.group(2))
    for page, text in TEXTS.items()
    for match in _BLOCK.finditer(text)
]


def _blocks(language: str) -> list[tuple[int, str]]:
    """Each block of ``language`` in the README and docs/: (its first line in its page, its text)."""
    return [(block.line, block.text) for block in BLOCKS if block.language == language]


def _claimed(runner: str) -> list[Block]:
    return [block for block in BLOCKS if RUNNERS[runner](block)]


def _section(page: str, heading: str) -> str:
    text = TEXTS[ROOT / page]
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _lines(block: str) -> list[str]:
    """A shell block's commands, without their comments (a line that is only a comment is none)."""
    return [
        line.split("  #")[0].strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")
    ]


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


RUNNERS: dict[str, Callable[[Block], bool]] = {
    # each: which blocks the runner of that name runs (the test named after it, here or in the file it names)
    "python": lambda b: b.language == "python",
    "first screen": lambda b: b.language == "sh" and "make demo" in b.text,
    "try-out lines": lambda b: b.language == "jsonl",
    "try-out answer": lambda b: b.language == "text" and b.text.startswith('{"id":3'),
    "floor plan": lambda b: b.language == "text" and b.text.startswith("events/"),
    "make targets": lambda b: b.language == "sh" and all(line.startswith("make ") for line in _lines(b.text)),
    "command line": lambda b: b.language == "sh" and "acp-registry demo --store" in b.text,
    "import-agents lines (test_cli_words.py)": lambda b: (
        b.language == "sh" and b.text.startswith("acp-registry import-agents")
    ),
    "serve in Zed": lambda b: b.language == "json" and '"serve"' in b.text,
    "price file (test_cli_usage.py)": lambda b: b.language == "toml" and "[models." in b.text,
    "proxy in Zed (test_real_agents_readme.py)": lambda b: b.language == "jsonc" and '"proxy"' in b.text,
    "chain in Zed (test_real_agents_readme.py)": lambda b: b.language == "jsonc" and "conductor_chain.mjs" in b.text,
    "chain set up (test_real_agents_readme.py, make test-agents)": lambda b: (
        b.language == "sh" and "conductor_chain.mjs" in b.text
    ),
}


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where for block in BLOCKS])
def test_every_code_block_is_run_by_one_runner(block: Block) -> None:
    if not block.language:
        return  # a drawing (a data flow, the error tree), not code
    runners = [name for name, claims in RUNNERS.items() if claims(block)]
    assert len(runners) == 1, f"{block.where}: a {block.language} block run by {runners or 'no test'}"


PYTHON_BLOCKS = _claimed("python")


def test_the_pages_have_the_blocks_these_tests_run() -> None:
    assert len(PYTHON_BLOCKS) >= 6
    for name in RUNNERS:
        assert _claimed(name), name


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[block.where for block in PYTHON_BLOCKS])
def test_every_python_block_runs_as_written_and_runs_again(block: Block, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _env(home)
    script = tmp_path / "block.py"
    script.write_text(block.text, encoding="utf-8")
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
        assert result.returncode == 0, f"{block.where}, {attempt} run:\n{result.stderr}"
    assert not (home / ".local" / "share" / "acp-registry").exists()  # nothing went to the default store


def _demo_recipe(demo: Path) -> list[str]:
    alone = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # under make test
    recipe = subprocess.run(
        ["make", "--no-print-directory", "--dry-run", "--always-make", "demo", f"DEMO_DIR={demo}"],
        cwd=ROOT,
        env=alone,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    installs = [line for line in recipe if " -e " in line]  # the package's own installs (uv's install is not one)
    assert installs and all(line.endswith("-e .") for line in installs)  # only what the demo needs: no extra
    return recipe[recipe.index(next(line for line in recipe if line.startswith("rm "))) :]


class _Client:
    """The reader at the stdin of a command line that speaks ACP: one line at a time, each answered before the next
    is pasted."""

    def __init__(self, line: str, *, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["bash", "-c", line],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def send(self, line: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = json.loads(line)
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        while True:
            answer = self.process.stdout.readline()
            assert answer, "the proxy ended before it answered"
            message = json.loads(answer)
            if message.get("id") == request["id"] and "method" not in message:
                assert "result" in message, message
                return dict(message)


def test_the_first_screen_gets_a_newcomer_through_the_proxy_to_acp_registry_list(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    commands = _lines(_claimed("first screen")[0].text)
    assert commands[0] == "make demo" and commands[1] == ". .venv/bin/activate"
    proxy_line, list_line = commands[2], commands[3]
    assert proxy_line.startswith("acp-registry proxy --") and list_line == "acp-registry list"
    env = _env(tmp_path / "home")
    script = "set -e\n" + "\n".join([*_demo_recipe(demo), commands[1]]) + "\n"
    made = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert made.returncode == 0, made.stderr
    assert "healthy" in made.stdout  # the demo ran to its end

    (lines,) = [_lines(block.text) for block in _claimed("try-out lines")]
    (shown,) = [json.loads(block.text) for block in _claimed("try-out answer")]
    client = _Client(f". .venv/bin/activate && exec {proxy_line}", cwd=ROOT, env=env)
    process = client.process
    try:
        answers = [client.send(lines[0]), client.send(lines[1])]
        session = answers[1]["result"]["sessionId"]
        answers += [client.send(line.replace("SESSION_ID", session)) for line in lines[2:]]
    finally:
        _, stderr = process.communicate(timeout=60)  # the reader's Ctrl-D
    assert process.returncode == 0, stderr
    capabilities = answers[0]["result"]["agentCapabilities"]["sessionCapabilities"]
    assert {"list", "delete", "title", "archive", "status"} <= set(capabilities)
    listed = answers[-1]
    (row,) = listed["result"]["sessions"]
    # What differs from run to run: the id, the time, and whether the agent's past was read yet.
    shown["result"]["sessions"][0].update(sessionId=session, updatedAt=row["updatedAt"])
    shown["result"]["_meta"]["acp-session-registry/proxy"]["history"] = listed["result"]["_meta"][
        "acp-session-registry/proxy"
    ]["history"]
    assert listed == shown
    store = tmp_path / "home" / ".local" / "share" / "acp-registry" / "sessions.db"
    assert f"created a new store at {store}" in stderr  # the first time, one line says so

    def run(line: str) -> str:
        done = subprocess.run(
            ["bash", "-c", f". .venv/bin/activate && {line}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, (line, done.stderr)
        return done.stdout

    after = run(list_line)
    assert "Fix the login bug" in after and f"acp-session-registry:{session}" in after
    search_line, transcript_line, usage_line = commands[4:7]
    assert search_line.startswith("acp-registry search ") and transcript_line.startswith("acp-registry transcript ")
    assert usage_line == "acp-registry usage"

    found = run(search_line)  # the words of the prompt pasted above, as the proxy recorded them
    assert found.startswith(f"{session}  acp-session-registry") and "**login** **bug**" in found, found
    said = run(transcript_line.replace("SESSION_ID", session))
    assert "Fix the login bug" in said, said
    assert run(usage_line).startswith("usage by day: 0 days, all days (UTC), every agent and cwd\nno usage recorded")


def test_the_make_targets_the_pages_name_exist() -> None:
    alone = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    named = {line.split()[1] for block in _claimed("make targets") for line in _lines(block.text)}
    assert {"test", "agents", "bench"} <= named
    for target in sorted(named):
        found = subprocess.run(
            ["make", "--dry-run", target], cwd=ROOT, env=alone, capture_output=True, text=True, check=False
        )
        assert found.returncode == 0, (target, found.stderr)


def test_the_floor_plan_names_every_room_there_is() -> None:
    (plan,) = [block.text for block in _claimed("floor plan")]
    rooms = [line.split()[0] for line in plan.splitlines()]
    for room in rooms:
        assert (ROOT / room).is_dir(), room
    packages = {f"{path.parent.relative_to(ROOT)}/" for path in ROOT.glob("*/__init__.py")}
    packages |= {f"{path.parent.relative_to(ROOT)}/" for path in ROOT.glob("registry/*/__init__.py")}
    assert packages <= set(rooms), packages - set(rooms)


def test_the_command_line_block_runs_line_by_line(tmp_path: Path) -> None:
    (block,) = [block.text for block in _claimed("command line")]
    lines = _lines(block)
    assert all("/tmp/acp-demo/" in line for line in lines if "--store sqlite" in line or ">" in line)
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


def test_the_zed_snippet_for_serve_is_valid_and_says_what_to_replace() -> None:
    (snippet,) = [json.loads(block.text) for block in _claimed("serve in Zed")]
    agent = snippet["agent_servers"]["Session registry"]
    assert agent["args"][0] == "serve" and agent["command"].endswith("/acp-registry")
    store = agent["args"][agent["args"].index("--store") + 1]
    assert store.startswith("sqlite:///")  # absolute
    before = _section("docs/embedding.md", "The ACP agent: `acp-registry serve`")
    assert "Replace two parts: the `command`" in before and "the store in `args`" in before


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_link_leads_to_a_page_and_a_heading_there(page: Path) -> None:
    for target in _LINK.findall(_BLOCK.sub("", TEXTS[page])):
        if re.match(r"[a-z]+:", target):
            continue  # another site
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in _anchors(linked.read_text(encoding="utf-8")), f"{page.name}: {target}"


def test_make_bench_and_make_demo_leave_git_status_clean() -> None:
    paths = ["benchmarks/results/quick.json", "benchmarks/results/quick.md", "benchmarks/results/quick-growth.png"]
    paths += [".demo/sessions.db", ".demo/sessions.db.snapshot"]
    result = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.stdout.split() == paths
    kept = subprocess.run(
        ["git", "check-ignore", "benchmarks/results/full.md"], cwd=ROOT, capture_output=True, check=False
    )
    assert kept.returncode == 1  # the published full run stays tracked
