"""Where output goes: rich consoles for people, exact JSON for programs, progress only on a terminal.

rich is imported only by the commands that draw something, so ``--json`` output and ``import registry.cli``
stay fast.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "cells",
    "human_size",
    "narrow",
    "plain_width",
    "printable",
    "progress",
    "stdout_console",
    "write_json",
    "write_json_line",
    "write_lines",
]

_json = msgspec.json.Encoder()
_PIPED_WIDTH = 200  # piped tables are read by tools and people alike: do not squeeze them into 80 columns


# C0 and C1 controls and DEL (cursor moves, ESC sequences, terminal titles), line and paragraph separators, and
# the bidirectional overrides that make text read in another order than it is stored ("Trojan source").
_CONTROLS: Final = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """``text`` for a terminal: control characters written as escapes (``\\x1b``, ``\\n``, ``\\u202e``), so that
    text from outside (a title, a cwd, an id) cannot move the cursor, clear the screen or retitle the window."""
    if text.isprintable():  # each of _CONTROLS is a control, a format character or a separator: none printable
        return text
    return re.sub(_CONTROLS, _escape, text)  # the pattern is compiled by the first text that needs it


def stdout_console() -> Console:
    from rich.console import Console  # noqa: PLC0415

    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = _PIPED_WIDTH
    return console


def plain_width() -> int | None:
    """The width of stdout when rich would write plain text there (no terminal: a pipe, a file), for a command
    whose output is lines already laid out: it writes them itself (``write_lines``) without loading rich. None:
    a terminal, by rich's own rules (``TTY_COMPATIBLE``, ``FORCE_COLOR``, then the stream), or a ``COLUMNS``
    that only rich interprets."""
    environ = os.environ
    claimed, forced = environ.get("TTY_COMPATIBLE", ""), environ.get("FORCE_COLOR")
    if claimed == "1" or (claimed != "0" and (forced != "" if forced is not None else _isatty(sys.stdout))):
        return None
    columns = environ.get("COLUMNS")
    if columns is None:
        return _PIPED_WIDTH
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no such method, or a closed stream: not a terminal
        return False


# A character rich may measure otherwise than one cell wide: any but ASCII, Latin-1's printable ones (a middle dot,
# accented letters) and the box drawing of the tables' rules. Searched for, not translated away: a table's every
# line holds box drawing, and a translation looks each of its characters up in a dict.
_NOT_ONE_CELL: Final = "[^\x00-\x7f\xa0-\xff\u2500-\u257f]"


def narrow(text: str) -> bool:
    """Whether each character of ``text`` is one cell wide as rich counts: ASCII, Latin-1 and box drawing (rich's
    tables are loaded for the others: wide East Asian characters, combining marks, emoji)."""
    return text.isascii() or re.search(_NOT_ONE_CELL, text) is None  # compiled by the first text that needs it


def cells(text: str) -> int:
    """How many terminal cells ``text`` takes, as rich counts them."""
    if narrow(text):
        return len(text)
    from rich.cells import cell_len  # noqa: PLC0415

    return cell_len(text)


def write_lines(lines: Iterable[str], width: int) -> None:
    """Lines on stdout as rich's console writes them where there is no terminal: each cut to ``width`` cells."""
    out = sys.stdout
    for line in lines:
        if narrow(line):
            out.write(line[:width])
        else:
            from rich.cells import cell_len, set_cell_size  # noqa: PLC0415 - the cell widths only, not the console

            out.write(set_cell_size(line, width) if cell_len(line) > width else line)
        out.write("\n")
    out.flush()


def write_json(value: Any) -> None:
    """One JSON document on stdout (msgspec: explicit nulls kept, UNSET fields left out)."""
    write_json_line(_json.encode(value))


def write_json_line(line: bytes) -> None:
    out = sys.stdout.buffer
    out.write(line + b"\n")
    out.flush()


@contextlib.contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; otherwise a callback that does nothing.

    The callback takes how far the work is (e.g. the last log position read), not an increment.
    """
    if not sys.stderr.isatty():
        yield lambda _done: None
        return
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn  # noqa: PLC0415

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.update(task, completed=done)


SLOW_OPEN: Final = 0.5
"""Seconds an open may take before a terminal is told what it waits for."""


@contextlib.contextmanager
def waiting(description: str | Callable[[], str], delay: float = SLOW_OPEN) -> Iterator[None]:
    """On a terminal, a spinner with ``description`` on stderr if the work inside takes longer than ``delay``
    seconds (for work that reports no progress of its own); nothing otherwise. A callable ``description`` is
    asked only on a terminal."""
    if not sys.stderr.isatty():
        yield
        return
    if callable(description):
        description = description()
    done = threading.Event()

    def show() -> None:
        if done.wait(delay):
            return
        from rich.console import Console  # noqa: PLC0415

        with Console(stderr=True).status(description):
            done.wait()

    spinner = threading.Thread(target=show, name="acp-registry-waiting", daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
