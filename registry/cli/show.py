"""``show``: one session's current info (its ``SessionInfo``) and what the registry knows besides: its agent,
whether it is archived, the session it was forked from and the sessions forked from it.

SESSION is resolved as ``registry.cli.ids.resolve_session`` says: the stored id, the agent's own id, or a unique
prefix of either.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from events.model import SessionUpdated, Usage
from registry.cli.errors import InputError
from registry.cli.ids import add_session, the_session
from registry.cli.session_tables import SessionTable
from registry.cli.tables import short_time
from registry.cli.terminal import plain_width, printable, stdout_console, write_json, write_lines
from registry.model import SessionInfo, format_time, session_info
from registry.usage import turn_usage_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from events.store import EventStore

__all__ = ["TurnsUsage", "add_arguments", "run", "turns_with_usage"]

_SHOWN: Final = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session(parser)


def run(args: argparse.Namespace) -> int:
    with the_session(args) as (registry, session_id):
        state = registry.state(session_id)
        assert state is not None  # resolved: it exists
        if state.deleted:
            raise InputError(
                f"session {session_id!r} was deleted at position {state.position} "
                f"(acp-registry history {session_id} shows its events)"
            )
        info: SessionInfo = session_info(state, additional_directories=registry.additional_directories)
        forks = [] if args.json else registry.forks(session_id)
        turns = [] if args.json or state.usage is None else turns_with_usage(registry.store, session_id)
    if args.json:
        write_json(info)
        return 0
    table = SessionTable(info, state, forks)
    width = plain_width()
    if width is not None and table.draws_plain(width):  # a pipe or a file: rich's characters, without rich
        write_lines(table.lines(width), width)
        if turns:
            print("\n".join(TurnsUsage(turns).lines()), flush=True)
        return 0
    console = stdout_console()
    console.print(table)
    if turns:
        console.print(TurnsUsage(turns), soft_wrap=True)
    return 0


def turns_with_usage(store: EventStore, session_id: str) -> list[tuple[int, int, Usage]]:
    """The session's own turns that reported usage: (position, time, usage), in order."""
    return [
        (record.position, record.event.at, record.event.usage)
        for record in store.read_stream(session_id)
        if isinstance(record.event, SessionUpdated) and record.event.usage is not None
    ]


class TurnsUsage:
    """``show``'s usage by turn: a line a turn - its position, time and usage (``registry.usage.turn_usage_text``),
    the most recent ``_SHOWN`` of them."""

    def __init__(self, turns: list[tuple[int, int, Usage]]) -> None:
        self.turns = turns

    def _parts(self) -> Iterator[tuple[str, str]]:
        """Each line as (its dim part, the rest); the first is the heading."""
        shown = self.turns[-_SHOWN:]
        earlier = len(self.turns) - len(shown)
        yield "", f"usage by turn ({len(self.turns):,})"
        if earlier:
            yield f"  ... {earlier:,} earlier turns (acp-registry history shows every one)", ""
        for position, at, usage in shown:
            yield f"  #{position}  {short_time(format_time(at))}  ", printable(turn_usage_text(usage))

    def lines(self) -> list[str]:
        """The lines without styles (where there is no terminal)."""
        return [dim + rest for dim, rest in self._parts()]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text  # noqa: PLC0415

        for number, (dim, rest) in enumerate(self._parts()):
            if number == 0:
                yield Text(rest, style="bold")
            else:
                line = Text(dim, style="dim")
                line.append(rest)
                yield line
