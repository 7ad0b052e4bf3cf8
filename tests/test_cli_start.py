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
