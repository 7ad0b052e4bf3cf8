"""The ``acp-registry`` command, driven as a user drives it: a subprocess, its output and its exit code."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import queue
import select
import signal
import sqlite3
import stat
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

from events import SessionCreated, TitleSource, open_store
from events.codec import decode_record_json, encode_record_json
from registry import SessionRegistry
from registry.cli import main as cli_main
from registry.model import format_time

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
    """A private copy of the populated store (its read model is in the file), for tests that change it."""
    target = tmp_path / "copy.db"
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # private, as the store makes its files
    with sqlite3.connect(populated.path) as source, sqlite3.connect(target) as copied:
        source.backup(copied)  # the log and the read model as one consistent file, WAL included
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


def test_the_default_store_is_created_private_by_the_first_command_that_writes(run: Cli, tmp_path: Path) -> None:
    data = tmp_path / "data" / "acp-registry"
    listed = run("list", "--json")
    assert "no store yet at" in _one_error_line(listed) and listed.stdout == ""
    assert not (tmp_path / "data").exists()  # a command that only reads creates nothing, not even the folder
    served = run("serve")  # stdin is empty: the agent starts, meets EOF and stops
    assert served.returncode == 0, served.stderr
    assert (data / "sessions.db").is_file()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700 and stat.S_IMODE(data.parent.stat().st_mode) == 0o700
    result = run("list", "--json")
    assert (result.returncode, result.stdout, result.stderr) == (0, '{"sessions":[]}\n', "")


def test_a_command_that_writes_creates_a_named_stores_folders_private(run: Cli, tmp_path: Path) -> None:
    store = tmp_path / "new" / "deeper" / "sessions.db"
    result = run("import", "-", "--json", store=store, stdin="")
    assert json.loads(result.stdout) == {"records": 0, "imported": 0, "alreadyPresent": 0}
    assert store.is_file()
    for folder in (store.parent, store.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


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
    assert result.stdout == "['registry.cli.errors', 'registry.cli.stores']\n"


def test_version_suggestions_and_json_before_the_command(run: Cli, populated: Populated) -> None:
    version, typo, far, before, after, export, serve, demo = run.all(
        ("--version",),
        ("lsit",),
        ("frobnicate",),
        ("--json", "list", "--page-size", str(PAGE)),
        ("list", "--json", "--page-size", str(PAGE)),
        ("--json", "export"),
        ("serve", "--json", "--help"),
        ("demo", "--json", "--help"),
        store=populated.path,
    )
    assert version.returncode == 0 and version.stdout.startswith("acp-registry 0.")
    assert "unknown command 'lsit'; did you mean 'list'?" in _one_error_line(typo)
    assert "did you mean" not in _one_error_line(far)
    assert json.loads(before.stdout) == json.loads(after.stdout) == populated.final_pages[0]
    assert export.returncode == 0 and len(export.stdout.splitlines()) == populated.head
    assert serve.returncode == 0 and demo.returncode == 0


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
    result, page, in_api = run.all(
        ("list",),
        ("list", "--page-size", "2"),
        ("list", "--page-size", "1", "--cwd", "/work/api"),
        store=populated.path,
    )
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert "4 sessions" in lines[0]
    # A page says how many there are in all (the read model's count), in a cwd too.
    assert page.stdout.splitlines()[0].strip() == "2 of 4 sessions"
    assert in_api.stdout.splitlines()[0].strip() == "1 of 2 sessions in /work/api"
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
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["version"] for r in records] == [1, 2, 3]
    assert all(r["sessionId"] == "s1" for r in records)
    # Times as show gives them (RFC 3339), not export's epoch nanoseconds.
    with open_store(populated.url, create=False) as store:
        stored = store.read_stream("s1")
    assert [r["recordedAt"] for r in records] == [format_time(r.recorded_at) for r in stored]
    created = stored[0].event
    assert isinstance(created, SessionCreated)
    assert records[0]["event"]["at"] == format_time(created.at)  # the event's own time too
    assert 'created in /work/app, title "Fix login" (user)' in table.stdout
    assert "+2 messages" in table.stdout and "title cleared" in table.stdout
    assert "s2: 3 events" in deleted.stdout and "deleted" in deleted.stdout  # deleted sessions have a history
    assert "no session 'nope'" in _one_error_line(unknown)


def test_control_characters_are_escaped_for_people_and_exact_in_json(run: Cli, tmp_path: Path) -> None:
    store = tmp_path / "evil.db"
    title = "\x1b]0;owned\x07\x1b[2Jlogin"
    evil = "evil\u202egnp.exe"  # ids may not hold controls (the store refuses them), but a bidi override passes
    with SessionRegistry.open(f"sqlite://{store}") as registry:
        registry.create("/work/\x1b[31mred", session_id=evil, title=title, meta={"k": "\x9b"})
    people = run.all(("list",), ("show", evil), ("history", evil), ("stats",), store=store)  # tail: test_cli_tables
    for result in people:
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout and "\x9b" not in result.stdout
        assert "\u202e" not in result.stdout
    assert all(result.returncode == 0 for result in people)
    assert "\\x1b]0;owned\\x07\\x1b[2Jlogin" in people[0].stdout and "evil\\u202egnp.exe" in people[0].stdout
    assert "/work/\\x1b[31mred" in people[3].stdout
    as_json = json.loads(run("show", evil, "--json", store=store).stdout)
    assert (as_json["sessionId"], as_json["title"], as_json["_meta"]["k"]) == (evil, title, "\x9b")
    unknown = run("show", "nope\x1b[2J", store=store)
    assert "\x1b" not in unknown.stderr and "nope\\x1b[2J" in _one_error_line(unknown)


# -- replay ----------------------------------------------------------------------------------------------


def test_replay_in_the_middle_is_what_session_list_answered_then(run: Cli, populated: Populated) -> None:
    with open_store(populated.url) as store:
        (record,) = store.read(populated.middle - 1, 1)
    moment = format_time(record.recorded_at + 500_000_000)  # half a second later: before the next event
    middle = str(populated.middle)
    as_json, first, by_time, table = run.all(
        ("replay", "--at", middle, "--json", "--page-size", "2", "--all"),
        ("replay", "--at", middle, "--json", "--page-size", "2"),
        ("replay", "--at", moment, "--json"),
        ("replay", "--at", middle),
        store=populated.path,
    )
    result = json.loads(as_json.stdout)
    assert result["pages"] == populated.middle_pages  # the cursors too: exactly what the registry issued then
    assert json.loads(first.stdout) == {**result, "pages": populated.middle_pages[:1]}  # like list: one page
    assert (result["position"], result["head"], result["events"]) == (populated.middle, populated.head, 7)
    assert (result["sessionsCreated"], result["sessionsDeleted"], result["sessionsLive"]) == (4, 0, 4)
    at_moment = json.loads(by_time.stdout)
    assert at_moment["position"] == populated.middle
    assert at_moment["pages"][0]["sessions"] == [info for page in populated.middle_pages for info in page["sessions"]]
    assert f"as of position {populated.middle} of {populated.head}" in table.stdout
    assert "sessions created 4 · deleted 0 · live 4" in table.stdout


def test_replay_shows_the_first_page_and_all_writes_every_page(run: Cli, populated: Populated) -> None:
    head = str(populated.head)
    first, every = run.all(
        ("replay", "--at", head, "--page-size", "1"),
        ("replay", "--at", head, "--page-size", "1", "--all"),
        store=populated.path,
    )
    ids = [[info["sessionId"] for info in page["sessions"]] for page in populated.final_pages]
    order = [session for page in ids for session in page]
    assert "page 1: sessions 1 to 1" in first.stdout and "page 2" not in first.stdout
    assert "more sessions follow: --all shows every page" in first.stdout
    assert [n for n, session in enumerate(order, 1) if f" {session} " in first.stdout] == [1]
    for number, session in enumerate(order, start=1):  # one table a page, written as it is cut, in list order
        assert f"page {number}: sessions {number} to {number}" in every.stdout
        assert every.stdout.index(f"page {number}:") < every.stdout.index(f" {session} ")
    assert "more sessions follow" not in every.stdout


def test_replay_shows_a_progress_bar_on_a_terminal_while_it_folds(run: Cli, populated: Populated) -> None:
    result, shown = run.on_terminal("replay", "--at", str(populated.middle), store=populated.url)
    assert b"replaying the log" in shown and f"0/{populated.middle}".encode() in shown
    assert b"replaying" not in result.stdout  # piped output holds only the answer


def test_replay_refuses_a_bad_point(run: Cli, populated: Populated) -> None:
    words, no_zone, beyond, negative = run.all(
        ("replay", "--at", "yesterday"),
        ("replay", "--at", "2026-12-01T10:00:00"),
        ("replay", "--at", "999"),
        ("replay", "--at", "-1"),
        store=populated.path,
    )
    assert "not an RFC 3339 timestamp" in _one_error_line(words)
    assert "--at -1: not a log position (positions are integers >= 0)" in _one_error_line(negative)
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
    assert stats["readModel"]["kind"] == "tables"
    assert stats["readModel"]["checkpoint"] == populated.head and stats["readModel"]["behindHead"] == 0
    assert "4 live, 1 deleted" in table.stdout and "sessions per cwd" in table.stdout


def test_verify_reports_a_corrupt_record_with_its_position(run: Cli, copy: Path) -> None:
    healthy = run("verify", store=copy)
    assert (
        healthy.returncode == 0 and "healthy" in healthy.stdout and "agrees with the fold of the log" in healthy.stdout
    )
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


def test_verify_reports_a_read_model_that_disagrees_with_the_log(run: Cli, copy: Path) -> None:
    with sqlite3.connect(copy) as db:  # a derived row changed behind the fold's back
        db.execute("DELETE FROM rm_sessions WHERE session_id = 's3'")
    result = run("verify", "--json", store=copy)
    assert result.returncode == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["sessionId"] == "s3" and "rm_sessions lacks the session's row" in problem["problem"]
    assert run("rebuild", store=copy).returncode == 0
    assert run("verify", store=copy).returncode == 0


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


_READS = [
    ("list",),
    ("show", "s1"),
    ("history", "s1"),
    ("replay", "--at", "1"),
    ("tail",),
    ("stats",),
    ("verify",),
    ("export",),
]


def test_read_commands_do_not_create_a_missing_store(run: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for command, result in zip(_READS, run.all(*_READS, store=missing), strict=True):
        assert f"{missing}: no such store (the file does not exist" in _one_error_line(result), command
    assert not missing.exists()


def test_read_commands_leave_an_empty_file_alone(run: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "truncated.db"
    empty.touch()
    for command, result in zip(_READS, run.all(*_READS, store=empty), strict=True):
        assert f"{empty} is empty (0 bytes): not a registry store" in _one_error_line(result), command
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
    assert "is not empty" in _one_error_line(again)


def test_serve_and_import_agents_are_wired(run: Cli) -> None:
    importers = find_spec("registry.importers") is not None and find_spec("registry.cli.import_agents") is not None
    serve, agents = run.all(("serve", "--help"), ("import-agents", "--help"))
    assert serve.returncode == 0 and "--page-size" in serve.stdout
    if importers:
        assert agents.returncode == 0
    else:
        assert "import-agents is not available" in _one_error_line(agents)
