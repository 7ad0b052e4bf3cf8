"""``archive``: hide a session from default lists (``session/archive``); its id and history stay. Idempotent."""

from __future__ import annotations

import argparse

from registry.cli.ids import resolve_session
from registry.cli.stores import locate, open_registry
from registry.cli.terminal import printable, stdout_console, write_json

__all__ = ["add_arguments", "run", "set_archived"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session", metavar="SESSION", help="the session id, the agent's own id, or a unique prefix of either"
    )


def set_archived(args: argparse.Namespace, archived: bool) -> int:
    """``archive`` and ``unarchive``: the one write, then what the session is now."""
    with open_registry(locate(args.store), create=False, follow=False) as registry:
        session_id = resolve_session(registry, args.session)
        if archived:
            registry.archive(session_id)
        else:
            registry.unarchive(session_id)
        info = registry.get(session_id)
    if args.json:
        write_json(info)
    else:
        word = "archived" if archived else "listed again (unarchived)"
        stdout_console().print(printable(f"{session_id}: {word}"), markup=False, emoji=False, soft_wrap=True)
    return 0


def run(args: argparse.Namespace) -> int:
    return set_archived(args, True)
