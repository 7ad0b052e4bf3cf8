"""``show``: one session's current info (its ``SessionInfo``) and what the registry knows besides: its agent,
whether it is archived, the session it was forked from and the sessions forked from it.

SESSION is resolved as ``registry.cli.ids.resolve_session`` says: the stored id, the agent's own id, or a unique
prefix of either.
"""

from __future__ import annotations

import argparse

from registry.cli.errors import InputError
from registry.cli.ids import resolve_session
from registry.cli.stores import locate, open_registry
from registry.cli.tables import SessionTable
from registry.cli.terminal import stdout_console, write_json
from registry.model import SessionInfo, session_info

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session", metavar="SESSION", help="the session id, the agent's own id, or a unique prefix of either"
    )


def run(args: argparse.Namespace) -> int:
    with open_registry(locate(args.store), create=False, follow=False) as registry:
        session_id = resolve_session(registry, args.session)
        state = registry.state(session_id)
        assert state is not None  # resolved: it exists
        if state.deleted:
            raise InputError(
                f"session {session_id!r} was deleted at position {state.position} "
                f"(acp-registry history {session_id} shows its events)"
            )
        info: SessionInfo = session_info(state, additional_directories=registry.additional_directories)
        forks = [] if args.json else registry.forks(session_id)
    if args.json:
        write_json(info)
    else:
        stdout_console().print(SessionTable(info, state, forks))
    return 0
