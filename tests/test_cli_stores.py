"""Stores are not made by typos unseen: which commands create a store, that they say so in one line (naming the
folder they made for a named store), that an agent which cannot start leaves nothing behind, and that ``tail`` may
start before its store exists (``registry.cli.stores``)."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from events.urls import postgres_location, split_postgres_url
from registry import SessionRegistry
from registry.cli.commands import COMMANDS
from registry.cli.where import CREATES_STORE
from tests.cli_runner import Cli, one_error_line

# How each command that records is run for a moment: stdin is empty, so serve and the proxy meet EOF and stop.
_RECORDING = {
    "import": ("import", "-"),
    "import-agents": ("import-agents", "--agent", "codex"),
    "proxy": ("proxy", "--", sys.executable, "-m", "registry.cli", "serve", "--store", "memory://"),
    "serve": ("serve",),
}


def test_the_commands_that_record_are_the_ones_declared_and_exist() -> None:
    assert set(_RECORDING) == set(CREATES_STORE) and set(CREATES_STORE) <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(_RECORDING))
def test_a_command_that_records_creates_the_default_store_and_says_so_once(
    command: str, run: Cli, tmp_path: Path
) -> None:
    data = tmp_path / "data" / "acp-registry"
    first = run(*_RECORDING[command], env={"CODEX_HOME": str(tmp_path / "no-codex")}, stdin="")
    assert first.returncode == 0, first.stderr
    store = data / "sessions.db"
    said = [line for line in first.stderr.splitlines() if "created" in line]
    assert said == [f"acp-registry: created a new store at {store}"]
    assert stat.S_IMODE(data.stat().st_mode) == 0o700 and stat.S_IMODE(store.stat().st_mode) == 0o600
    again = run(*_RECORDING[command], env={"CODEX_HOME": str(tmp_path / "no-codex")}, stdin="")
    assert again.returncode == 0 and "created" not in again.stderr  # once: it is there now


@pytest.mark.parametrize("command", [*sorted(_RECORDING), "demo"])
def test_a_named_store_in_a_folder_that_does_not_exist_is_created_with_it_naming_the_folder(
    command: str, run: Cli, tmp_path: Path
) -> None:
    # docs/cli.md's first command names a store in /tmp/acp-demo/, which a fresh machine does not have.
    for how, env_named in (("option", False), ("variable", True)):  # named by --store, or by the variable
        store = tmp_path / how / "deeper" / "sessions.db"
        argv = ("demo", "--store", f"sqlite://{store}") if command == "demo" else _RECORDING[command]
        env = {"ACP_REGISTRY_STORE": f"sqlite://{store}"} if env_named else {}
        named = store if command != "demo" and not env_named else None
        result = run(*argv, store=named, env={**env, "CODEX_HOME": str(tmp_path / "no-codex")}, stdin="")
        assert result.returncode == 0, result.stderr
        said = [line for line in result.stderr.splitlines() if "created" in line]
        assert said == [f"acp-registry: created a new store at {store} and its folder {tmp_path / how}"], said
        assert stat.S_IMODE((tmp_path / how).stat().st_mode) == 0o700 and store.exists()
    assert not (tmp_path / "data").exists()  # not the default store


def test_a_store_whose_folder_cannot_be_made_is_refused_naming_it(run: Cli, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    store = tmp_path / "file" / "sessions.db"
    line = one_error_line(run("import", "-", store=store, stdin=""))
    assert f"cannot create the store's folder {tmp_path / 'file'}" in line, line


def test_a_named_store_in_a_folder_that_exists_is_created_and_said(run: Cli, tmp_path: Path) -> None:
    store = tmp_path / "sessions.db"
    made = run("import", "-", "--json", store=store, stdin="")
    assert json.loads(made.stdout) == {"records": 0, "imported": 0, "alreadyPresent": 0}
    assert made.stderr == f"acp-registry: created a new store at {store}\n"
    demo = tmp_path / "demo.db"
    shown = run("demo", "--store", f"sqlite://{demo}")
    assert shown.returncode == 0 and shown.stderr == f"acp-registry: created a new store at {demo}\n"


def test_a_proxy_whose_agent_cannot_start_leaves_no_store_behind(run: Cli, tmp_path: Path) -> None:
    store = tmp_path / "sessions.db"
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    for agent in ("no-such-command", str(tmp_path / "missing"), str(script), str(tmp_path)):
        for named in (store, None):  # a store named, and the default one (its folder too)
            result = run("proxy", "--", agent, store=named, stdin="")
            assert f"cannot start the agent {agent!r}" in one_error_line(result)
    assert sorted(os.listdir(tmp_path)) == ["not-executable"]


def test_tail_started_before_its_store_exists_waits_for_it_and_follows_it_from_the_start(
    run: Cli, tmp_path: Path
) -> None:
    store = tmp_path / "later.db"
    tail = run.start("tail", "--json", store=store)
    try:
        assert tail.stderr is not None and tail.stdout is not None
        said = tail.stderr.readline()
        assert said == f"acp-registry: no store at {store} yet: waiting for one (Ctrl-C stops)\n"
        assert not store.exists()  # waiting creates nothing
        with SessionRegistry.open(f"sqlite://{store}") as registry:
            registry.create("/work/app", session_id="s1", title="First")
        added = json.loads(tail.stdout.readline())  # blocks until it comes: the test's own timeout bounds it
        assert added["method"] == "_registry/session_added" and added["params"]["sessionId"] == "s1"
        assert added["params"]["position"] == 1
        tail.send_signal(signal.SIGINT)
        assert tail.wait(timeout=60) == 0
    finally:
        tail.kill()


def test_tail_says_a_mistyped_url_at_once_rather_than_waiting(run: Cli, tmp_path: Path) -> None:
    result = run("tail", store=f"sqlite://{tmp_path}/later.db?fast=yes")
    assert "unknown option 'fast'" in one_error_line(result)


def test_a_new_postgresql_store_is_said_too(run: Cli, postgres_schemas: Callable[[], str]) -> None:
    url = postgres_schemas()
    first, second = run("import", "-", store=url, stdin=""), run("import", "-", store=url, stdin="")
    assert first.returncode == 0, first.stderr
    conninfo, schema = split_postgres_url(url)
    shown = postgres_location(conninfo, schema)
    assert [line for line in first.stderr.splitlines() if "created" in line] == [
        f"acp-registry: created a new store at {shown}"
    ]
    assert second.returncode == 0 and "created" not in second.stderr
