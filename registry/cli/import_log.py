"""``import FILE``: append the records ``export`` wrote (``-``: standard input).

Importing appends each record's event with its original event id and the version it had, one batch per run
of consecutive records of a session, in the file's order. So:

* a copy into an empty store has the same sessions, versions, event ids and order (and, on SQLite, the same
  positions) as the original; ``recorded_at`` is the time of the import, as the target store records it;
* importing a file twice, or a file that overlaps what the store holds, is harmless: the store recognises
  stored event ids and writes nothing for them (they are counted as already present);
* a session whose history in the store differs from the file's is refused (the store's expected-version check).

Partial imports: the whole file is read and checked before the store is even opened, so a bad line (not a
record, out of log order, a version gap, a repeated event id) imports nothing and names its line. If the store
refuses a record while writing, the import stops there: the records before that line stay imported (each batch
is atomic; nothing after it is written), and once the cause is fixed, importing the same file again completes
it without duplicating anything.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from typing import IO

import msgspec

from events.codec import decode_record_json
from events.errors import ConcurrencyError, EventIdConflict
from events.model import Message, RecordedEvent, SessionUpdated
from events.store import AppendRequest, EventStore
from registry.cli.errors import InputError
from registry.cli.stores import catch_up_read_model, open_log
from registry.cli.terminal import progress, stdout_console, write_json
from registry.cli.where import locate
from registry.commands import check_event, check_session_id
from registry.errors import InvalidParams

__all__ = ["ImportResult", "add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a file written by export ('-': standard input)")


class ImportResult(msgspec.Struct, rename="camel"):
    records: int
    imported: int
    already_present: int


@contextlib.contextmanager
def _source(path: str) -> Iterator[IO[bytes]]:
    """The file to import, seekable (standard input, ``-``, is spooled to a temporary file first)."""
    if path == "-":
        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.seek(0)
            yield spool
        return
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror}") from None
    with file:
        yield file


class _Kept(msgspec.Struct):
    """The messages ``export`` wrote beside a record that refers to some (absent: they were erased)."""

    messages: list[Message] | None = None


_kept = msgspec.json.Decoder(_Kept)
Line = tuple[int, RecordedEvent, list[Message] | None]
"""A record with its line number and the messages it refers to ([] : erased before the export; None: none)."""


def _records(lines: IO[bytes], name: str) -> Iterator[Line]:
    """Each record with its line number and messages; a line that is not a record raises ``InputError``."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = decode_record_json(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise InputError(
                f"{name}:{number}: not a record of `acp-registry export` ({exc}); nothing was imported"
            ) from None
        except RecursionError:
            raise InputError(f"{name}:{number}: a record nested too deep to read; nothing was imported") from None
        try:  # the rules every write path keeps: a file must not put into the log what no command could
            check_session_id(record.session_id, "sessionId")
            check_event(record.event)
        except InvalidParams as exc:
            raise InputError(f"{name}:{number}: {exc}; nothing was imported") from None
        messages: list[Message] | None = None
        if isinstance(record.event, SessionUpdated) and record.event.content is not None:
            try:
                messages = _kept.decode(line).messages or []
            except msgspec.DecodeError as exc:
                raise InputError(f"{name}:{number}: its messages do not read ({exc}); nothing was imported") from None
        yield number, record, messages


def _check(lines: IO[bytes], name: str) -> int:
    """Read the whole file before writing anything; returns how many records it holds."""
    last = 0
    versions: dict[str, int] = {}
    ids: set[uuid.UUID] = set()
    count = 0
    for number, record, _ in _records(lines, name):
        where = f"{name}:{number}:"
        if record.position <= last:
            raise InputError(
                f"{where} position {record.position} does not follow {last} (records must be in log order)"
            )
        due = versions.get(record.session_id)
        if due is not None and record.version != due + 1:
            raise InputError(
                f"{where} session {record.session_id!r} has version {record.version} where {due + 1} was due"
            )
        if record.event_id in ids:
            raise InputError(f"{where} event id {record.event_id} appears twice in the file")
        ids.add(record.event_id)
        last, versions[record.session_id] = record.position, record.version
        count += 1
    return count


def _runs(lines: IO[bytes], name: str) -> Iterator[list[Line]]:
    """Consecutive records of one session, as they follow each other in the file."""
    run: list[Line] = []
    for line in _records(lines, name):
        if run and run[-1][1].session_id != line[1].session_id:
            yield run
            run = []
        run.append(line)
    if run:
        yield run


_BATCH_RECORDS = 5_000  # records one transaction takes at most


def _batches(runs: Iterator[list[Line]]) -> Iterator[list[list[Line]]]:
    """Runs gathered into batches of about ``_BATCH_RECORDS`` records, each written in one transaction."""
    batch: list[list[Line]] = []
    size = 0
    for run in runs:
        batch.append(run)
        size += len(run)
        if size >= _BATCH_RECORDS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _content(run: list[Line]) -> list[list[Message] | None] | None:
    content = [messages for _, _, messages in run]
    return content if any(messages is not None for messages in content) else None


def _request(run: list[Line]) -> AppendRequest:
    first = run[0][1]
    return AppendRequest(
        first.session_id,
        [record.event for _, record, _ in run],
        first.version - 1,
        [record.event_id for _, record, _ in run],
        _content(run),
    )


def _append(store: EventStore, run: list[Line]) -> list[int]:
    """Append a run with its event ids at its versions; returns the positions (original ones when stored)."""
    first = run[0][1]
    events = [record.event for _, record, _ in run]
    ids = [record.event_id for _, record, _ in run]
    try:
        return store.append(first.session_id, events, first.version - 1, event_ids=ids, content=_content(run))
    except EventIdConflict:
        if len(run) == 1:
            raise
    # Part of the run is stored already (an earlier export of a session that went on): one record at a time.
    return [position for one in run for position in _append(store, [one])]


def run(args: argparse.Namespace) -> int:
    name = "<stdin>" if args.file == "-" else args.file
    location = locate(args.store)
    with _source(args.file) as lines:
        total = _check(lines, name)
        lines.seek(0)
        imported = present = 0
        with open_log(location, create=True) as store, progress("importing", total) as report:
            for runs in _batches(_runs(lines, name)):
                head = store.head()
                try:  # many sessions in one transaction: one commit (atomic: all of them or none)
                    written = store.append_batch([_request(run) for run in runs])
                except (ConcurrencyError, EventIdConflict):
                    written = []
                    for run in runs:  # one at a time, to name the record the store refuses
                        number, first, _ = run[0]
                        try:
                            written.append(_append(store, run))
                        except (ConcurrencyError, EventIdConflict) as exc:
                            before = imported + sum(1 for done in written for position in done if position > head)
                            what = f"{before} events before it were imported" if before else "nothing was imported"
                            raise InputError(
                                f"{name}:{number}: the store refused session {first.session_id!r} version "
                                f"{first.version} ({exc}); {what}"
                            ) from None
                for positions in written:
                    new = sum(1 for position in positions if position > head)
                    imported += new
                    present += len(positions) - new
                report(imported + present)
            catch_up_read_model(store)
    result = ImportResult(total, imported, present)
    if args.json:
        write_json(result)
    else:
        stdout_console().print(
            f"imported {imported} events ({present} already present) from {name} into {location.url}",
            markup=False,
            soft_wrap=True,
        )
    return 0
