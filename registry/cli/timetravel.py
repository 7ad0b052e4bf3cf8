"""``replay --at POSITION|TIMESTAMP``: the list exactly as ``session/list`` would have answered then.

The log up to that point is folded into a fresh ``Projection`` (the same fold that serves ``session/list``), and
its pages are cut the way the registry cuts them, with the cursors the registry would have issued: a walk
started at that position continues from them on the live registry while it is within its window.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable, Iterator
from typing import NamedTuple

import msgspec

from events.model import RecordedEvent
from events.store import EventStore
from registry.cli.browse import cwd_option
from registry.cli.errors import InputError
from registry.cli.stores import locate, open_log
from registry.cli.terminal import progress, stdout_console, write_json
from registry.cli.views import sessions_table
from registry.cursor import Cursor, CursorCodec
from registry.errors import InvalidParams
from registry.model import ListSessionsResult, format_time, parse_time, session_info, sort_key
from registry.projection import Projection

__all__ = ["LogFold", "ReplayResult", "fold_log", "list_pages", "replay"]


class LogFold(NamedTuple):
    projection: Projection
    events: int
    kinds: Counter[str]
    """Events read, by type name."""


def fold_log(
    store: EventStore, *, stop: Callable[[RecordedEvent], bool] | None = None, report: Callable[[int], None]
) -> LogFold:
    """Fold the log from its start into a fresh projection, up to the first record ``stop`` accepts."""
    projection = Projection(window=0)
    kinds: Counter[str] = Counter()

    def records() -> Iterator[RecordedEvent]:
        for record in store.iter_events(0):
            if stop is not None and stop(record):
                return
            kinds[type(record.event).__name__] += 1
            if record.position % 1024 == 0:
                report(record.position)
            yield record

    events = projection.load(records())
    report(projection.position)
    return LogFold(projection, events, kinds)


def list_pages(
    projection: Projection, codec: CursorCodec, *, cwd: str | None, page_size: int
) -> list[ListSessionsResult]:
    """Every ``session/list`` page as of the projection's position, each with the cursor to the next."""
    position = projection.position
    pages: list[ListSessionsResult] = []
    after = None
    while True:
        page = projection.page(as_of=position, after=after, cwd=cwd, limit=page_size)
        result = ListSessionsResult([session_info(state) for state in page.states])
        pages.append(result)
        if not page.more:
            return pages
        after = sort_key(page.states[-1])
        result.next_cursor = codec.encode(Cursor(position, *after), cwd)


class ReplayResult(msgspec.Struct, rename="camel"):
    """``replay --json``: the log point, its counts, and the ``session/list`` pages then."""

    position: int
    head: int
    events: int
    sessions_created: int
    sessions_deleted: int
    sessions_live: int
    pages: list[ListSessionsResult]


def _point(text: str) -> tuple[int | None, int | None]:
    """``--at``: a log position (digits) or an RFC 3339 timestamp with a zone, as epoch ns."""
    if text.isdigit():
        return int(text), None
    try:
        return None, parse_time(text, field="--at")
    except InvalidParams as exc:
        raise InputError(f"{exc}; give a log position or a timestamp such as 2026-12-02T10:00:00Z") from None


def replay(args: argparse.Namespace) -> int:
    position, moment = _point(args.at)
    cwd = cwd_option(args.cwd)
    with open_log(locate(args.store), create=False) as store:
        head = store.head()
        if position is not None and position > head:
            raise InputError(f"--at {position} is beyond the log's head ({head})")
        target = head if position is None else position

        def stop(record: RecordedEvent) -> bool:
            return record.position > target if moment is None else record.recorded_at > moment

        with progress("replaying the log", target) as report:
            folded = fold_log(store, stop=stop, report=report)
        projection = folded.projection
        pages = list_pages(projection, CursorCodec(store.identity), cwd=cwd, page_size=args.page_size)
    states = projection.states().values()
    result = ReplayResult(
        position=projection.position,
        head=head,
        events=folded.events,
        sessions_created=len(states),
        sessions_deleted=sum(1 for s in states if s.deleted),
        sessions_live=len(projection),
        pages=pages,
    )
    if args.json:
        write_json(result)
        return 0
    console = stdout_console()
    when = "" if moment is None else f" (the last event recorded at or before {format_time(moment)})"
    console.print(f"session/list as of position {result.position} of {head}{when}", markup=False, soft_wrap=True)
    console.print(
        f"events {result.events} · sessions created {result.sessions_created} · deleted {result.sessions_deleted}"
        f" · live {result.sessions_live}",
        markup=False,
    )
    shown = [page.sessions for page in pages]
    note = f"{len(pages)} page{'s' if len(pages) != 1 else ''} of up to {args.page_size}"
    console.print(sessions_table(shown, title=note if result.sessions_live else None))
    return 0
