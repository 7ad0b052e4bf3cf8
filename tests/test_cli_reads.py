"""The ``acp-registry`` commands that read a store, driven as a user drives them: ``list``, ``show`` and
``history`` (exact JSON, tables for people, control characters escaped), ``replay`` (the list as it was at a point
of the log), ``tail`` (following another process) and ``stats``; all against the story ``populated`` holds
(``tests/cli_runner.py``).
"""

from __future__ import annotations

import json
import queue
import signal
import threading
from pathlib import Path
from typing import Any

from events import SessionCreated, open_store
from registry import SessionRegistry
from registry.model import format_time
from tests.cli_runner import Cli, Populated, one_error_line

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
    assert "'s2' was deleted at position" in one_error_line(deleted)
    assert "no session 'nope'" in one_error_line(unknown)


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
    assert "no session 'nope'" in one_error_line(unknown)


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
    assert "\x1b" not in unknown.stderr and "nope\\x1b[2J" in one_error_line(unknown)


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
    assert "not an RFC 3339 timestamp" in one_error_line(words)
    assert "--at -1: not a log position (positions are integers >= 0)" in one_error_line(negative)
    assert "needs a time zone" in one_error_line(no_zone)
    assert f"beyond the log's head ({populated.head})" in one_error_line(beyond)


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


# -- stats -----------------------------------------------------------------------------------------------


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
