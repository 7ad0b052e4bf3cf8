"""``history``: every event of one session (deleted ones too), with what each changed.

SESSION is resolved as ``registry.cli.ids.resolve_session`` says (the agent's own id, a unique prefix). ``--json``
writes one record a line in the shape ``export`` writes, with its times - ``recordedAt`` and the event's ``at`` /
``updatedAt`` - in RFC 3339 as ``show`` gives them (``export`` keeps epoch nanoseconds: it is the interchange form).
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from events.codec import encode_record_json
from events.model import RecordedEvent
from registry.cli.ids import the_session
from registry.cli.session_tables import HistoryTable
from registry.cli.terminal import stdout_console, write_json_line
from registry.model import format_time

__all__ = ["add_arguments", "run"]

_TIMES = ("at", "updatedAt")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session",
        metavar="SESSION",
        help="the session id, the agent's own id, or a unique prefix of either (deleted sessions too)",
    )


def run(args: argparse.Namespace) -> int:
    with the_session(args) as (registry, session_id):
        records = registry.store.read_stream(session_id)
    if args.json:
        for record in records:
            write_json_line(_json(record))
        return 0
    stdout_console().print(HistoryTable(session_id, records))
    return 0


def _json(record: RecordedEvent) -> bytes:
    data: dict[str, Any] = msgspec.json.decode(encode_record_json(record))
    data["recordedAt"] = format_time(data["recordedAt"])
    event = data["event"]
    for key in _TIMES:
        if isinstance(event.get(key), int):
            event[key] = format_time(event[key])
    return msgspec.json.encode(data)
