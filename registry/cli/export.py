"""``export``: the log as JSON lines on stdout (``events.codec.encode_record_json``), one record a line; a record
that refers to kept messages carries them too, as ``"messages": [{"role", "text", "at"}, ...]`` (``at`` in epoch
ns, as the log keeps times), left out where a delete erased them. ``import`` reads both back.

The output is JSON already, so it offers no ``--json``. A corrupt record ends the export with exit 1, after
every record before it was written; ``acp-registry verify`` lists every problem.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

import msgspec

from events.codec import encode_record_json
from events.content import KeptMessage
from events.errors import CorruptEventError
from events.model import RecordedEvent, SessionUpdated
from events.store import EventStore
from registry.cli.errors import InputError, ProblemFound
from registry.cli.options import position
from registry.cli.stores import open_log
from registry.cli.terminal import progress
from registry.cli.where import locate

__all__ = ["add_arguments", "run"]

_BATCH = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="start", type=position, metavar="POSITION", help="only events after it")


def run(args: argparse.Namespace) -> int:
    with open_log(locate(args.store), create=False) as store:
        head = store.head()
        start = args.start or 0
        if start > head:
            raise InputError(f"--from {start} is beyond the log's head ({head})")
        out = sys.stdout.buffer
        count, last = 0, start
        with progress("exporting the log", head) as report:
            while True:
                try:
                    chunk = store.read(last, _BATCH)
                except CorruptEventError as exc:
                    for record in _before(store, last, exc.position):
                        out.write(_line(record, _kept(store, [record])) + b"\n")
                    out.flush()
                    raise ProblemFound(
                        f"{exc}; the export stops before it (acp-registry verify lists every problem)"
                    ) from None
                kept = _kept(store, chunk)
                out.writelines(_line(record, kept) + b"\n" for record in chunk)
                count += len(chunk)
                if len(chunk) < _BATCH:
                    break
                last = chunk[-1].position
                report(last)
        out.flush()
    if sys.stderr.isatty():
        print(f"exported {count} events", file=sys.stderr)
    return 0


_messages = msgspec.json.Encoder()


def _kept(store: EventStore, records: list[RecordedEvent]) -> dict[tuple[int, int], KeptMessage]:
    """The messages the records refer to, by (position, seq)."""
    keys = [
        (record.position, seq)
        for record in records
        if isinstance(record.event, SessionUpdated) and record.event.content is not None
        for seq in range(record.event.content.count)
    ]
    return store.messages_at(keys) if keys else {}


def _line(record: RecordedEvent, kept: dict[tuple[int, int], KeptMessage]) -> bytes:
    """A record's line: the record, and the messages it refers to where they are kept (all of them, or none)."""
    line = encode_record_json(record)
    event = record.event
    if not isinstance(event, SessionUpdated) or event.content is None:
        return line
    found = [kept.get((record.position, seq)) for seq in range(event.content.count)]
    if not found or any(m is None for m in found):
        return line  # erased by a delete: the record alone (import copies it as erased)
    messages = _messages.encode([m.message for m in found if m is not None])
    return line[:-1] + b',"messages":' + messages + b"}"


def _before(store: EventStore, last: int, bad: int) -> Iterator[RecordedEvent]:
    """The records after ``last`` up to the corrupt one at ``bad``, read one at a time."""
    while True:
        try:
            found = store.read(last, 1)
        except CorruptEventError:
            return
        if not found or found[0].position >= bad:
            return
        yield found[0]
        last = found[0].position
