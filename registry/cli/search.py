"""``search``: find sessions by what was said in them, across every agent - best first, with the passages that
matched.

QUERY is words (all must match), ``"exact phrases"`` and ``prefix*``; code-shaped terms (``snake_case``,
``foo.bar``, ``path/to/file.py``, ``CamelCase``) match as they read; case and accents are ignored. On a terminal
each hit is a session (its id, agent, when, title) with its matching passages, the matches in bold; ``--json``
prints ``{"hits": [{"sessionId", "agent", "cwd", "title", "updatedAt", "snippets": [{"role", "text"}]}, ...]}``,
best first (the matches in ``**``), and ``nextCursor`` when more follow. No match is ``{"hits": []}`` and exit 0.
"""

from __future__ import annotations

import argparse
import sys

from registry.agents import known_name
from registry.cli.options import cwd_option, time_option
from registry.cli.stores import open_registry
from registry.cli.terminal import plain_width, printable, stdout_console, write_json
from registry.cli.where import locate
from registry.filters import ARCHIVED_FILTERS
from registry.limits import MAX_SEARCH_HITS
from registry.service import SessionRegistry

__all__ = ["add_arguments", "run"]


def _limit(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_SEARCH_HITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hits from 1 to {MAX_SEARCH_HITS}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", metavar="QUERY", help='words, "exact phrases" and prefix* (all must match)')
    parser.add_argument(
        "--agent", metavar="NAME", type=known_name, help="only this agent's sessions (codex, claude-code, ...)"
    )
    parser.add_argument("--cwd", metavar="DIR", help="only sessions whose cwd is DIR (relative: from here)")
    parser.add_argument(
        "--archived",
        choices=ARCHIVED_FILTERS,
        default="exclude",
        help="archived sessions: left out (exclude, the default), searched too (include), or only they (only)",
    )
    parser.add_argument(
        "--since", metavar="T", type=time_option, help="matches said at or after T (2026-12-01, an RFC 3339 time, 7d)"
    )
    parser.add_argument("--until", metavar="T", type=time_option, help="matches said at or before T")
    parser.add_argument("--limit", metavar="N", type=_limit, default=20, help="sessions to show (20)")
    parser.add_argument("--cursor", help="the page of hits after this nextCursor (with the same query and filters)")


def run(args: argparse.Namespace) -> int:
    with open_registry(locate(args.store), SessionRegistry, create=False, follow=False) as registry:
        page = registry.search(
            args.query,
            agent=args.agent,
            cwd=cwd_option(args.cwd),
            archived=args.archived,
            since=args.since,
            until=args.until,
            limit=args.limit,
            cursor=args.cursor,
        )
    if args.json:
        document: dict[str, object] = {"hits": page.hits}
        if page.next_cursor is not None:
            document["nextCursor"] = page.next_cursor
        write_json(document)
        return 0
    if not page.hits:
        print(f"no session matches {args.query!r}", file=sys.stderr)
        return 0
    if plain_width() is not None:  # a pipe or a file: plain lines, without loading rich
        for hit in page.hits:
            head = "  ".join(printable(part) for part in (hit.session_id, hit.agent or "-", hit.updated_at or "-"))
            print(f"{head}  {printable(hit.title or '')}")
            for snippet in hit.snippets:
                print(f"    {snippet.role}: {printable(snippet.text)}")
    else:
        from rich.table import Table  # noqa: PLC0415 - a terminal only
        from rich.text import Text  # noqa: PLC0415

        table = Table(show_lines=True, title=f"sessions matching {printable(args.query)!r}", title_justify="left")
        table.add_column("session", overflow="fold", max_width=38)
        table.add_column("agent / updated")
        table.add_column("title and what matched", ratio=1)
        for hit in page.hits:
            text = Text(printable(hit.title or "(no title)"), style="bold")
            for snippet in hit.snippets:
                text.append(f"\n{snippet.role}: ", style="dim")
                for n, part in enumerate(printable(snippet.text).split("**")):
                    text.append(part, style="bold yellow" if n % 2 else "")
            table.add_row(printable(hit.session_id), f"{hit.agent or '-'}\n{hit.updated_at or '-'}", text)
        stdout_console().print(table)
    if page.next_cursor is not None:
        print(f"more sessions match: --cursor {page.next_cursor} shows the next ones", file=sys.stderr)
    return 0
