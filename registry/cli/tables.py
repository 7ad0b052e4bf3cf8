"""The tables people read: sessions, one session, a session's history; each laid out for the width it gets.

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
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from events.model import RecordedEvent, SessionCreated, TitleSource
from registry.agents import native_id
from registry.cli.terminal import printable
from registry.model import META_MESSAGES, SessionInfo, SessionState, format_time
from registry.usage import total_usage_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.table import Table
    from rich.text import Text

__all__ = ["HistoryTable", "SessionTable", "SessionsTable", "escaped", "short_time"]

_json = msgspec.json.Encoder()
_TIME = len("2026-12-02 10:00:00")
_MESSAGES = len("messages")
_ROOM = 40  # title and cwd together get at least this much in the one-row-a-session layout
_WIDE_HISTORY = 120


def escaped(text: str | None, *, missing: str = "") -> Text:
    """Outside text for a table: control characters escaped, never read as markup; ``None`` shows ``missing``."""
    from rich.text import Text  # noqa: PLC0415

    return Text(missing, style="dim italic") if text is None else Text(printable(text))


def short_time(rfc3339: str) -> str:
    """``2026-12-02T10:00:00.123Z`` as people read it in a table (UTC, to the second): ``2026-12-02 10:00:00``."""
    return rfc3339[:_TIME].replace("T", " ")


def _overhead(columns: int) -> int:
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
        from registry.cli.grid import Column, grid_lines  # noqa: PLC0415

        infos = [info for page in self.pages for info in page]
        ends, seen = set(), 0
        for page in self.pages:
            seen += len(page)
            ends.add(seen - 1)
        ids = [printable(info.session_id) for info in infos]
        longest = max([len("session id"), *map(len, ids)])
        title = None if self.title is None else printable(self.title)
        if longest + _TIME + _MESSAGES + _ROOM + _overhead(5) <= width:
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
        elif longest + _TIME + _overhead(2) <= width:
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


class SessionTable:
    """One session: its ACP info, and what the registry knows besides."""

    def __init__(self, info: SessionInfo, state: SessionState, forks: Sequence[SessionState] = ()) -> None:
        self.info = info
        self.state = state
        self.forks = forks

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        info, state = self.info, self.state
        table = Table(show_header=False, title="session", title_justify="left")
        table.add_column(style="bold", no_wrap=True)
        table.add_column(overflow="fold")
        title = None if state.title is None else f"{state.title}  ({_source(state.title_source)})"
        cell = max(options.max_width - len("additionalDirectories") - _overhead(2), 20)
        meta = {} if info.meta is UNSET else info.meta
        rows: list[tuple[str, str | Text | None]] = [
            ("sessionId", info.session_id),
            ("cwd", info.cwd),
            ("title", title),
            ("updatedAt", None if info.updated_at is UNSET else info.updated_at),
            ("created", format_time(state.created_at)),
            ("messages", str(state.messages)),
            ("additionalDirectories", ", ".join(state.additional_directories) or None),
            ("agent", state.agent),
            ("archived", "yes (left out of default lists)" if state.archived else "no"),
            (
                "forked from",
                None if state.parent is None else f"{state.parent.session_id} as of position {state.parent.position}",
            ),
            (
                "forks",
                ", ".join(f"{fork.session_id} (as of {fork.parent.position})" for fork in self.forks if fork.parent)
                or None,
            ),
            ("usage", None if state.usage is None else total_usage_text(state.usage)),
            ("_meta", None if not meta else meta_text(meta, cell) if meta_fits(meta, cell) else "(below)"),
            ("version", f"{state.version} (last event at position {state.position})"),
        ]
        for name, value in rows:
            table.add_row(name, value if not isinstance(value, str | None) else escaped(value, missing="-"))
        yield table
        if meta and not meta_fits(meta, cell):  # a full-width block, rather than values cut in a narrow cell
            from rich.padding import Padding  # noqa: PLC0415

            yield Text("_meta", style="bold")
            yield Padding(meta_text(meta, options.max_width - 2), (0, 0, 0, 2))


def meta_fits(meta: dict[str, Any], width: int) -> bool:
    """Whether each key, and each value below its key, fits ``width`` characters."""
    from registry.cli.views import meta_lines  # noqa: PLC0415

    return all(len(key) + 1 <= width and len(value) + 2 <= width for key, value in meta_lines(meta))


def meta_text(meta: dict[str, Any], width: int) -> Text:
    """``_meta`` as key/value lines for a cell (or a block) ``width`` characters wide (see the module docstring)."""
    from rich.text import Text  # noqa: PLC0415

    from registry.cli.views import meta_lines  # noqa: PLC0415

    text = Text()
    for number, (key, value) in enumerate(meta_lines(meta)):
        if number:
            text.append("\n")
        text.append(key, style="bold")
        text.append(":")
        text.append((" " if len(key) + 2 + len(value) <= width else "\n  ") + value)
    return text


def _source(source: TitleSource | None) -> str:
    return "generated" if source is None else f"set by the {source.value}"


class HistoryTable:
    """A session's events: position, version, time, kind, and what each changed (or why it was ignored)."""

    def __init__(self, session_id: str, records: Sequence[RecordedEvent]) -> None:
        self.session_id = session_id
        self.records = records

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text  # noqa: PLC0415

        from registry.cli.views import event_meta  # noqa: PLC0415

        title = Text(f"session {printable(self.session_id)}: {len(self.records)} events")
        cell = options.max_width - len("position") - len("version") - _TIME - len("SessionInfoChanged") - _overhead(5)
        metas = [meta for record in self.records if (meta := event_meta(record))]
        if options.max_width >= _WIDE_HISTORY and all(meta_fits(meta, cell) for meta in metas):
            yield self._table(title, cell)
        else:
            yield title
            yield from self._blocks(options.max_width)

    def _events(self) -> Iterator[tuple[RecordedEvent, Text, Text, dict[str, Any] | None]]:
        """Each record with its kind, what it changed (``_meta`` apart) and the ``_meta`` it set."""
        from rich.text import Text  # noqa: PLC0415

        from registry.cli.views import describe_event, event_meta  # noqa: PLC0415
        from registry.fold import fold  # noqa: PLC0415

        state = None
        for record in self.records:
            after = fold(state, record)
            kind = Text(type(record.event).__name__, style="bold" if isinstance(record.event, SessionCreated) else "")
            what = escaped(describe_event(record, state, after, with_meta=False))
            if after is None:
                what.stylize("dim")
            yield record, kind, what, event_meta(record)
            state = after or state

    def _table(self, title: Text, cell: int) -> Table:
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        table = Table(title=title, title_justify="left")
        table.add_column("position", justify="right", no_wrap=True)
        table.add_column("version", justify="right", no_wrap=True)
        table.add_column("recorded (UTC)", no_wrap=True, min_width=_TIME)
        table.add_column("event", overflow="fold")
        table.add_column("what it changed", overflow="fold", ratio=1)
        for record, kind, what, meta in self._events():
            changed = Text.assemble(what, "\n", meta_text(meta, cell)) if meta else what
            table.add_row(str(record.position), str(record.version), _recorded(record), kind, changed)
        return table

    def _blocks(self, width: int) -> Iterator[RenderableType]:
        from rich.padding import Padding  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        for record, kind, what, meta in self._events():
            yield Text.assemble(
                Text(f"#{record.position}  v{record.version}  {_recorded(record)}  ", style="dim"), kind
            )
            yield Padding(what, (0, 0, 0, 2))
            if meta:
                yield Padding(meta_text(meta, width - 4), (0, 0, 0, 4))


def _recorded(record: RecordedEvent) -> str:
    return short_time(format_time(record.recorded_at))
