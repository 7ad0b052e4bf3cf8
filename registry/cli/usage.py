"""``usage``: what the sessions used and cost, totalled by day, week, month, agent, cwd or model.

From the read model's daily totals (``SessionRegistry.usage``: no scan of the log), over every agent of the store.
A table a group, with a bar per row on a terminal (the cost in the currency spent most, else the tokens), the total
below, and what each estimate came from; ``--json`` writes ``registry.usage_report.UsageReport`` exactly (amounts as
exact decimal strings and integer billionths). Costs are what the agents reported; where they reported none, an
estimate from the price table (``--prices FILE``, else the user's file, else the shipped one: ``registry.prices``),
marked ``est.``; tokens only where neither applies. Amounts in different currencies are never added.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from registry.agents import known_name
from registry.cli.grid import Column, grid_lines
from registry.cli.options import cwd_option
from registry.cli.stores import open_registry
from registry.cli.terminal import plain_width, printable, stdout_console, write_json, write_lines
from registry.cli.where import locate
from registry.prices import load_prices, price_file
from registry.service import SessionRegistry
from registry.usage import amount_text
from registry.usage_report import BY, UsageLine, UsageReport

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

__all__ = ["UsageTable", "add_arguments", "compact", "run"]

_HEADERS: Final = {
    "day": "day (UTC)",
    "week": "week from (UTC)",
    "month": "month (UTC)",
    "agent": "agent",
    "cwd": "cwd",
    "model": "model",
}
_BAR: Final = 24
_EIGHTHS: Final = " ▏▎▍▌▋▊▉"
_BLOCKS: Final = "█▏▎▍▌▋▊▉"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", choices=BY, default="day", help="what a row totals (day, the default)")
    parser.add_argument("--since", metavar="DAY", help="from this UTC day on (YYYY-MM-DD, or an RFC 3339 time)")
    parser.add_argument("--until", metavar="DAY", help="up to this UTC day, included (YYYY-MM-DD, or a time)")
    parser.add_argument("--agent", metavar="NAME", type=known_name, help="only this agent's sessions")
    parser.add_argument("--cwd", metavar="DIR", help="only the sessions whose cwd is DIR (relative: from here)")
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help="estimate with the prices in FILE (TOML, or JSON), over the shipped ones; default: $ACP_REGISTRY_PRICES,"
        " else prices.toml in the config folder when it exists",
    )


def run(args: argparse.Namespace) -> int:
    prices = load_prices(price_file(args.prices))
    cwd = cwd_option(args.cwd)
    with open_registry(locate(args.store), SessionRegistry, create=False, follow=False) as registry:
        found = registry.usage(by=args.by, since=args.since, until=args.until, agent=args.agent, cwd=cwd, prices=prices)
    if args.json:
        write_json(found)
        return 0
    width = plain_width()
    table = UsageTable(found, bars=width is None)
    if width is not None:  # a pipe or a file: the same characters, without loading rich, and without bars
        write_lines(table.lines(width), width)
        return 0
    stdout_console().print(table)
    return 0


def compact(count: int) -> str:
    """A token count for a table: exact below 10,000, then three digits and a unit: ``12.3k``, ``4.50M``, ``789B``."""
    if count < 10_000:
        return f"{count:,}"
    for unit, size in (("k", 1_000), ("M", 1_000_000), ("B", 1_000_000_000)):
        value = count / size
        if value < 999.5 or unit == "B":
            digits = 2 if value < 9.995 else 1 if value < 99.95 else 0
            return f"{value:,.{digits}f}{unit}"
    raise AssertionError  # pragma: no cover - the last unit returns


def _cost(line: UsageLine) -> str:
    costs = [amount_text(cost.nanos, cost.currency) + (" est." if cost.estimated else "") for cost in line.costs]
    return "\n".join(costs) or "-"


class UsageTable:
    """A report as a table: a row a group, then the total; a bar per row where ``bars``."""

    def __init__(self, report: UsageReport, *, bars: bool) -> None:
        self.report = report
        self.bars = bars

    def _measure(self) -> tuple[str, str | None]:
        """What the bars measure: the header, and the currency (None: total tokens)."""
        costs = self.report.total.costs
        if not costs:
            return "tokens", None
        main = max(costs, key=lambda cost: cost.nanos)
        return f"cost ({main.currency})", main.currency

    def _value(self, line: UsageLine, currency: str | None) -> float:
        if currency is None:
            return float(line.total_tokens)
        return float(sum(cost.nanos for cost in line.costs if cost.currency == currency))

    def lines(self, width: int) -> Iterator[str]:
        report = self.report
        yield from self._heading()
        if not report.lines:
            yield (
                "no usage recorded: it is kept for the turns of agents that report it (over ACP, through `acp-registry"
                " proxy`, or in their own files, through `acp-registry import-agents`)"
            )
            return
        total = report.total
        columns = [Column(_HEADERS[report.by], ratio=1), Column("turns", right=True)]
        names = ["input", "output", "cache read", "cache write", "thought"]
        fields = ["input_tokens", "output_tokens", "cached_read_tokens", "cached_write_tokens", "thought_tokens"]
        shown = [(name, field) for name, field in zip(names, fields, strict=True) if getattr(total, field)]
        columns += [Column(name, right=True) for name, _ in shown]
        columns += [Column("total", right=True), Column("cost", right=True)]
        every = [*report.lines, total]
        rows = [
            [
                "total" if line is total else printable(line.key or "(none)"),
                f"{line.turns:,}",
                *(compact(getattr(line, field)) for _, field in shown),
                compact(line.total_tokens),
                _cost(line),
            ]
            for line in every
        ]
        if self.bars:
            header, currency = self._measure()
            columns.append(Column(header))
            top = max((self._value(line, currency) for line in report.lines), default=0.0)
            for row, line in zip(rows, every, strict=True):
                row.append("" if line is total else _bar(self._value(line, currency), top))
        yield from _table(columns, rows, width)
        yield from self._notes(width)

    def _heading(self) -> Iterator[str]:
        report = self.report
        if report.since is None and report.until is None:
            span = "all days"
        else:
            span = f"{report.since or 'the first day'} to {report.until or 'today'}"
        narrowed = [f"agent {report.agent}"] if report.agent else []
        narrowed += [f"cwd {report.cwd}"] if report.cwd else []
        rows = len(report.lines)
        group = {"cwd": "cwd", "day": "day", "week": "week", "month": "month", "agent": "agent", "model": "model"}
        yield printable(
            f"usage by {report.by}: {rows:,} {group[report.by]}{'s' if rows != 1 else ''}, {span} (UTC)"
            + (f", {' and '.join(narrowed)}" if narrowed else ", every agent and cwd")
        )

    def _notes(self, width: int) -> Iterator[str]:
        import textwrap  # noqa: PLC0415

        total, prices = self.report.total, self.report.prices
        notes = []
        if any(cost.estimated for cost in total.costs):
            reported = any(cost.nanos > cost.estimated_nanos for cost in total.costs)
            notes.append(
                f"est.: estimated with the prices of {printable(prices.source)} as of {prices.as_of}"
                + ("; the rest as the agents reported it." if reported else ".")
            )
        if total.unpriced_tokens:
            models = ", ".join(printable(model or "(no model named)") for model in total.unpriced_models)
            notes.append(f"{total.unpriced_tokens:,} tokens have no cost (no price for {models}).")
        for note in notes:
            yield from textwrap.wrap(note, width=max(width, 20))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment  # noqa: PLC0415

        for line in self.lines(options.max_width):
            yield Segment(line)
            yield Segment.line()


def _table(columns: list[Column], rows: list[list[str]], width: int) -> Iterator[str]:
    """The rows, the last one (the total) ruled off: drawn here when every cell is one line of ASCII (or a bar) and
    the table fits the width - a report by day is hundreds of rows of dates and numbers, which the general table
    (``registry.cli.grid``) measures and folds cell by cell - else by ``grid_lines``, in the same look."""
    widths = [len(column.header) for column in columns]
    plain = True
    for row in rows:
        for n, cell in enumerate(row):
            if "\n" in cell or not (cell.isascii() or not cell.strip(_BLOCKS)):  # bars: one cell a character
                plain = False
                break
            widths[n] = max(widths[n], len(cell))
        if not plain:
            break
    if not plain or sum(widths) + 3 * len(widths) + 1 > width:
        yield from grid_lines(columns, rows, width, sections=frozenset({len(rows) - 2}))
        return
    rights = [column.right for column in columns]

    def line(cells: list[str]) -> str:
        parts = (
            cell.rjust(w) if right else cell.ljust(w) for cell, w, right in zip(cells, widths, rights, strict=True)
        )
        return "│ " + " │ ".join(parts) + " │"

    def rule(left: str, fill: str, cross: str, right: str) -> str:
        return left + cross.join(fill * (w + 2) for w in widths) + right

    yield rule("┏", "━", "┳", "┓")
    yield (
        "┃ "
        + " ┃ ".join(
            column.header.rjust(w) if column.right else column.header.ljust(w)
            for column, w in zip(columns, widths, strict=True)
        )
        + " ┃"
    )
    yield rule("┡", "━", "╇", "┩")
    for row in rows[:-1]:
        yield line(row)
    yield rule("├", "─", "┼", "┤")
    yield line(rows[-1])
    yield rule("└", "─", "┴", "┘")


def _bar(value: float, top: float) -> str:
    if top <= 0 or value <= 0:
        return ""
    eighths = max(1, round(value / top * _BAR * 8))
    return "█" * (eighths // 8) + _EIGHTHS[eighths % 8].strip()
