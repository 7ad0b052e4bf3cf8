"""``list``: the ``session/list`` view, one page or every page (``--all``), as a client sees it.

The table's heading says how many sessions it shows of how many there are (``50 of 94,912 sessions``, in a cwd
too): the read model keeps the live count and how many of those are archived, and a cwd's counts are a pass over
its cwd index (no session is decoded).
"""

from __future__ import annotations

import argparse
from typing import cast

from msgspec import UNSET

from registry.cli.options import cwd_option, hint_unknown_agent, page_size
from registry.cli.stores import open_registry
from registry.cli.tables import SessionsTable
from registry.cli.terminal import plain_width, printable, stdout_console, write_json, write_lines
from registry.cli.where import locate
from registry.filters import FILTERS, Filters
from registry.reading import SessionPages

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cwd", metavar="DIR", help="only sessions whose cwd is DIR (relative: from here)")
    parser.add_argument("--all", action="store_true", help="every page (--json: one array of SessionInfo)")
    parser.add_argument("--cursor", help="the page after this nextCursor")
    parser.add_argument("--page-size", type=page_size, default=50, metavar="N", help="sessions per page (50)")
    for f in FILTERS:  # each filter's own option, as it declares it
        if f.option is not None:
            parser.add_argument(f.option.flag, dest=f.name, **f.option.keywords)


def run(args: argparse.Namespace) -> int:
    location = locate(args.store)
    cwd = cwd_option(args.cwd)
    with open_registry(location, SessionPages, create=False, page_size=args.page_size) as registry:
        filters = cast(Filters, {f.name: getattr(args, f.name) for f in FILTERS if f.option is not None})
        page = registry.list(cwd=cwd, cursor=args.cursor, **filters)
        pages = [page.sessions]
        while args.all and page.next_cursor is not UNSET:
            page = registry.list(cwd=cwd, cursor=page.next_cursor, **filters)
            pages.append(page.sessions)
        if not any(pages):
            hint_unknown_agent(args.agent)
        total = sum(map(len, pages))  # the read model counts by cwd and archived, not by the other filters
        counted = not any(value is not None and name != "archived" for name, value in filters.items())
        if not args.json and counted:
            model = registry.read_model
            live = model.count() if cwd is None else model.cwd_counts().get(cwd, 0)
            archived = 0 if args.archived == "include" else model.archived_count(cwd)
            total = {"include": live, "exclude": live - archived, "only": archived}[args.archived]
    if args.json:
        write_json([info for p in pages for info in p] if args.all else page)
        return 0
    count = sum(map(len, pages))
    values = {"cwd": cwd, **filters}
    where = "".join(
        f.describe(values[f.name]) for f in FILTERS if f.describe is not None and values[f.name] is not None
    )
    shown = f"{count:,} of {total:,}" if count < total else f"{count:,}"
    if not counted and page.next_cursor is not UNSET:
        shown = f"first {count:,}"  # no count by these filters without a walk: say only that more follow
    heading = f"{shown} session{'s' if (total if count < total else count) != 1 else ''}{where}"
    table = SessionsTable(pages, title=printable(heading))
    more = None
    if page.next_cursor is not UNSET:
        more = f"more sessions follow: --all lists every page, or --cursor {page.next_cursor} the next one"
    width = plain_width()
    if width is not None:  # a pipe or a file: the same characters rich would write, without loading rich
        write_lines(table.lines(width), width)
        if more is not None:
            print(more, flush=True)
        return 0
    console = stdout_console()
    console.print(table)
    if more is not None:
        console.print(more, markup=False, soft_wrap=True)
    return 0
