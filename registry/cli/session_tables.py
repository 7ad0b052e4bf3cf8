"""One session's tables: ``show``'s card of its info and ``history``'s events, laid out as ``tables.py`` says.

rich is imported only when a table is drawn (``show --json``, and ``show`` into a pipe, never load it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from msgspec import UNSET

from events.model import RecordedEvent, SessionCreated, TitleSource
from registry.cli.grid import Column, fold, grid_lines
from registry.cli.tables import escaped, overhead, short_time
from registry.cli.terminal import cells, printable
from registry.cli.views import describe_event, event_meta, meta_lines
from registry.fold import fold as fold_event
from registry.model import SessionInfo, SessionState, format_time
from registry.usage import total_usage_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.table import Table
    from rich.text import Text

__all__ = ["HistoryTable", "SessionTable", "meta_fits", "meta_plain", "meta_text"]

_TIME: Final = len("2026-12-02 10:00:00")
_WIDE_HISTORY: Final = 120


class SessionTable:
    """One session: its ACP info, and what the registry knows besides."""

    def __init__(self, info: SessionInfo, state: SessionState, forks: Sequence[SessionState] = ()) -> None:
        self.info = info
        self.state = state
        self.forks = forks

    def _rows(self, cell: int) -> list[tuple[str, str | None]]:
        """Each row's name and value (None: none); ``_meta``'s value is the key ``"_meta"`` when its lines fit
        a ``cell`` wide, for the renderer to lay out, else ``(below)``."""
        info, state = self.info, self.state
        title = None if state.title is None else f"{state.title}  ({_source(state.title_source)})"
        meta = {} if info.meta is UNSET else info.meta
        return [
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
            ("_meta", None if not meta else "_meta" if meta_fits(meta, cell) else "(below)"),
            ("version", f"{state.version} (last event at position {state.position})"),
        ]

    @property
    def _meta(self) -> dict[str, Any]:
        return {} if self.info.meta is UNSET else self.info.meta

    @staticmethod
    def draws_plain(width: int) -> bool:
        """Whether ``lines`` draws what rich would at ``width``: not below a few cells for the values (there rich
        narrows the names' column too, and rich draws it)."""
        return width >= len("additionalDirectories") + overhead(2) + 4

    def lines(self, width: int) -> Iterator[str]:
        """The table's lines where there is no terminal, ``width`` columns wide (``draws_plain``): the characters
        rich writes for ``__rich_console__`` (its box, its folding), drawn without loading rich."""

        cell = _meta_cell(width)
        meta = self._meta
        rows = [
            [name, meta_plain(meta, cell) if name == value == "_meta" else "-" if value is None else printable(value)]
            for name, value in self._rows(cell)
        ]
        yield from grid_lines([Column(""), Column("", ratio=1)], rows, width, title="session", headless=True)
        if meta and not meta_fits(meta, cell):  # a full-width block, rather than values cut in a narrow cell
            yield "_meta"
            yield from (_pad_to("  " + line, width) for line in fold(meta_plain(meta, width - 2), width - 2))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        table = Table(show_header=False, title="session", title_justify="left")
        table.add_column(style="bold", no_wrap=True)
        table.add_column(overflow="fold")
        cell = _meta_cell(options.max_width)
        meta = self._meta
        for name, value in self._rows(cell):
            if name == value == "_meta":
                table.add_row(name, meta_text(meta, cell))
            else:
                table.add_row(name, escaped(value, missing="-"))
        yield table
        if meta and not meta_fits(meta, cell):  # a full-width block, rather than values cut in a narrow cell
            from rich.padding import Padding  # noqa: PLC0415

            yield Text("_meta", style="bold")
            yield Padding(meta_text(meta, options.max_width - 2), (0, 0, 0, 2))


def _pad_to(line: str, width: int) -> str:
    """``line`` padded with spaces to ``width`` cells, as rich pads a padded block's lines."""

    return line + " " * (width - cells(line))


def _meta_cell(width: int) -> int:
    """The width of ``show``'s value cell for ``_meta`` in a table ``width`` wide."""
    return max(width - len("additionalDirectories") - overhead(2), 20)


def meta_fits(meta: dict[str, Any], width: int) -> bool:
    """Whether each key, and each value below its key, fits ``width`` characters."""

    return all(len(key) + 1 <= width and len(value) + 2 <= width for key, value in meta_lines(meta))


def meta_plain(meta: dict[str, Any], width: int) -> str:
    """``meta_text``'s characters, without styles (and without rich)."""

    return "\n".join(
        key + ":" + (" " if len(key) + 2 + len(value) <= width else "\n  ") + value for key, value in meta_lines(meta)
    )


def meta_text(meta: dict[str, Any], width: int) -> Text:
    """``_meta`` as key/value lines for a cell (or a block) ``width`` characters wide (see the module docstring)."""
    from rich.text import Text  # noqa: PLC0415

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

        title = Text(f"session {printable(self.session_id)}: {len(self.records)} events")
        cell = options.max_width - len("position") - len("version") - _TIME - len("SessionInfoChanged") - overhead(5)
        metas = [meta for record in self.records if (meta := event_meta(record))]
        if options.max_width >= _WIDE_HISTORY and all(meta_fits(meta, cell) for meta in metas):
            yield self._table(title, cell)
        else:
            yield title
            yield from self._blocks(options.max_width)

    def _events(self) -> Iterator[tuple[RecordedEvent, Text, Text, dict[str, Any] | None]]:
        """Each record with its kind, what it changed (``_meta`` apart) and the ``_meta`` it set."""
        from rich.text import Text  # noqa: PLC0415

        state = None
        for record in self.records:
            after = fold_event(state, record)
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
