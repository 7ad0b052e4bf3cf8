"""``unarchive``: bring an archived session back into default lists (``session/unarchive``). Idempotent."""

from __future__ import annotations

import argparse

from registry.cli.archive import set_archived

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session", metavar="SESSION", help="the session id, the agent's own id, or a unique prefix of either"
    )


def run(args: argparse.Namespace) -> int:
    return set_archived(args, False)
