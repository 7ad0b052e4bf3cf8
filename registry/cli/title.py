"""``title``: set a session's title as its user (``session/set_title``): generated titles never replace it."""

from __future__ import annotations

import argparse

from registry.cli.ids import resolve_session
from registry.cli.stores import locate, open_registry
from registry.cli.terminal import printable, stdout_console, write_json

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session", metavar="SESSION", help="the session id, the agent's own id, or a unique prefix of either"
    )
    parser.add_argument("title", metavar="TITLE", help="the new title (surrounding spaces are trimmed; not blank)")


def run(args: argparse.Namespace) -> int:
    with open_registry(locate(args.store), create=False, follow=False) as registry:
        session_id = resolve_session(registry, args.session)
        stored = registry.set_title(session_id, args.title)
    if args.json:
        write_json({"title": stored})
    else:
        stdout_console().print(printable(f"{session_id}: title {stored!r}"), markup=False, emoji=False, soft_wrap=True)
    return 0
