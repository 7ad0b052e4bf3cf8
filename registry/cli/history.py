"""``history``: every event of one session (deleted ones too), with what each changed."""

from __future__ import annotations

import argparse

from events.codec import encode_record_json
from registry.cli.errors import InputError
from registry.cli.stores import locate, open_log
from registry.cli.tables import HistoryTable
from registry.cli.terminal import stdout_console, write_json_line

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="the session id (deleted sessions too)")


def run(args: argparse.Namespace) -> int:
    with open_log(locate(args.store), create=False) as store:
        records = store.read_stream(args.session)
    if not records:
        raise InputError(f"no session {args.session!r} in this store")
    if args.json:
        for record in records:
            write_json_line(encode_record_json(record))
        return 0
    stdout_console().print(HistoryTable(args.session, records))
    return 0
