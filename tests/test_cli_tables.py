"""The CLI's tables as a terminal shows them: recorded by rich at 80, 120 and 200 columns."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from events.model import RecordedEvent, SessionCreated, SessionDeleted, SessionInfoChanged, SessionUpdated
from registry.cli.grid import breaks
from registry.cli.session_tables import HistoryTable, SessionTable
from registry.cli.tables import SessionsTable
from registry.cli.terminal import cells, printable
from registry.cli.views import change_text
from registry.diffs import Added
from registry.model import SessionInfo, SessionState, session_info
from tests.cli_runner import Cli

WIDTHS = (80, 120, 200)
AT = 1_796_000_000_000_000_000
EVIL_TITLE = "\x1b]0;owned\x07\x1b[2JFix\u202etxt.exe\x9b1m"


def _render(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def _state(session_id: str, cwd: str, title: str | None) -> SessionState:
    return SessionState(session_id, cwd, (), title, None, AT, None, 0, AT, 1, position=1)


def _headers(text: str) -> list[str]:
    """The header cells of the first table in ``text`` (the line between ┃ rules)."""
    header = next(line for line in text.splitlines() if line.startswith("┃"))
    return [cell.strip() for cell in header.strip("┃").split("┃")]


def _sessions(count: int, make_id: object) -> list[SessionInfo]:
    assert callable(make_id)
    return [
        SessionInfo(
            session_id=make_id(number),
            cwd=f"/home/me/projects/service-{number}/backend",
            title=f"Fix the login redirect when the token expires ({number})",
            updated_at=f"2026-12-0{1 + number % 9}T10:00:00.123Z",
            meta={"acp-session-registry/messageCount": number * 3},
        )
        for number in range(count)
    ]


_ID_KINDS = {
    "short": lambda n: f"s{n}",
    "uuid (serve)": lambda n: str(uuid.UUID(int=n * 7919 + 1)),
    "claude-code:<uuid>": lambda n: f"claude-code:{uuid.UUID(int=n * 7919 + 1)}",
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", list(_ID_KINDS))
def test_session_ids_are_whole_and_nothing_is_squeezed_to_nothing(width: int, kind: str) -> None:
    sessions = _sessions(9, _ID_KINDS[kind])
    text = _render(SessionsTable([sessions[:5], sessions[5:]], title="9 sessions"), width)
    lines = text.splitlines()
    assert max(map(len, lines)) <= width
    for info in sessions:  # every id on one line, whole: it can be copied into `show`
        assert any(info.session_id in re.split(r"[│ ]+", line) for line in lines), (info.session_id, text)
    assert all(len(header) > 1 for header in _headers(text)), _headers(text)  # no one-letter columns
    assert len(lines) <= 4 * len(sessions) + 6  # before: 9 sessions took 167 lines at 80 columns
    if width != 120:  # at 120 a row may fold a title over two lines; at 80 each gets a line of its own
        assert all(info.title in text for info in sessions if isinstance(info.title, str))
    updated = "2026-12-02 10:00:00"
    assert updated in text  # people's time: to the second, no T and Z


def test_the_layout_chosen_at_each_width() -> None:
    long = _sessions(3, _ID_KINDS["claude-code:<uuid>"])
    assert _headers(_render(SessionsTable([long]), 80)) == ["session id · title · cwd", "updated (UTC)"]
    assert _headers(_render(SessionsTable([long]), 200)) == ["updated (UTC)", "messages", "title", "cwd", "session id"]
    short = _sessions(3, _ID_KINDS["short"])
    assert _headers(_render(SessionsTable([short]), 120))[-1] == "session id"  # short ids: one row a session
    huge = [SessionInfo(session_id="gemini:" + "x" * 300, cwd="/w")]  # longer than any line: folded, never cut
    text = _render(SessionsTable([huge]), 80)
    assert _headers(text) == ["session id · title · cwd · updated (UTC)"]
    assert "x" * 300 in "".join(line.strip("│ ") for line in text.splitlines())


def test_control_characters_are_escaped_in_every_table_and_line() -> None:
    evil = SessionInfo(session_id="id\x1b[1m", cwd="/tmp/\x1b[2J", title=EVIL_TITLE, meta={"k": "\x1b\x7f"})
    state = _state(evil.session_id, evil.cwd, EVIL_TITLE)
    records = [
        RecordedEvent(1, evil.session_id, 1, uuid.uuid4(), AT, SessionCreated(cwd=evil.cwd, at=AT, title=EVIL_TITLE)),
        RecordedEvent(2, evil.session_id, 2, uuid.uuid4(), AT, SessionInfoChanged(meta={"k": "\x9b\u2028"})),
        RecordedEvent(3, evil.session_id, 3, uuid.uuid4(), AT, SessionDeleted(reason="gone\x1b[A")),
    ]
    shown = [
        *(_render(SessionsTable([[evil]]), width) for width in WIDTHS),
        _render(SessionTable(evil, state), 80),
        *(_render(HistoryTable(evil.session_id, records), width) for width in WIDTHS),
        change_text(Added(5, evil.session_id, evil)),
    ]
    for text in shown:
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u202e]", text), repr(text)
    assert "\\x1b]0;owned\\x07\\x1b[2JFix\\u202etxt.exe\\x9b1m" in shown[2]  # readable, and whole at 200
    assert printable("tab\tnew\nline é ✓ \\") == "tab\\tnew\\nline é ✓ \\"  # ordinary text stays as it is


AGENT_ID = "6b1d2c3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
META = {
    "acp-session-registry/agent": "claude-code",
    "acp-session-registry/agentSessionId": AGENT_ID,
    "acp-session-registry/path": "/home/me/.claude/projects/-home-me-app/6b1d2c3e.jsonl",
}


def _kv_lines(text: str) -> list[str]:
    """The text's lines without table borders, stripped."""
    return [line.strip("│ ").rsplit("│", 1)[-1].strip() for line in text.splitlines()]


