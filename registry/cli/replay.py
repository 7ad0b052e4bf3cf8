"""``replay --at POSITION|TIMESTAMP``: the list exactly as ``session/list`` would have answered then.

The log up to that point is folded (``registry.timetravel.projection_at``: from the nearest kept snapshot at or
before it, then the tail, with a progress bar on a terminal; a timestamp is the last event recorded at or before
it, found by bisecting the log) and its first page is shown as ``list`` shows it, with the cursor the registry
would have issued; ``--all`` writes every page, each as soon as it is cut, so the output never piles up in memory.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator

import msgspec

from registry.backends import backend_for
from registry.cli.errors import InputError
from registry.cli.options import cwd_option, page_size
from registry.cli.stores import open_log
from registry.cli.tables import SessionsTable
from registry.cli.terminal import progress, stdout_console
from registry.cli.timetravel import list_pages
from registry.cli.where import locate
from registry.cursor import CursorCodec
from registry.errors import InvalidParams
from registry.model import ListSessionsResult, format_time, parse_time
from registry.timetravel import position_at, projection_at

__all__ = ["ReplayResult", "add_arguments", "run"]

_INTEGER = re.compile(r"[+-]?\d+")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--at", required=True, metavar="POSITION|TIMESTAMP", help="a log position, or an RFC 3339 time (recorded at)"
    )
    parser.add_argument("--cwd", metavar="DIR", help="only sessions whose cwd is DIR")
    parser.add_argument("--all", action="store_true", help="every page, each written as soon as it is cut")
    parser.add_argument("--page-size", type=page_size, default=50, metavar="N", help="sessions per page (50)")


class ReplayResult(msgspec.Struct, rename="camel"):
    """``replay --json``: the log point, its counts, and the ``session/list`` pages then (the first, or all)."""

    position: int
    head: int
    events: int
    sessions_created: int
    sessions_deleted: int
    sessions_live: int
    pages: list[ListSessionsResult]


def _point(text: str) -> tuple[int | None, int | None]:
    """``--at``: a log position (digits) or an RFC 3339 timestamp with a zone, as epoch ns."""
    if text.isdigit():
        return int(text), None
    if _INTEGER.fullmatch(text.strip()):
        raise InputError(f"--at {text}: not a log position (positions are integers >= 0)")
    try:
        return None, parse_time(text, field="--at")
    except InvalidParams as exc:
        raise InputError(f"{exc}; give a log position or a timestamp such as 2026-12-02T10:00:00Z") from None


def run(args: argparse.Namespace) -> int:
    position, moment = _point(args.at)
    cwd = cwd_option(args.cwd)
    with open_log(locate(args.store), create=False) as store:
        head = store.head()
        if position is not None and position > head:
            raise InputError(f"--at {position} is beyond the log's head ({head})")
        target = position_at(store, moment) if moment is not None else position if position is not None else head
        with progress("replaying the log", target) as report:
            travel = projection_at(
                backend_for(store), target, report=report
            )  # from the nearest kept snapshot at or before
        codec = CursorCodec(store.identity)
    projection = travel.projection
    deleted = sum(1 for state in projection.states().values() if state.deleted)
    live = len(projection)
    result = ReplayResult(
        position=projection.position,
        head=head,
        events=travel.events,
        sessions_created=live + deleted,
        sessions_deleted=deleted,
        sessions_live=live,
        pages=[],
    )
    pages = list_pages(projection, codec, cwd=cwd, page_size=args.page_size)
    if args.json:
        _write_json(result, pages if args.all else _first(pages))
        return 0
    console = stdout_console()
    when = "" if moment is None else f" (the last event recorded at or before {format_time(moment)})"
    console.print(f"session/list as of position {result.position} of {head}{when}", markup=False, soft_wrap=True)
    console.print(
        f"events {result.events} · sessions created {result.sessions_created} · deleted {result.sessions_deleted}"
        f" · live {result.sessions_live}",
        markup=False,
    )
    shown = 0
    last: ListSessionsResult | None = None
    for number, page in enumerate(pages if args.all else _first(pages), start=1):
        shown += len(page.sessions)
        title = f"page {number}: sessions {shown - len(page.sessions) + 1} to {shown}" if page.sessions else None
        console.print(SessionsTable([page.sessions], title=title))
        last = page
    if last is not None and isinstance(last.next_cursor, str):
        console.print("more sessions follow: --all shows every page", markup=False, soft_wrap=True)
    return 0


def _first(pages: Iterator[ListSessionsResult]) -> Iterator[ListSessionsResult]:
    yield next(pages)


def _write_json(head: ReplayResult, pages: Iterator[ListSessionsResult]) -> None:
    """``head`` with its ``pages`` written one by one as they are cut: one JSON document, never all in memory."""
    encoder = msgspec.json.Encoder()
    opening = encoder.encode(head)
    assert opening.endswith(b'"pages":[]}')
    out = sys.stdout.buffer
    out.write(opening[: -len(b"]}")])
    for number, page in enumerate(pages):
        out.write((b"," if number else b"") + encoder.encode(page))
    out.write(b"]}\n")
    out.flush()
