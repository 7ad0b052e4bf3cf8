"""The lists the code declares, as the README and docs/ give them: checked against the code, not copied by hand.

A list in a page is marked ``<!-- list: NAME -->`...`, `...`<!-- /list -->``; the names in backticks between
the marks must be what the code says NAME is. The `_meta` keys and the commands are checked without marks: every
key the code writes is named in the pages and every key the pages name is in the code; the command-line page's
block runs every command there is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from registry.acp.methods import Role, capabilities, served
from registry.cli.commands import COMMANDS
from registry.cli.where import CREATES_STORE
from registry.model import IMPORTED_AGENTS

ROOT = Path(__file__).resolve().parents[1]
PAGES = {page: page.read_text(encoding="utf-8") for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]}
_MARKED = re.compile(r"<!-- list: ([\w ]+) -->(.*?)<!-- /list -->", re.DOTALL)


def _serve_initialize() -> dict[str, object]:
    """What a real ``acp-registry serve`` answers ``initialize`` with."""
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    out = subprocess.run(
        [sys.executable, "-m", "registry.cli", "serve", "--store", "memory://"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    (answer,) = [json.loads(line) for line in out.splitlines() if line.strip()]
    capabilities = answer["result"]["agentCapabilities"]
    return {"loadSession": capabilities["loadSession"], **capabilities["sessionCapabilities"]}


TRUTH: dict[str, Callable[[], set[str]]] = {
    "creating commands": lambda: set(CREATES_STORE),
    "proxy capabilities": lambda: set(
        capabilities("proxy", (Role.ANSWER, Role.FORWARD_OR_ANSWER))["sessionCapabilities"]
    ),
    "serve capabilities": lambda: set(_serve_initialize()),
    # session/update is the notification the agent sends while it answers session/load, not a method it serves
    "serve methods": lambda: {m.name for m in served("serve") if m.name.startswith("session/")} | {"session/update"},
    "imported agents": lambda: {f"{agent}:" for agent in IMPORTED_AGENTS},
}
LISTS = [(page, name, body) for page, text in PAGES.items() for name, body in _MARKED.findall(text) if name != "NAME"]


def test_every_list_the_code_declares_is_marked_where_the_pages_give_it() -> None:
    assert {name for _, name, _ in LISTS} == set(TRUTH)


@pytest.mark.parametrize(("page", "name", "body"), LISTS, ids=[f"{p.name}: {n}" for p, n, _ in LISTS])
def test_a_marked_list_says_what_the_code_says(page: Path, name: str, body: str) -> None:
    # `sessionCapabilities` `list` and `sessionCapabilities.list` both name the capability list
    named = {token.removeprefix("sessionCapabilities.") for token in re.findall(r"`([^`]+)`", body)}
    named.discard("sessionCapabilities")
    if name == "serve methods":
        named = {token for token in named if token.startswith("session/")}
    assert named == TRUTH[name](), f"{page.name}: {name}"


def _keys_in_code() -> set[str]:
    keys = set()
    for path in (ROOT / "registry").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        keys |= set(re.findall(r"\{META_NAMESPACE\}/(\w+)", text))
        keys |= set(re.findall(r"[\"']acp-session-registry/(\w+)[\"']", text))
    return keys


def test_the_pages_name_every_meta_key_the_code_writes_and_no_other() -> None:
    named = set()
    for text in PAGES.values():
        # the key, or its short form after the first mention (".../path", "…/path"); not the agents' cache folder
        named |= set(re.findall(r"(?:(?<![/\w.])acp-session-registry|\.\.\.|…)/(\w+)", text))
    assert named == _keys_in_code()


def test_the_command_line_page_runs_every_command() -> None:
    text = PAGES[ROOT / "docs" / "cli.md"]
    block = re.search(r"^```sh\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert block is not None
    run = set()
    for line in block.group(1).splitlines():
        words = line.split("  #")[0].split()
        while words[:1] in (["acp-registry"], ["--json"], ["--store"]):
            words = words[2:] if words[0] == "--store" else words[1:]
        if words:
            run.add(words[0])
    assert run == set(COMMANDS)