@pytest.mark.parametrize("width", WIDTHS)
def test_history_shows_meta_as_key_value_lines_never_cut_mid_token(width: int) -> None:
    records = [
        RecordedEvent(1, "codex:1", 1, uuid.uuid4(), AT, SessionCreated(cwd="/w", at=AT, meta=META)),
        RecordedEvent(2, "codex:1", 2, uuid.uuid4(), AT + 10**9, SessionUpdated(at=AT + 10**9, messages=2)),
        RecordedEvent(3, "codex:1", 3, uuid.uuid4(), AT + 2 * 10**9, SessionInfoChanged(meta={"gitBranch": "main"})),
    ]
    text = _render(HistoryTable("codex:1", records), width)
    assert max(map(len, text.splitlines())) <= width
    lines = _kv_lines(text)
    # Before: `_meta` was one compact JSON folded 16 lines deep per event at 80 columns, cut inside keys and values.
    for key, value in META.items():
        assert f'{key}: "{value}"' in lines or (key + ":" in lines and f'"{value}"' in lines), (key, text)
    assert 'gitBranch: "main"' in lines
    assert "+2 messages" in text and "_meta set" in text
    if width >= 200:
        assert _headers(text) == ["position", "version", "recorded (UTC)", "event", "what it changed"]
    else:  # one block an event, at the full width: the path would not fit the table's column at 120
        assert "#1  v1  2026-11-30 00:53:20  SessionCreated" in text


def test_show_gives_meta_key_value_lines_at_80_columns() -> None:
    state = _state("claude-code:" + AGENT_ID, "/w", "T")
    info = SessionInfo(session_id=state.session_id, cwd="/w", title="T", meta=META)
    lines = _kv_lines(_render(SessionTable(info, state), 80))
    for key, value in META.items():  # the key, and its value whole on the line below when both do not fit
        assert f'{key}: "{value}"' in lines or (key + ":" in lines and f'"{value}"' in lines), (key, lines)


def test_show_has_the_id_on_a_line_of_its_own() -> None:
    info = SessionInfo(session_id="claude-code:" + str(uuid.UUID(int=5)), cwd="/w", title="T")
    state = _state(info.session_id, "/w", "T")
    text = _render(SessionTable(session_info(state), state), 80)
    assert any(line.split("│")[2].strip() == info.session_id for line in text.splitlines() if "sessionId" in line)


