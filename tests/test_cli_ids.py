"""The ids a user pastes into ``show`` and ``history``: the agent's own id, unique prefixes (as git takes them), and a
suggestion when the id is ambiguous or absent (``registry.cli.ids``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry import SessionRegistry
from tests.cli_runner import Cli, one_error_line

CLAUDE = "6b1d2c3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
CLAUDE_TWIN = "6b1d9f00-0000-4000-8000-000000000001"  # shares the first four characters
CODEX = "0199a7e2-5c1d-7e3f-9a0b-1c2d3e4f5a6b"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ids") / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        registry.create("/work/app", session_id=f"claude-code:{CLAUDE}", title="Orders page")
        registry.create("/work/app", session_id=f"claude-code:{CLAUDE_TWIN}", title="Twin")
        registry.create("/work/api", session_id=f"codex:{CODEX}", title="Retry policy")
        registry.delete(f"codex:{CODEX}")
        registry.create("/work/api", session_id="6b1dxyz-serve-made", title="Made by serve")
    return path


def test_show_takes_the_agents_own_id_and_unique_prefixes(run: Cli, store: Path) -> None:
    own, prefix, stored_prefix, exact = run.all(
        ("show", CLAUDE, "--json"),
        ("show", CLAUDE[:8], "--json"),
        ("show", f"claude-code:{CLAUDE[:6]}", "--json"),
        ("show", "6b1dxyz-serve-made", "--json"),
        store=store,
    )
    for result in (own, prefix, stored_prefix):
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["sessionId"] == f"claude-code:{CLAUDE}"
    assert json.loads(exact.stdout)["title"] == "Made by serve"


def test_history_takes_them_too_deleted_sessions_included(run: Cli, store: Path) -> None:
    own, prefix = run.all(("history", CODEX), ("history", CODEX[:9], "--json"), store=store)
    assert own.returncode == 0 and f"codex:{CODEX}: 2 events" in own.stdout.replace("\n", " ")
    assert [json.loads(line)["sessionId"] for line in prefix.stdout.splitlines()] == [f"codex:{CODEX}"] * 2


def test_an_ambiguous_or_unknown_id_says_which_sessions_are_near(run: Cli, store: Path) -> None:
    ambiguous, typo, nothing, short, short_alone = run.all(
        ("show", "6b1d"),
        ("show", CLAUDE[:-1] + "f"),  # one character off
        ("history", "zzzzzzzz"),
        ("show", "6b1"),  # shorter than a prefix may be
        ("show", "01a"),  # as short, and no id starts so
        store=store,
    )
    line = one_error_line(ambiguous)
    assert "'6b1d' is ambiguous: 3 sessions match" in line
    assert f"claude-code:{CLAUDE}" in line and f"claude-code:{CLAUDE_TWIN}" in line and "6b1dxyz-serve-made" in line
    assert f"did you mean claude-code:{CLAUDE}?" in one_error_line(typo)
    assert "no session 'zzzzzzzz' in this store (acp-registry list shows the sessions)" in one_error_line(nothing)
    assert (
        "no session '6b1' in this store, and a prefix needs at least 4 characters of the id (3 start with '6b1')"
        in one_error_line(short)
    )
    assert "'01a' in this store, and a prefix needs at least 4 characters" in one_error_line(short_alone)


def test_list_of_one_agent_says_first_n_when_more_follow(run: Cli, store: Path) -> None:
    # The read model counts by cwd and archived, not by agent: a page of one agent's sessions says only "first N".
    page, every = run.all(
        ("list", "--agent", "claude-code", "--page-size", "1"), ("list", "--agent", "claude-code"), store=store
    )
    assert page.stdout.splitlines()[0].strip() == "first 1 session of claude-code"
    assert every.stdout.splitlines()[0].strip() == "2 sessions of claude-code"


@pytest.mark.parametrize(
    "spelling",
    [
        CLAUDE.upper(),
        "{" + CLAUDE + "}",
        "urn:uuid:" + CLAUDE,
        CLAUDE.replace("-", ""),
        f"claude-code:{CLAUDE.upper()}",
    ],
)
def test_show_takes_any_spelling_of_a_uuid(run: Cli, store: Path, spelling: str) -> None:
    """A UUID is one id however it is written (upper case, braces, ``urn:uuid:``, no hyphens)."""
    result = run("show", spelling, "--json", store=store)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sessionId"] == f"claude-code:{CLAUDE}"
