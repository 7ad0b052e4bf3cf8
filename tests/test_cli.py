"""The ``acp-registry`` command as a whole, driven as a user drives it (a subprocess, its output and its exit
code): its store (the default, ``ACP_REGISTRY_STORE``, private folders made by a command that writes), help,
version and suggestions; the errors every command shares (a missing or empty store, bad URLs, bad arguments, each
one line and exit 2); the demo, and the commands other modules provide.

The commands that read a store are in ``test_cli_reads.py``; verify, export and import in ``test_cli_log.py``;
ids, tables, words and the session commands in ``test_cli_ids.py``, ``_tables``, ``_words`` and
``_session_surface``; the runner and the store they read in ``tests/cli_runner.py``.
"""

from __future__ import annotations

import io
import json
import sqlite3
import stat
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from registry.cli import main as cli_main
from tests.cli_runner import PAGE, Cli, Populated, one_error_line

# -- the store and the help ----------------------------------------------------------------------------


def test_help_names_the_default_store_and_every_command(run: Cli, tmp_path: Path) -> None:
    result = run("--help")
    assert result.returncode == 0
    assert f"sqlite://{tmp_path}/data/acp-registry/sessions.db" in result.stdout
    assert "ACP_REGISTRY_STORE" in result.stdout
    for command in ("list", "show", "history", "replay", "tail", "stats", "verify", "export", "import", "demo"):
        assert f"    {command} " in result.stdout
    assert "serve" in result.stdout and "import-agents" in result.stdout
    result = run("--help", env={"ACP_REGISTRY_STORE": "sqlite:///elsewhere/s.db"})
    assert "names sqlite:///elsewhere/s.db now" in result.stdout


def test_the_default_store_is_created_private_by_the_first_command_that_writes(run: Cli, tmp_path: Path) -> None:
    data = tmp_path / "data" / "acp-registry"
    listed = run("list", "--json")
    assert "no store yet at" in one_error_line(listed) and listed.stdout == ""
    assert not (tmp_path / "data").exists()  # a command that only reads creates nothing, not even the folder
    served = run("serve")  # stdin is empty: the agent starts, meets EOF and stops
    assert served.returncode == 0, served.stderr
    assert served.stderr == f"acp-registry: created a new store at {data / 'sessions.db'}\n"  # the one line
    assert (data / "sessions.db").is_file()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700 and stat.S_IMODE(data.parent.stat().st_mode) == 0o700
    result = run("list", "--json")
    assert (result.returncode, result.stdout, result.stderr) == (0, '{"sessions":[]}\n', "")


def test_acp_registry_store_overrides_the_default(run: Cli, populated: Populated) -> None:
    result = run("list", "--json", "--page-size", str(PAGE), env={"ACP_REGISTRY_STORE": populated.url})
    assert json.loads(result.stdout) == populated.final_pages[0]


def test_importing_the_cli_or_asking_for_help_loads_neither_rich_nor_a_command() -> None:
    code = (
        "import sys, contextlib, io, registry.cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    registry.cli.main(['--help'])\n"
        "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith(('registry.cli.', 'registry.importers'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    shared = [
        "registry.cli.commands",
        "registry.cli.errors",
        "registry.cli.start",
        "registry.cli.terminal",
        "registry.cli.where",
    ]  # (help's)
    assert result.stdout == f"{shared}\n"  # the shared pieces the start needs, and no command's module


def test_version_suggestions_and_json_before_the_command(run: Cli, populated: Populated) -> None:
    version, typo, far, before, after, export, serve, demo = run.all(
        ("--version",),
        ("lsit",),
        ("frobnicate",),
        ("--json", "list", "--page-size", str(PAGE)),
        ("list", "--json", "--page-size", str(PAGE)),
        ("--json", "export"),
        ("serve", "--help"),
        ("demo", "--json", "--help"),
        store=populated.path,
    )
    assert version.returncode == 0 and version.stdout.startswith("acp-registry 0.")
    assert "unknown command 'lsit'; did you mean 'list'?" in one_error_line(typo)
    assert "did you mean" not in one_error_line(far)
    assert json.loads(before.stdout) == json.loads(after.stdout) == populated.final_pages[0]
    assert export.returncode == 0 and len(export.stdout.splitlines()) == populated.head
    assert serve.returncode == 0 and demo.returncode == 0
    assert "--json" not in serve.stdout and "--json" in demo.stdout  # offered where it changes the output


@pytest.mark.parametrize("command", ["export", "serve", "proxy"])
def test_a_command_whose_output_is_json_anyway_offers_no_json_option(run: Cli, command: str) -> None:
    shown = run(command, "--help")
    assert shown.returncode == 0 and "--json" not in shown.stdout
    assert "unrecognized arguments: --json" in one_error_line(run(command, "--json", store="memory://", stdin=""))


# -- errors ----------------------------------------------------------------------------------------------


_READS = [  # tail waits for a store that is not there yet (test_cli_stores.py)
    ("list",),
    ("show", "s1"),
    ("history", "s1"),
    ("replay", "--at", "1"),
    ("stats",),
    ("verify",),
    ("export",),
]