@pytest.fixture(scope="module")
def odd_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Sessions whose ids, titles and cwd are wide (CJK), escaped (controls) and long: what a cut has to meet."""
    from registry import SessionRegistry  # noqa: PLC0415

    url = f"sqlite://{tmp_path_factory.mktemp('odd') / 'odd.db'}"
    wide_cwd = "/home/dev/" + "漢字ディレクトリ" * 6
    with SessionRegistry.open(url, page_size=4) as registry:
        for n in range(9):
            session_id = f"s{n}-" + "漢" * (n % 5)
            registry.create(wide_cwd if n % 2 else "/w", session_id=session_id, title=EVIL_TITLE if n % 3 else None)
            registry.record_activity(session_id)
        registry.archive("s3-漢漢漢")
    return url


@pytest.mark.parametrize(
    "options", [(), ("--all",), ("--archived", "include"), ("--cwd", "/home/dev/" + "漢字ディレクトリ" * 6)]
)
def test_list_writes_to_a_pipe_what_rich_draws_there(run: Cli, odd_store: str, options: tuple[str, ...]) -> None:
    """Piped, ``list`` writes its lines itself (no rich); drawn by rich (told it is a terminal) they are the same."""
    run.env.pop("COLUMNS", None)
    for columns in (None, "17", "40", "61", "120"):
        plain = run("list", *options, store=odd_store, env={} if columns is None else {"COLUMNS": columns})
        # Unset, a pipe is drawn 200 columns wide (a terminal gets its own width).
        drawn = run("list", *options, store=odd_store, env={"COLUMNS": columns or "200", "TTY_COMPATIBLE": "1"})
        assert plain.returncode == drawn.returncode == 0, (plain.stderr, drawn.stderr)
        assert plain.stdout == drawn.stdout, (columns, options)
        assert "\x1b" not in plain.stdout


@pytest.mark.parametrize("session", ["s0-", "s1-漢", "s2-漢漢", "s3-漢漢漢"])
def test_show_writes_to_a_pipe_what_rich_draws_there(run: Cli, odd_store: str, session: str) -> None:
    """Piped, ``show`` writes its key/value table itself (no rich): the same characters rich draws."""
    run.env.pop("COLUMNS", None)
    for columns in (None, "17", "40", "61", "120"):
        plain = run("show", session, store=odd_store, env={} if columns is None else {"COLUMNS": columns})
        drawn = run("show", session, store=odd_store, env={"COLUMNS": columns or "200", "TTY_COMPATIBLE": "1"})
        assert plain.returncode == drawn.returncode == 0, (plain.stderr, drawn.stderr)
        assert plain.stdout == re.sub("\x1b\\[[0-9;]*m", "", drawn.stdout), (columns, session)  # rich's styles aside
        assert "\x1b" not in plain.stdout


def test_a_piped_show_does_not_load_rich_s_console(odd_store: str) -> None:
    code = "import sys; from registry.cli import main; main(sys.argv[1:]); print(sorted(sys.modules), file=sys.stderr)"
    done = subprocess.run(
        [sys.executable, "-c", code, "--store", odd_store, "show", "s1-漢"], capture_output=True, text=True, check=True
    )
    assert "'rich.console'" not in done.stderr.strip()


def test_a_piped_list_does_not_load_rich_s_console(odd_store: str) -> None:
    code = "import sys; from registry.cli import main; main(sys.argv[1:]); print(sorted(sys.modules), file=sys.stderr)"
    done = subprocess.run(
        [sys.executable, "-c", code, "--store", odd_store, "list"], capture_output=True, text=True, check=True
    )
    loaded = done.stderr.strip()
    assert "'rich.cells'" in loaded and "'rich.console'" not in loaded


@given(st.text(" \u3000abcé─漢👍\u0301", max_size=30), st.integers(1, 40))
def test_a_paragraph_that_fits_is_not_broken(paragraph: str, width: int) -> None:
    """``fold`` takes a paragraph no wider than its line as it is, without looking for breaks: there are none to
    find (at most ``width`` cells, spaces, wide and combining characters included; no control character such as a
    tab, which never reaches a table: ``terminal.printable`` escapes them)."""
    if cells(paragraph) <= width:
        assert breaks(paragraph, width) == []
