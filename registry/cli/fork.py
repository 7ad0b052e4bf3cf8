"""``fork``: a new session made from an existing one as of a log position (``session/fork``).

Only a reference to the source is recorded; the fork's history is the source's up to that position, then its own
(``history`` and ``show`` name the parent).
"""

from __future__ import annotations

import argparse

from registry.cli.ids import add_session, the_session
from registry.cli.options import cwd_option
from registry.cli.terminal import printable, stdout_console, write_json

__all__ = ["add_arguments", "run"]


def _position(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a log position (an integer >= 1): {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session(parser, "the session to fork: its id, the agent's own id, or a unique prefix")
    parser.add_argument("--cwd", metavar="DIR", help="the fork's cwd (default: the source's; relative: from here)")
    parser.add_argument("--id", dest="new_id", metavar="ID", help="the fork's session id (default: a new UUID)")
    parser.add_argument(
        "--at", type=_position, metavar="POSITION", help="fork as of this log position (default: the source's last)"
    )
    parser.add_argument("--agent", metavar="NAME", help="the agent the fork belongs to (default: the source's)")


def run(args: argparse.Namespace) -> int:
    with the_session(args) as (registry, source):
        cwd = cwd_option(args.cwd)
        if cwd is None:
            cwd = registry.get(source).cwd
        info = registry.fork(source, cwd, session_id=args.new_id, at_position=args.at, agent=args.agent)
        state = registry.state(info.session_id)
    if args.json:
        write_json(info)
    else:
        parent = state.parent if state is not None else None
        where = "" if parent is None else f" as of position {parent.position}"
        stdout_console().print(
            printable(f"{info.session_id}: forked from {source}{where}"),
            markup=False,
            emoji=False,
            soft_wrap=True,
        )
    return 0