def test_read_commands_do_not_create_a_missing_store(run: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for command, result in zip(_READS, run.all(*_READS, store=missing), strict=True):
        assert f"{missing}: no such store (the file does not exist" in one_error_line(result), command
    assert not missing.exists()


def test_read_commands_leave_an_empty_file_alone(run: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "truncated.db"
    empty.touch()
    commands = [*_READS, ("tail",)]  # an empty file that is there is refused, by tail too
    for command, result in zip(commands, run.all(*commands, store=empty), strict=True):
        assert f"{empty} is empty (0 bytes): not a registry store" in one_error_line(result), command
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["truncated.db"]  # no -wal, -shm or snapshot either


_BAD_URLS = [
    ("bogus://x", "unknown store URL scheme 'bogus'"),
    ("sqlite://relative.db", "needs an absolute path"),
    ("sqlite:relative.db", "must be an absolute file path"),
    ("sqlite://{tmp}/new/x.db?fast=yes", "unknown option 'fast'"),
    ("memory://somewhere", "take nothing after the scheme"),
    ("postgresql://127.0.0.1/test?schema=Bad-Name", "schema must be a lowercase SQL identifier"),
    ("postgresql://127.0.0.1:1/test", "cannot open the store"),  # nothing listens on port 1: unreachable
]
_EVERY_COMMAND = [
    *_READS,
    ("tail",),
    ("proxy", "--", "true"),
    ("import", "-"),
    ("serve",),
    ("demo", "--store", "{url}"),
    ("import-agents", "--agent", "codex"),
]


@pytest.mark.parametrize(("url", "message"), _BAD_URLS, ids=[url for url, _ in _BAD_URLS])
def test_every_bad_store_url_is_one_line_and_exit_2_on_every_command(
    url: str, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    for command in _EVERY_COMMAND:
        store = url.format(tmp=tmp_path)
        argv = [part.format(url=store) for part in command]
        code = cli_main(argv if command[0] == "demo" else ["--store", store, *argv])
        out, err = capsys.readouterr()
        assert code == 2, (command, out, err)
        assert out == "" and "Traceback" not in err, command
        if command in _READS and url.startswith("sqlite://{tmp}"):
            assert "no such store" in err, command  # a command that only reads looks for the file first
        elif command[0] == "demo" and url.startswith("memory:"):
            assert "use sqlite:// or postgresql://" in err  # refused before it is parsed: the demo needs sharing
        else:
            assert message in err, (command, err)
        assert len(err.splitlines()) == 1 and err.startswith("acp-registry"), (command, err)
    assert list(tmp_path.iterdir()) == []  # nothing was created anywhere


def test_bad_stores_and_arguments_are_one_line(run: Cli, populated: Populated, tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("my notes\n" * 100)
    (tmp_path / "a-file").write_text("")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    cases: list[tuple[str | Path, tuple[str, ...], str]] = [
        (notes, ("list",), "not an SQLite database"),
        (other, ("stats",), "not an acp-session-registry store"),
        ("foo://x", ("list",), "unknown store URL scheme"),
        ("sqlite://relative.db", ("list",), "needs an absolute path"),
        (tmp_path / "a-file" / "dir.db", ("import", "-"), "a file of that name exists"),
        (populated.path, ("list", "--cursor", "garbage!"), "invalid cursor (garbled)"),
        (populated.path, ("tail", "--from", "999"), "beyond the log's head"),
        (populated.path, ("tail", "--from", "x"), "is not a log position"),
        (populated.path, ("list", "--page-size", "0"), "not a page size from 1 to 1000"),
    ]
    processes = [run.start(*command, store=store) for store, command, _ in cases]
    for (_, command, message), process in zip(cases, processes, strict=True):
        assert message in one_error_line(run.finish(process)), command


# -- demo and the commands other modules provide ---------------------------------------------------------


def test_demo_shows_the_project(run: Cli) -> None:
    result = run("demo")  # how long it takes is measured, not asserted (docs/cli.md): a busy machine stretches it
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert '"title":null' in result.stdout and '"updatedAt":null' in result.stdout
    assert '"method":"session/update"' in result.stdout
    assert "each once" in result.stdout and "healthy" in result.stdout


def test_demo_json_writes_only_what_the_editor_receives(run: Cli) -> None:
    result = run("--json", "demo")
    assert result.returncode == 0 and result.stderr == ""
    messages = [json.loads(line) for line in result.stdout.splitlines()]
    assert {message["method"] for message in messages} == {
        "session/update",
        "_registry/session_added",
        "_registry/session_removed",
    }
    assert any(message["params"].get("update", {}).get("title", "") is None for message in messages)


def test_demo_on_a_kept_store_leaves_a_store_to_explore(run: Cli, tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    assert run("demo", "--store", f"sqlite://{store}").returncode == 0
    verified, again = run.all(("verify", "--json"), ("demo", "--store", f"sqlite://{store}"), store=store)
    assert json.loads(verified.stdout)["healthy"]
    assert "is not empty" in one_error_line(again)


def test_serve_and_import_agents_are_wired(run: Cli) -> None:
    importers = find_spec("registry.importers") is not None and find_spec("registry.cli.import_agents") is not None
    serve, agents = run.all(("serve", "--help"), ("import-agents", "--help"))
    assert serve.returncode == 0 and "--page-size" in serve.stdout
    if importers:
        assert agents.returncode == 0
    else:
        assert "import-agents is not available" in one_error_line(agents)
