"""What a command process loads before it answers: ``list`` loads what its one page needs and nothing more (the
speed of its start is measured in ``benchmarks/guard.py``; here, which modules and which work it takes), and what it
leaves out until needed still works when it is needed - a warning is one line like any other."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.usage import build
from events.factory import split_url, sqlite_file, sqlite_url
from tests.cli_runner import Cli, Populated


def test_a_read_that_meets_damaged_tables_says_so_in_one_line_of_its_own(
    run: Cli, copy: Path, populated: Populated
) -> None:
    """logging is loaded only when something logs: the CLI's way of saying a warning applies then."""
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE rm_sessions SET state = x'c1ff00'")
    listed = run("list", "--json", "--page-size", "2", store=copy)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == populated.final_pages[0]
    (line,) = listed.stderr.splitlines()
    assert line.startswith("acp-registry: ") and "rebuilding it from the log" in line


def test_the_cells_counted_without_rich_are_the_ones_rich_counts() -> None:
    """``terminal.narrow`` answers for rich when it says one cell a character (rich's tables are not loaded then):
    each character it says so of is one cell to rich (ASCII's controls never reach a table: ``printable`` escapes
    them), and text with any other character is measured by rich itself."""
    from rich.cells import cell_len  # noqa: PLC0415

    from registry.cli.terminal import cells, narrow  # noqa: PLC0415

    said = [char for char in map(chr, range(0x110000)) if narrow(char) and char.isprintable()]
    assert len(said) > 300 and [char for char in said if cell_len(char) != 1] == []
    for text in ("plain", "café · naïve", "┏━┳┓ │ └─┴┘", "漢字", "e\u0301", "👍 ok", "\u00ad-\u00a0"):
        assert cells(text) == cell_len(text), text


_URL_CHARACTERS = "sqlite:/Ab9._-%?#[]@ \t\né~+"


@settings(max_examples=2000, deadline=None)
@given(st.text(_URL_CHARACTERS, max_size=24).map(lambda tail: "sqlite:///" + tail) | st.text(_URL_CHARACTERS))
def test_a_store_url_is_split_as_urllib_splits_it(url: str) -> None:
    """``events.factory`` splits a plain ``sqlite:///`` URL itself (urllib.parse is not loaded for it): the parts are
    urllib's, and so is the file the CLI and the factory find in it."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # urllib's own refusal (an unmatched bracket): so is the factory's, for such a URL
        with pytest.raises(ValueError):
            split_url(url)
        return
    assert split_url(url) == (parts.scheme.lower(), parts.netloc, parts.path, parts.query)
    expected = None
    if parts.scheme.lower() == "sqlite" and not parts.netloc and parts.path.startswith("/"):
        expected = "/" + urllib.parse.unquote(parts.path).lstrip("/")
    assert sqlite_file(url) == (None if expected is None or expected.endswith("/") else expected)


@settings(max_examples=2000, deadline=None)
@given(st.text(_URL_CHARACTERS + "/", max_size=24).map(lambda tail: "/" + tail))
def test_a_file_s_url_is_quoted_as_urllib_quotes_it(path: str) -> None:
    """``events.factory.sqlite_url`` leaves a path of plain characters as it is, without urllib.parse: the URL is
    urllib's, and names the file again."""
    assert sqlite_url(path) == "sqlite://" + urllib.parse.quote(path)
    if not path.endswith("/") and "//" not in path:
        assert sqlite_file(sqlite_url(path)) == path


def test_text_that_is_printable_has_nothing_to_escape() -> None:
    """``printable`` returns printable text as it is, without its pattern: every character the pattern escapes is
    one Python does not count as printable."""
    from registry.cli.terminal import _CONTROLS, printable  # noqa: PLC0415

    escaped = [char for char in map(chr, range(0x110000)) if re.fullmatch(_CONTROLS, char)]
    assert len(escaped) == 32 + 33 + 14 and not any(char.isprintable() for char in escaped)
    assert printable("a\u202eb\x1b[31m\u2028") == "a\\u202eb\\x1b[31m\\u2028"


