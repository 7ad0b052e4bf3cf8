"""The ``acp-registry`` command, driven as a user drives it: a subprocess, its output and its exit code."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events import TitleSource, open_store
from events.codec import decode_record_json, encode_record_json
from registry import SessionRegistry
from registry.model import format_time
from registry.snapshot import read_snapshot, save_snapshot

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


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Populated:
    path = tmp_path_factory.mktemp("cli") / "log.db"
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


@pytest.fixture
def copy(populated: Populated, tmp_path: Path) -> Path:
    """A private copy of the populated store (with its snapshot), for tests that change it."""
    target = tmp_path / "copy.db"
    shutil.copy(populated.path, target)
    shutil.copy(f"{populated.path}.snapshot", f"{target}.snapshot")
    return target


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

    @staticmethod
    def finish(process: subprocess.Popen[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            out, err = process.communicate(stdin, timeout=60)
        finally:
            process.kill()
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.fixture
def run(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "data")


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("acp-registry")
    return lines[0]


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


def test_the_default_store_is_created_in_the_data_directory(run: Cli, tmp_path: Path) -> None:
    result = run("list", "--json")
    assert (result.returncode, result.stdout, result.stderr) == (0, '{"sessions":[]}\n', "")
    assert (tmp_path / "data" / "acp-registry" / "sessions.db").is_file()


def test_acp_registry_store_overrides_the_default(run: Cli, populated: Populated) -> None:
    result = run("list", "--json", "--page-size", str(PAGE), env={"ACP_REGISTRY_STORE": populated.url})
    assert json.loads(result.stdout) == populated.final_pages[0]


def test_importing_the_cli_loads_neither_rich_nor_a_command() -> None:
    code = "import sys, registry.cli; print(sorted(m for m in ('rich', 'registry.cli.browse') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "[]\n"


# -- list, show, history ---------------------------------------------------------------------------------


def test_list_json_is_the_exact_session_list_result(run: Cli, populated: Populated) -> None:
    first, second = populated.final_pages[:2]
    page, after, every, in_api = run.all(
        ("list", "--json", "--page-size", "2"),
        ("list", "--json", "--page-size", "2", "--cursor", first["nextCursor"]),
        ("list", "--all", "--json", "--page-size", "2"),
        ("list", "--json", "--cwd", "/work/api/"),
        store=populated.path,
    )
    assert json.loads(page.stdout) == first
    assert json.loads(after.stdout) == second
    assert json.loads(every.stdout) == [info for page in populated.final_pages for info in page["sessions"]]
    assert [info["sessionId"] for info in json.loads(in_api.stdout)["sessions"]] == ["s3", "s5"]


def test_list_shows_a_table_for_people(run: Cli, populated: Populated) -> None:
    result = run("list", store=populated.path)
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert "4 sessions" in lines[0]
    rows = [line for line in lines if line.startswith("│")]
    assert [row.split("│")[5].strip() for row in rows] == ["s3", "s5", "s1", "s4"]
    assert "(untitled)" in rows[2] and "Docs" in rows[3] and "(cleared)" in rows[3]


def test_show_prints_a_sessions_info(run: Cli, populated: Populated) -> None:
    as_json, table, deleted, unknown = run.all(
        ("show", "s3", "--json"), ("show", "s3"), ("show", "s2"), ("show", "nope"), store=populated.path
    )
    assert json.loads(as_json.stdout) == populated.shown
    assert "/work/api" in table.stdout and "messages" in table.stdout and "│ 4 " in table.stdout
    assert "'s2' was deleted at position" in _one_error_line(deleted)
    assert "no session 'nope'" in _one_error_line(unknown)


def test_history_lists_every_event_and_what_it_changed(run: Cli, populated: Populated) -> None:
    as_json, table, deleted, unknown = run.all(
        ("history", "s1", "--json"), ("history", "s1"), ("history", "s2"), ("history", "nope"), store=populated.path
    )
    records = [decode_record_json(line) for line in as_json.stdout.splitlines()]
    assert [r.version for r in records] == [1, 2, 3]
    assert all(r.session_id == "s1" for r in records)
    assert 'created in /work/app, title "Fix login" (user)' in table.stdout
    assert "+2 messages" in table.stdout and "title cleared" in table.stdout
    assert "s2: 3 events" in deleted.stdout and "deleted" in deleted.stdout  # deleted sessions have a history
    assert "no session 'nope'" in _one_error_line(unknown)


# -- replay ----------------------------------------------------------------------------------------------


def test_replay_in_the_middle_is_what_session_list_answered_then(run: Cli, populated: Populated) -> None:
    with open_store(populated.url) as store:
        (record,) = store.read(populated.middle - 1, 1)
    moment = format_time(record.recorded_at + 500_000_000)  # half a second later: before the next event
    middle = str(populated.middle)
    as_json, by_time, table = run.all(
        ("replay", "--at", middle, "--json", "--page-size", "2"),
        ("replay", "--at", moment, "--json"),
        ("replay", "--at", middle),
        store=populated.path,
    )
    result = json.loads(as_json.stdout)
    assert result["pages"] == populated.middle_pages  # the cursors too: exactly what the registry issued then
    assert (result["position"], result["head"], result["events"]) == (populated.middle, populated.head, 7)
    assert (result["sessionsCreated"], result["sessionsDeleted"], result["sessionsLive"]) == (4, 0, 4)
    at_moment = json.loads(by_time.stdout)
    assert at_moment["position"] == populated.middle
    assert at_moment["pages"][0]["sessions"] == [info for page in populated.middle_pages for info in page["sessions"]]
    assert f"as of position {populated.middle} of {populated.head}" in table.stdout
    assert "sessions created 4 · deleted 0 · live 4" in table.stdout


def test_replay_refuses_a_bad_point(run: Cli, populated: Populated) -> None:
    words, no_zone, beyond = run.all(
        ("replay", "--at", "yesterday"),
        ("replay", "--at", "2026-12-01T10:00:00"),
        ("replay", "--at", "999"),
        store=populated.path,
    )
    assert "not an RFC 3339 timestamp" in _one_error_line(words)
    assert "needs a time zone" in _one_error_line(no_zone)
    assert f"beyond the log's head ({populated.head})" in _one_error_line(beyond)


# -- tail ------------------------------------------------------------------------------------------------


def _lines(stream: Any) -> queue.SimpleQueue[str]:
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()

    def read() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_tail_follows_another_process_and_stops_cleanly_on_ctrl_c(run: Cli, copy: Path) -> None:
    with SessionRegistry.open(f"sqlite://{copy}") as registry:
        head = registry.position
    as_json = run.start("tail", "--json", "--from", str(head), store=copy)
    for_people = run.start("tail", "--from", str(head), store=copy)
    try:
        json_lines, people_lines = _lines(as_json.stdout), _lines(for_people.stdout)
        with SessionRegistry.open(f"sqlite://{copy}") as registry:  # this test process is the other process
            registry.change_info("s4", title=None)
            registry.create("/work/new", session_id="s6", title="New")
            registry.delete("s6")
        received = [json.loads(json_lines.get(timeout=20)) for _ in range(3)]
        shown = [people_lines.get(timeout=20).split() for _ in range(3)]
        for tail in (as_json, for_people):
            tail.send_signal(signal.SIGINT)
            assert tail.wait(timeout=20) == 0
            assert tail.stderr is not None and tail.stderr.read() == ""
    finally:
        as_json.kill()
        for_people.kill()
    assert received[0] == {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s4",
            "update": {
                "sessionUpdate": "session_info_update",
                "title": None,
                "_meta": {"acp-session-registry/messageCount": 0},
            },
        },
    }
    assert received[1]["method"] == "_registry/session_added"
    assert received[1]["params"]["sessionId"] == "s6" and received[1]["params"]["position"] == head + 2
    assert received[1]["params"]["session"]["title"] == "New"
    assert received[2] == {
        "jsonrpc": "2.0",
        "method": "_registry/session_removed",
        "params": {"sessionId": "s6", "position": head + 3},
    }
    assert shown[0][:6] == [f"#{head + 1}", "updated", "s4", "title", "null", "(cleared)"]
    assert shown[1] == [f"#{head + 2}", "added", "s6", "/work/new", '"New"']
    assert shown[2] == [f"#{head + 3}", "removed", "s6"]


# -- stats and verify ------------------------------------------------------------------------------------


def test_stats_counts_the_log(run: Cli, populated: Populated) -> None:
    as_json, table = run.all(("stats", "--json"), ("stats",), store=populated.path)
    stats = json.loads(as_json.stdout)
    assert stats["head"] == stats["events"] == populated.head
    assert stats["eventsByType"] == {
        "SessionCreated": 5,
        "SessionDeleted": 1,
        "SessionInfoChanged": 3,
        "SessionUpdated": 3,
    }
    assert (stats["sessionsLive"], stats["sessionsDeleted"]) == (4, 1)
    assert stats["cwds"] == [
        {"cwd": "/work/api", "live": 2, "deleted": 0},
        {"cwd": "/work/app", "live": 1, "deleted": 1},
        {"cwd": "/work/docs", "live": 1, "deleted": 0},
    ]
    wal = Path(f"{populated.path}-wal")
    assert stats["logBytes"] == populated.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    assert stats["snapshot"]["position"] == populated.head and stats["snapshot"]["behindHead"] == 0
    assert stats["snapshot"]["ageSeconds"] >= 0
    assert "4 live, 1 deleted" in table.stdout and "sessions per cwd" in table.stdout


def test_verify_reports_a_corrupt_record_with_its_position(run: Cli, copy: Path) -> None:
    healthy = run("verify", store=copy)
    assert healthy.returncode == 0 and "healthy" in healthy.stdout and "agrees with the log" in healthy.stdout
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE events SET data = x'c1ff00' WHERE position = 3")
    as_json, table, exported = run.all(("verify", "--json"), ("verify",), ("export",), store=copy)
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert not report["healthy"]
    assert [(p["position"], p["sessionId"]) for p in report["problems"]] == [(3, "s2")]
    assert "does not decode" in report["problems"][0]["problem"]
    assert table.returncode == 1 and "1 problem" in table.stdout and "does not decode" in table.stdout
    assert exported.returncode == 1 and "position 3" in exported.stderr  # a command that meets it stops
    assert len(exported.stdout.splitlines()) == 2  # with what came before it


def test_verify_reports_a_snapshot_that_disagrees_with_the_log(run: Cli, copy: Path) -> None:
    path = Path(f"{copy}.snapshot")
    snapshot = read_snapshot(path)
    snapshot.sessions = [s for s in snapshot.sessions if s.session_id != "s3"]
    save_snapshot(path, snapshot)
    result = run("verify", "--json", store=copy)
    assert result.returncode == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert (problem["position"], problem["sessionId"]) == (snapshot.position, "s3")
    assert "missing from the snapshot" in problem["problem"]


# -- export and import -----------------------------------------------------------------------------------


def _essence(jsonl: str) -> list[tuple[object, ...]]:
    """What an import keeps of each record (``recorded_at`` is the time of the import)."""
    records = [decode_record_json(line) for line in jsonl.splitlines()]
    return [(r.position, r.session_id, r.version, r.event_id, r.event) for r in records]


def _exported(populated: Populated) -> list[str]:
    with open_store(populated.url) as store:
        return [encode_record_json(record).decode() for record in store.read()]


def test_export_then_import_copies_the_log_and_a_second_import_is_harmless(
    run: Cli, populated: Populated, tmp_path: Path
) -> None:
    exported, tail = run.all(("export",), ("export", "--from", str(populated.middle)), store=populated.path)
    assert exported.returncode == 0 and exported.stdout.splitlines() == _exported(populated)
    assert _essence(tail.stdout) == _essence(exported.stdout)[populated.middle :]
    dump = tmp_path / "log.jsonl"
    dump.write_text(exported.stdout)
    target = tmp_path / "target.db"
    first = run("import", str(dump), store=target)
    assert first.returncode == 0
    assert f"imported {populated.head} events (0 already present)" in first.stdout
    again = run("import", str(dump), "--json", store=target)
    piped = run("import", "-", "--json", store=target, stdin=tail.stdout)
    copied, listing, original = map(
        run.finish,
        [
            run.start("export", store=target),
            run.start("list", "--all", "--json", store=target),
            run.start("list", "--all", "--json", store=populated.path),
        ],
    )
    assert json.loads(again.stdout) == {"records": populated.head, "imported": 0, "alreadyPresent": populated.head}
    assert json.loads(piped.stdout)["alreadyPresent"] == populated.head - populated.middle
    assert _essence(copied.stdout) == _essence(exported.stdout)  # same ids, versions, order and positions
    assert listing.stdout == original.stdout  # and so the same session/list


def test_a_bad_line_imports_nothing_and_names_its_line(run: Cli, populated: Populated, tmp_path: Path) -> None:
    lines = _exported(populated)
    bad, unordered = tmp_path / "bad.jsonl", tmp_path / "unordered.jsonl"
    bad.write_text("\n".join([lines[0], lines[1], '{"position": "three"}', lines[2]]) + "\n")
    unordered.write_text("\n".join([lines[1], lines[0]]) + "\n")
    target = tmp_path / "target.db"
    not_a_record, out_of_order, missing = run.all(
        ("import", str(bad)), ("import", str(unordered)), ("import", str(tmp_path / "nowhere.jsonl")), store=target
    )
    error = _one_error_line(not_a_record)
    assert f"{bad}:3: not a record of `acp-registry export`" in error and "nothing was imported" in error
    assert f"{unordered}:2: position 1 does not follow 2" in _one_error_line(out_of_order)
    assert "nowhere.jsonl: No such file or directory" in _one_error_line(missing)
    assert not target.exists()  # the file is checked before the store is opened


def test_an_import_the_store_refuses_keeps_what_came_before(run: Cli, populated: Populated, tmp_path: Path) -> None:
    lines = _exported(populated)
    dump = tmp_path / "log.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    target = tmp_path / "target.db"
    with SessionRegistry.open(f"sqlite://{target}") as registry:
        registry.create("/elsewhere", session_id="s3")  # another history for s3
    line = next(n for n, text in enumerate(lines, 1) if '"sessionId":"s3"' in text)
    error = _one_error_line(run("import", str(dump), store=target))
    assert f"{dump}:{line}: the store refused session 's3' version 1" in error
    assert f"{line - 1} events before it were imported" in error
    before = [decode_record_json(text).session_id for text in lines[: line - 1]]
    with open_store(f"sqlite://{target}") as store:
        assert [r.session_id for r in store.read()] == ["s3", *before]


# -- errors ----------------------------------------------------------------------------------------------


def test_read_commands_do_not_create_a_missing_store(run: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    commands = [
        ("list",),
        ("show", "s1"),
        ("history", "s1"),
        ("replay", "--at", "1"),
        ("tail",),
        ("stats",),
        ("verify",),
        ("export",),
    ]
    for command, result in zip(commands, run.all(*commands, store=missing), strict=True):
        assert f"{missing}: no such store (the file does not exist" in _one_error_line(result), command
    assert not missing.exists()


def test_bad_stores_and_arguments_are_one_line(run: Cli, populated: Populated, tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("my notes\n" * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    cases: list[tuple[str | Path, tuple[str, ...], str]] = [
        (notes, ("list",), "not an SQLite database"),
        (other, ("stats",), "not an acp-session-registry store"),
        ("foo://x", ("list",), "unknown store URL scheme"),
        ("sqlite://relative.db", ("list",), "needs an absolute path"),
        (tmp_path / "no" / "dir.db", ("import", "-"), "the directory"),
        (populated.path, ("list", "--cursor", "garbage!"), "invalid cursor (garbled)"),
        (populated.path, ("tail", "--from", "999"), "beyond the log's head"),
        (populated.path, ("tail", "--from", "x"), "is not a log position"),
        (populated.path, ("list", "--page-size", "0"), "not a page size from 1 to 1000"),
    ]
    processes = [run.start(*command, store=store) for store, command, _ in cases]
    for (_, command, message), process in zip(cases, processes, strict=True):
        assert message in _one_error_line(run.finish(process)), command


# -- demo and the commands other modules provide ---------------------------------------------------------


def test_demo_shows_the_project_in_under_ten_seconds(run: Cli) -> None:
    started = time.monotonic()
    result = run("demo")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 10
    assert result.stderr == ""
    assert '"title":null' in result.stdout and '"updatedAt":null' in result.stdout
    assert '"method":"session/update"' in result.stdout
    assert "each once" in result.stdout and "healthy" in result.stdout


def test_demo_on_a_kept_store_leaves_a_store_to_explore(run: Cli, tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    assert run("demo", "--store", f"sqlite://{store}").returncode == 0
    verified, again = run.all(("verify", "--json"), ("demo", "--store", f"sqlite://{store}"), store=store)
    assert json.loads(verified.stdout)["healthy"]
    assert "is not empty" in _one_error_line(again)


def test_serve_and_import_agents_are_wired(run: Cli) -> None:
    importers = find_spec("registry.importers") is not None and find_spec("registry.cli.import_agents") is not None
    serve, agents = run.all(("serve", "--help"), ("import-agents", "--help"))
    assert serve.returncode == 0 and "--page-size" in serve.stdout
    if importers:
        assert agents.returncode == 0
    else:
        assert "import-agents is not available" in _one_error_line(agents)
