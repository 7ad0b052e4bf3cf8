"""What a command process loads before it answers: ``list`` loads what its one page needs and nothing more (the
speed of its start is measured in ``benchmarks/guard.py``; here, which modules and which work it takes), and what it
leaves out until needed still works when it is needed - a warning is one line like any other."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

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