LEFT_OUT = (
    "logging",  # loaded by the first record (events.logger)
    "shutil",  # argparse's help formatter sized to the terminal: only for help that is printed
    "urllib.parse",  # a plain sqlite:/// URL is split by events.factory
    "pathlib",
    "secrets",  # only to make a seal key
    "shlex",
    "rich",  # a table of plain text is measured without rich's cell tables
    "events.memory",
    "registry.snapshot",  # a catch-up that keeps a snapshot loads it
    "registry.readmodel.memory",  # the fold a fault falls back to
    "registry.projection",  # the in-memory fold (a page is registry.readmodel's Page)
    "registry.search.index",  # made by a search or a user's delete (registry.search.on_demand)
    "typing_extensions",  # msgspec imported without it (registry.cli.start)
    "dataclasses",  # the declarations' rows are frozen msgspec Structs (inspect, ast and dis come with dataclasses)
    "inspect",
    "signal",  # only the commands that run until stopped set a handler (registry.cli.stopping)
    "registry.cli.stopping",
    "registry.service",  # the facade's reads of pages alone (registry.reading): no writer, follower, forks or search
    "registry.writing",
    "registry.follow",
    "registry.forks",
    "registry.turns",
    "registry.said_and_spent",
    "registry.search",
    "base64",  # a page's cursor is base64url through binascii (registry.cursor)
)
"""Modules a piped ``list`` on a SQLite store does without (each of them a measured part of its start)."""


@pytest.fixture(scope="module")
def spending(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default store's folder (``$XDG_DATA_HOME``) of a store whose sessions carry usage, most of it without a
    cost the agent reported: each page's ``_meta`` estimates it with the price table."""
    folder = tmp_path_factory.mktemp("data")
    (folder / "acp-registry").mkdir()
    build(folder / "acp-registry" / "sessions.db", 60, usage=True)
    return folder


@pytest.mark.parametrize("store", ["named", "default, spending"])
def test_a_piped_list_loads_none_of_what_it_does_without(populated: Populated, spending: Path, store: str) -> None:
    """Named with ``--store``, or the default store (its folder found as platformdirs finds it, platformdirs not
    loaded: ``registry.user_dirs``) of sessions whose costs a page estimates. (An editable install's finder loads
    pathlib, and with it urllib.parse, before the command: they are forgotten first, so that the command's own
    imports of them show.)"""
    code = (
        f"import sys; [sys.modules.pop(m) for m in {LEFT_OUT!r} if m in sys.modules];"
        " there = set(sys.modules); from registry.cli import main; code = main(sys.argv[1:]);"
        f" print(sorted(m for m in {LEFT_OUT!r} if m in set(sys.modules) - there), file=sys.stderr);"
        " print('registry.prices' in sys.modules, file=sys.stderr); sys.exit(code)"
    )
    named = store == "named"
    args, env = (["--store", populated.url], None) if named else ([], {**os.environ, "XDG_DATA_HOME": str(spending)})
    done = subprocess.run(
        [sys.executable, "-c", code, *args, "list"], capture_output=True, text=True, check=True, env=env
    )
    assert "sessions" in done.stdout.splitlines()[0]
    assert done.stderr == f"[]\n{not named}\n"  # the spending store's page estimated costs with the price table


def test_the_process_s_command_starts_with_the_collector_paused_and_runs_with_it(populated: Populated) -> None:
    """``main()`` (the script's call) pauses the cyclic collector until the store is open, then freezes what the
    start made and runs the command with the collector on; ``main(argv)`` (an embedding caller) leaves it alone."""
    code = (
        "import gc, sys; from registry.cli import main; import registry.cli.list_sessions as ls; run = ls.run\n"
        "def watched(args):\n"
        "    print('before', gc.isenabled(), file=sys.stderr); code = run(args)\n"
        "    print('after', gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr); return code\n"
        "ls.run = watched\n"
        "code = main()\n"
        "print('end', gc.isenabled(), file=sys.stderr); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--store", populated.url, "list"], capture_output=True, text=True, check=True
    )
    assert done.stderr.splitlines() == ["before False", "after True True", "end True"]
    kept = subprocess.run(
        [sys.executable, "-c", code.replace("code = main()", "code = main(sys.argv[1:])"), "--store", populated.url,
         "list"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert kept.stderr.splitlines() == ["before True", "after True False", "end True"]


def test_the_floor_answers_the_page_list_answers(run: Cli, populated: Populated) -> None:
    """``benchmarks.cli_start``'s floor - the least process that answers the page - reads the sessions ``list``
    shows, in its order, seals checked; and the benchmark gives its figures."""
    from benchmarks.cli_start import floor_program, measure  # noqa: PLC0415

    floor = subprocess.run(
        [sys.executable, "-c", floor_program(), str(populated.path), "3"], capture_output=True, text=True, check=True
    )
    listed = json.loads(run("list", "--json", "--page-size", "3", store=populated.path).stdout)
    assert [line.split()[-1] for line in floor.stdout.splitlines()] == [s["sessionId"] for s in listed["sessions"]]
    figures = measure(populated.url, rounds=1)
    assert set(figures) == {"pass_ms", *(f"{n}_x{p}" for n in ("floor", "list") for p in ("", "_p10", "_p90"))}
