"""The tables people read: sessions here, one session and a session's history in ``session_tables.py``; each laid
out for the width it gets.

Decided per width (the tests record each at 80, 120 and 200 columns):

* Session ids are always shown whole and on one line where they fit the width, so they can be copied into
  ``show`` or ``history``; every other column gives way first.
* ``list`` / ``replay``: one row a session (updated, messages, title, cwd, id) when the ids leave the title and
  cwd room enough (e.g. ``claude-code:<uuid>`` ids from 120 columns up); otherwise each session is one cell of
  stacked lines - the id, the title, the cwd - beside its time and message count; and where even that does not
  fit, one column holds everything. No column is ever narrower than its header word.
* ``history``: a table with a column for what each event changed from 120 columns up; below that (or when a
  ``_meta`` value would not fit that column) each event is a block - a line naming it, then what it changed,
  indented, at the full width.
* ``_meta`` (``show``, ``history``) is key/value lines, one key a line - ``key: value`` where that fits, else the
  value on the line below the key - in its cell when every key and value fits there, else in a block of its own
  at the full width (``show``: below the table; ``history``: the block layout), so no JSON is cut mid-token at
  the edge of a narrow cell.
* Text that came from outside (titles, cwds, ids, ``_meta``) is shown with control characters escaped
  (``terminal.printable``), so a title cannot move the cursor or retitle the terminal; JSON output stays exact.

rich is imported only when a table is drawn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from msgspec import UNSET

from registry.agents import native_id
from registry.cli.grid import Column, grid_lines
from registry.cli.terminal import printable
from registry.model import META_MESSAGES, SessionInfo

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.text import Text

__all__ = ["SessionsTable", "escaped", "overhead", "short_time"]

_TIME = len("2026-12-02 10:00:00")
_MESSAGES = len("messages")
_ROOM = 40  # title and cwd together get at least this much in the one-row-a-session layout


def escaped(text: str | None, *, missing: str = "") -> Text:
    """Outside text for a table: control characters escaped, never read as markup; ``None`` shows ``missing``."""
    from rich.text import Text  # noqa: PLC0415

    return Text(missing, style="dim italic") if text is None else Text(printable(text))


def short_time(rfc3339: str) -> str:
    """``2026-12-02T10:00:00.123Z`` as people read it in a table (UTC, to the second): ``2026-12-02 10:00:00``."""
    return rfc3339[:_TIME].replace("T", " ")


def overhead(columns: int) -> int:
    """Characters a rich table with borders spends around ``columns`` columns (padding 1 a side, 1 per rule)."""
    return 3 * columns + 1


class SessionsTable:
    """Sessions as ``session/list`` returned them, page by page (a rule separates pages). Drawn by
    ``registry.cli.grid`` (plain lines, the same look as rich's tables, fast at any number of rows)."""

    def __init__(self, pages: Sequence[Sequence[SessionInfo]], *, title: str | None = None) -> None:
        self.pages = pages
        self.title = title

    def lines(self, width: int) -> Iterator[str]:
        """The table's lines for a terminal ``width`` columns wide (see the module docstring for the layouts)."""

        infos = [info for page in self.pages for info in page]
        ends, seen = set(), 0
        for page in self.pages:
            seen += len(page)
            ends.add(seen - 1)
        ids = [printable(info.session_id) for info in infos]
        longest = max([len("session id"), *map(len, ids)])
        title = None if self.title is None else printable(self.title)
        if longest + _TIME + _MESSAGES + _ROOM + overhead(5) <= width:
            columns = [
                Column("updated (UTC)"),
                Column("messages", right=True),
                Column("title", ratio=3),
                Column("cwd", ratio=2),
                Column("session id"),
            ]
            rows = [
                [_updated(i), _messages(i), _title(i), printable(i.cwd), id_] for i, id_ in zip(infos, ids, strict=True)
            ]
        elif longest + _TIME + overhead(2) <= width:
            columns = [Column("session id · title · cwd", ratio=1), Column("updated (UTC)")]
            rows = [
                [_card(i, id_), f"{_updated(i)}\n{_messages(i) or 0} messages"]
                for i, id_ in zip(infos, ids, strict=True)
            ]
        else:
            columns = [Column("session id · title · cwd · updated (UTC)", ratio=1)]
            rows = [
                [f"{_card(i, id_)}\n{_updated(i)} · {_messages(i) or 0} messages"]
                for i, id_ in zip(infos, ids, strict=True)
            ]
        return grid_lines(columns, rows, width, title=title, sections=frozenset(ends))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment  # noqa: PLC0415

        for line in self.lines(options.max_width):
            yield Segment(line)
            yield Segment.line()


def _title(info: SessionInfo) -> str:
    """The title, then markers: the agent (unless the id already starts with its name) and ``archived``."""
    title = "(untitled)" if info.title is UNSET or info.title is None else printable(info.title)
    marks = []
    agent = info.agent
    if agent is not None and native_id(agent, info.session_id) is None:
        marks.append(printable(agent))
    if info.archived is True:
        marks.append("archived")
    return f"{title} [{' · '.join(marks)}]" if marks else title


def _updated(info: SessionInfo) -> str:
    return "(cleared)" if info.updated_at is UNSET or info.updated_at is None else short_time(info.updated_at)


def _messages(info: SessionInfo) -> str:
    meta = {} if info.meta is UNSET else info.meta
    return printable(str(meta.get(META_MESSAGES, "")))


def _card(info: SessionInfo, session_id: str) -> str:
    return f"{session_id}\n{_title(info)}\n{printable(info.cwd)}"
