"""``show``: one session's current info (its ``SessionInfo``) and what the registry knows besides: its agent,
whether it is archived, the session it was forked from and the sessions forked from it."""

from __future__ import annotations

import argparse

from registry.cli.errors import InputError
from registry.cli.stores import locate, open_registry
from registry.cli.tables import SessionTable
from registry.cli.terminal import stdout_console, write_json
from registry.model import SessionInfo, session_info

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="the session id")


def run(args: argparse.Namespace) -> int:
    with open_registry(locate(args.store), create=False, follow=False) as registry:
        state = registry.state(args.session)
        if state is None:
            raise InputError(f"no session {args.session!r} in this store")
        if state.deleted:
            raise InputError(
                f"session {args.session!r} was deleted at position {state.position} "
                f"(acp-registry history {args.session} shows its events)"
            )
        info: SessionInfo = session_info(state, additional_directories=registry.additional_directories)
        forks = [] if args.json else registry.forks(args.session)
    if args.json:
        write_json(info)
    else:
        stdout_console().print(SessionTable(info, state, forks))
    return 0
