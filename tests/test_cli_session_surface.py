"""``acp-registry archive`` / ``unarchive`` / ``title`` / ``fork``, ``list --archived/--agent``, and ``show`` /
``history`` naming a fork's parent and forks: real processes on a real SQLite file, as a user sees them."""

from __future__ import annotations

import json
from pathlib import Path

from registry import SessionRegistry
from tests.cli_runner import Cli


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        registry.create("/w", session_id="a", title="First", at=1_000_000_000)
        registry.record_activity("a", messages=2, payload={"turn": 1}, at=2_000_000_000)
        registry.create("/w", session_id="codex:b", title="Second", at=3_000_000_000)
        registry.create("/w/x", session_id="c", agent="goose", at=4_000_000_000)
    return path


def _ids(run: Cli, path: Path, *args: str) -> list[str]:
    result = run("list", "--all", "--json", *args, store=path)
    assert result.returncode == 0, result.stderr
    return [info["sessionId"] for info in json.loads(result.stdout)]


def test_archive_unarchive_and_the_list_filters(run: Cli, tmp_path: Path) -> None:
    path = _store(tmp_path)
    for name in ("codex:b", "b"):  # idempotent; the agent's own id names the session too
        archived = run("archive", name, store=path)
        assert archived.returncode == 0 and archived.stdout.strip() == "codex:b: archived", archived
    assert _ids(run, path) == ["c", "a"]
    assert _ids(run, path, "--archived", "only") == ["codex:b"]
    assert _ids(run, path, "--archived", "include") == ["c", "codex:b", "a"]
    assert _ids(run, path, "--agent", "codex", "--archived", "include") == ["codex:b"]
    for known in ("codex-acp", "@zed-industries/codex-acp"):  # the names users know the agent by
        assert _ids(run, path, "--agent", known, "--archived", "include") == ["codex:b"]
    assert _ids(run, path, "--agent", "goose") == ["c"]
    table = run("list", "--archived", "include", store=path, env={"COLUMNS": "160"})
    assert "Second [archived]" in table.stdout and "(untitled) [goose]" in table.stdout
    assert "3 sessions (archived ones included)" in table.stdout
    shown = run("unarchive", "codex:b", "--json", store=path)
    assert shown.returncode == 0 and "archived" not in json.loads(shown.stdout)
    assert _ids(run, path) == ["c", "codex:b", "a"]
    bad = run("list", "--archived", "all", store=path)
    assert bad.returncode == 2 and "invalid choice: 'all'" in bad.stderr
    missing = run("archive", "nope", store=path)
    assert missing.returncode == 2 and "no session 'nope' in this store" in missing.stderr


def test_title_sets_a_user_title_and_refuses_a_blank_one(run: Cli, tmp_path: Path) -> None:
    path = _store(tmp_path)
    result = run("title", "a", "  A better title ", "--json", store=path)
    assert result.returncode == 0 and json.loads(result.stdout) == {"title": "A better title"}
    blank = run("title", "a", "   ", store=path)
    assert blank.returncode == 2 and "title must not be empty or blank" in blank.stderr
    shown = json.loads(run("show", "a", "--json", store=path).stdout)
    assert shown["title"] == "A better title"
    assert shown["_meta"]["acp-session-registry/titleSource"] == "user"


def test_fork_show_and_history_name_the_parent_and_the_forks(run: Cli, tmp_path: Path) -> None:
    path = _store(tmp_path)
    forked = run("fork", "a", "--id", "a-fork", "--json", store=path)
    assert forked.returncode == 0, forked.stderr
    info = json.loads(forked.stdout)
    assert (info["sessionId"], info["cwd"], info["title"]) == ("a-fork", "/w", "First")
    parent = info["_meta"]["acp-session-registry/parent"]
    assert parent["sessionId"] == "a"
    with SessionRegistry.open(f"sqlite://{path}", create=False) as registry:
        assert [e.payload for e in registry.activity("a-fork")] == [{"turn": 1}]
    history = run("history", "a-fork", store=path, env={"COLUMNS": "200"})
    assert f"forked from a as of position {parent['position']}" in history.stdout
    source = run("show", "a", store=path, env={"COLUMNS": "160"})
    assert f"a-fork (as of {parent['position']})" in source.stdout
    fork = run("show", "a-fork", store=path, env={"COLUMNS": "160"})
    assert f"a as of position {parent['position']}" in fork.stdout
    unknown = run("fork", "nope", "--cwd", "/w", store=path)
    assert unknown.returncode == 2 and "no session 'nope'" in unknown.stderr
    late = run("fork", "a", "--at", "999", "--cwd", "/w", store=path)
    assert late.returncode == 2 and "past the log's head" in late.stderr
    taken = run("fork", "a", "--id", "c", store=path)  # an id the user gave that is taken: an input error, as above
    assert taken.returncode == 2 and taken.stderr == "acp-registry: session 'c' exists already\n", taken.stderr


def test_export_import_verify_and_replay_understand_the_new_events(run: Cli, tmp_path: Path) -> None:
    path = _store(tmp_path)
    assert run("archive", "codex:b", store=path).returncode == 0
    assert run("fork", "a", "--id", "a-fork", store=path).returncode == 0
    assert run("unarchive", "codex:b", store=path).returncode == 0
    assert run("archive", "c", store=path).returncode == 0
    exported = run("export", store=path)
    assert exported.returncode == 0
    types = [json.loads(line)["event"]["type"] for line in exported.stdout.splitlines()]
    assert {"archived", "unarchived"} <= set(types)
    dump = tmp_path / "log.jsonl"
    dump.write_text(exported.stdout)
    target = tmp_path / "target.db"
    assert run("import", str(dump), store=target).returncode == 0
    for store in (path, target):
        verified = run("verify", store=store)
        assert verified.returncode == 0, verified.stdout + verified.stderr
    for args in (("--archived", "include"), ("--archived", "only"), ("--agent", "goose", "--archived", "include")):
        assert _ids(run, target, *args) == _ids(run, path, *args)
    with SessionRegistry.open(f"sqlite://{target}", create=False) as registry:
        state = registry.state("a-fork")
        assert state is not None and state.parent is not None and state.parent.session_id == "a"
        assert [e.payload for e in registry.activity("a-fork")] == [{"turn": 1}]
    # Time travel: as of the position before the last archive, c was listed.
    head = int(json.loads(run("stats", "--json", store=path).stdout)["head"])
    then = run("replay", "--at", str(head - 1), "--json", "--all", store=path)
    assert then.returncode == 0, then.stderr
    listed = [info["sessionId"] for page in json.loads(then.stdout)["pages"] for info in page["sessions"]]
    assert "c" in listed
    now = run("replay", "--at", str(head), "--json", "--all", store=path)
    assert "c" not in [info["sessionId"] for page in json.loads(now.stdout)["pages"] for info in page["sessions"]]
