"""Time travel: the registry's state as of a point of the log, and ``session/list`` pages cut from it.

``fold_log`` is the one fold ``replay``, ``stats``, ``verify`` and ``demo`` share: the log from its start into a
fresh ``Projection`` (the same fold that serves ``session/list``). ``list_pages`` cuts pages the way the registry
cuts them, with the cursors the registry would have issued then: a walk started at that position continues from
them on the live registry while it is within its window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import NamedTuple

from events.model import RecordedEvent
from events.store import EventStore
from registry.cursor import Cursor, CursorCodec
from registry.filters import ListFilter
from registry.model import ListSessionsResult, session_info, sort_key
from registry.projection import Projection

__all__ = ["LogFold", "fold_log", "list_pages"]


class LogFold(NamedTuple):
    projection: Projection
    events: int
    kinds: Counter[str]
    """Events read, by type name."""


def fold_log(
    store: EventStore, *, stop: Callable[[RecordedEvent], bool] | None = None, report: Callable[[int], None]
) -> LogFold:
    """Fold the log from its start into a fresh projection, up to the first record ``stop`` accepts.

    ``report`` is told the last position read every 1024 events and once at the end.
    """
    projection = Projection(window=0)
    kinds: Counter[str] = Counter()

    def records() -> Iterator[RecordedEvent]:
        for count, record in enumerate(store.iter_events(0), start=1):
            if stop is not None and stop(record):
                return
            kinds[type(record.event).__name__] += 1
            if count % 1024 == 0:  # positions need not be contiguous (PostgreSQL): count the events instead
                report(record.position)
            yield record

    events = projection.load(records())
    report(projection.position)
    return LogFold(projection, events, kinds)


def list_pages(
    projection: Projection, codec: CursorCodec, *, cwd: str | None, page_size: int
) -> Iterator[ListSessionsResult]:
    """Every ``session/list`` page as of the projection's position, each with the cursor to the next, cut one
    at a time as the caller asks for it (the first page always comes, empty when no session is live)."""
    position, where = projection.position, ListFilter(cwd=cwd)
    after = None
    while True:
        page = projection.page(as_of=position, after=after, where=where, limit=page_size)
        result = ListSessionsResult([session_info(state) for state in page.states])
        if page.more:
            after = sort_key(page.states[-1])
            result.next_cursor = codec.encode(Cursor(position, *after), where)
        yield result
        if not page.more:
            return
