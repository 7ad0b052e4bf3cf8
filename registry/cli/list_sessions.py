"""``list``: the ``session/list`` view, one page or every page (``--all``), as a client sees it.

The table's heading says how many sessions it shows of how many there are (``50 of 94,912 sessions``, in a cwd
too): the read model keeps the live count, and a cwd's count is a pass over its cwd index (no session is decoded).
"""

from __future__ import annotations

import argparse

from msgspec import UNSET

from registry.cli.options import cwd_option, page_size
from registry.cli.stores import locate, open_registry
from registry.cli.tables import SessionsTable
from registry.cli.terminal import printable, stdout_console, write_json

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cwd", metavar="DIR", help="only sessions whose cwd is DIR (relative: from here)")
    parser.add_argument("--all", action="store_true", help="every page (--json: one array of SessionInfo)")
    parser.add_argument("--cursor", help="the page after this nextCursor")
    parser.add_argument("--page-size", type=page_size, default=50, metavar="N", help="sessions per page (50)")


def run(args: argparse.Namespace) -> int:
    location = locate(args.store)
    cwd = cwd_option(args.cwd)
    with open_registry(location, create=False, follow=False, page_size=args.page_size) as registry:
        page = registry.list(cwd=cwd, cursor=args.cursor)
        pages = [page.sessions]
        while args.all and page.next_cursor is not UNSET:
            page = registry.list(cwd=cwd, cursor=page.next_cursor)
            pages.append(page.sessions)
        if not args.json:
            model = registry.read_model
            total = model.count() if cwd is None else model.cwd_counts().get(cwd, 0)
    if args.json:
        write_json([info for p in pages for info in p] if args.all else page)
        return 0
    console = stdout_console()
    count = sum(map(len, pages))
    where = "" if cwd is None else f" in {cwd}"
    shown = f"{count:,} of {total:,}" if count < total else f"{count:,}"
    heading = f"{shown} session{'s' if (total if count < total else count) != 1 else ''}{where}"
    console.print(SessionsTable(pages, title=printable(heading)))
    if page.next_cursor is not UNSET:
        console.print(
            f"more sessions follow: --all lists every page, or --cursor {page.next_cursor} the next one",
            markup=False,
            soft_wrap=True,
        )
    return 0
