"""Time travel: the projection exactly as it was at a log position, or at a moment.

``projection_at(backend, P)`` starts from the nearest kept snapshot at or before P (``registry.snapshot``) and folds
only the log after it, through the lean read path; while it folds it leaves snapshots behind at the positions
thinning keeps, so the next trip is short. ``position_at(store, moment)`` finds the last event recorded at or
before a time by bisecting the log (``recorded_at`` never decreases along positions while the clock does not go
backwards; where it did, the answer is a position whose neighbours straddle the moment).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, NamedTuple

from registry.backend import Backend
from registry.fold import Entry
from registry.projection import Projection, paused_gc
from registry.snapshot import EVERY, SnapshotError, kept_positions, load_snapshot, save_snapshot

if TYPE_CHECKING:
    from events.store import EventStore

__all__ = ["TimeTravel", "position_at", "projection_at"]

log = logging.getLogger(__name__)


class TimeTravel(NamedTuple):
    projection: Projection
    """The fold at ``projection.position`` (the last position at or before the one asked for)."""
    events: int
    """Events folded into it, from the log's start."""
    snapshot: int | None
    """The kept snapshot it started from (None: the log's start)."""


def projection_at(
    backend: Backend,
    position: int,
    *,
    report: Callable[[int], None] | None = None,
    keep: bool = True,
    every: int = EVERY,
) -> TimeTravel:
    """The fold of the log up to ``position``; ``report`` is called with the position reached now and then.

    ``keep``: save kept snapshots at the positions it passes that thinning wants (never on a read-only store).
    """
    store = backend.store
    projection = Projection(window=0)
    events = 0
    start = 0
    snapshot = load_snapshot(backend, position)
    if snapshot is not None:
        with paused_gc():
            projection.restore(snapshot.sessions, snapshot.position)
        events, start = snapshot.header.events, snapshot.position
    keep = keep and not store.read_only
    stops = sorted({t for t in kept_positions(store.head(), every) if start + every <= t < position} if keep else set())
    for stop in [*stops, position]:
        counted = 0
        for chunk in _chunks(store, projection.position, stop):
            counted += projection.load(chunk)
            if report is not None:
                report(projection.position)
        events += counted
        if stop != position and counted:
            try:
                save_snapshot(backend, projection.position, projection.states().values(), events=events, every=every)
            except (OSError, SnapshotError) as exc:
                log.warning("could not keep a snapshot at position %s: %s", projection.position, exc)
                keep = False
    return TimeTravel(projection, events, None if snapshot is None else snapshot.position)


def _chunks(store: EventStore, after: int, until: int, size: int = 50_000) -> Iterator[list[Entry]]:
    """The log (after, until] in lists (so progress can be reported between them; memory stays flat)."""
    entries: Iterator[Entry] = store.scan(after, until=until)
    while chunk := list(islice(entries, size)):
        yield chunk


def position_at(store: EventStore, moment: int) -> int:
    """The position of the last event recorded at or before ``moment`` (epoch ns; 0 when there is none)."""
    low, high = 0, store.head()  # invariant: the event at ``low`` (if any) was recorded at or before the moment
    while low < high:
        middle = (low + high + 1) // 2
        found = store.read(middle - 1, 1)  # the first event at or after ``middle``
        if not found or found[0].position > high:
            high = middle - 1
            continue
        record = found[0]
        if record.recorded_at <= moment:
            low = record.position
        else:
            high = middle - 1
    return low
