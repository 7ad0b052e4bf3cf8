"""``delete``: delete a session for good, as ``session/delete`` does - and erase its conversation: when this
returns, no byte of its messages is left in the store's files (its id, cwd, title and times stay in the tombstone,
and ``history`` shows it). Deleting a deleted session erases what may be left and says so."""

from __future__ import annotations

import argparse

from registry.cli.ids import add_session, the_session
from registry.cli.terminal import printable, stdout_console, write_json
from registry.search.hits import wire_id

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session(parser)


def run(args: argparse.Namespace) -> int:
    with the_session(args) as (registry, session_id):
        before = registry.state(session_id)
        erased = len(registry.store.messages(session_id))
        registry.delete(session_id)
    was = before is not None and before.deleted
    if args.json:
        write_json({"sessionId": session_id if before is None else wire_id(before), "deleted": True, "erased": erased})
        return 0
    what = "was deleted already" if was else "deleted"
    words = f"; {erased:,} message{'s' if erased != 1 else ''} of its conversation erased" if erased else ""
    stdout_console().print(printable(f"{session_id}: {what}{words}"), markup=False, emoji=False, soft_wrap=True)
    return 0
