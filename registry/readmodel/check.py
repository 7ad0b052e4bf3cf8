"""Checking what is derived from a log against the log: the read model and the kept snapshots.

One pass folds the log from its start into a fresh ``Projection`` (the reference fold, trusting nothing derived).
On the way it compares each kept snapshot at its position (a snapshot that cannot be read is a mismatch too),
and at the read model's checkpoint every session, the live count and the list order (walked page by page, as
``session/list`` reads it). Each disagreement is a ``Mismatch`` naming the position and the session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from registry.model import sort_key
from registry.projection import Projection, paused_gc
from registry.readmodel import ReadModel
from registry.snapshot import SnapshotError, read_snapshot, snapshots

if TYPE_CHECKING:
    from events.store import EventStore

__all__ = ["Mismatch", "ReadModelCheck", "check_read_model"]


class Mismatch(NamedTuple):
    position: int
    session_id: str | None
    problem: str


class ReadModelCheck(NamedTuple):
    kind: str
    checkpoint: int
    floor: int
    sessions: int
    snapshots: int
    """Kept snapshots compared."""
    mismatches: list[Mismatch]


def check_read_model(
    store: EventStore, read_model: ReadModel, *, report: Callable[[int], None] | None = None
) -> ReadModelCheck:
    """Compare ``read_model`` with the fold of ``store``'s log up to its checkpoint (without catching it up)."""
    checkpoint = read_model.position
    floor = read_model.window_floor()
    head = store.head()
    problems: list[Mismatch] = []
    for position, snapshot_path in snapshots(store):  # derived data that remembers the log reaching further: a cut tail
        if position > head:
            problems.append(
                Mismatch(
                    position,
                    None,
                    f"kept snapshot {snapshot_path} reflects position {position}, beyond the log's head"
                    f" ({head}): records at the log's end were removed",
                )
            )
    if checkpoint > head:
        problems.append(
            Mismatch(
                checkpoint,
                None,
                f"the read model's checkpoint is beyond the log's head ({head}): records at the log's end were removed",
            )
        )
        return ReadModelCheck(read_model.kind, checkpoint, floor, 0, 0, problems)
    reference = Projection(window=0)
    kept_snapshots = [(position, path) for position, path in snapshots(store) if position <= checkpoint]
    with paused_gc():
        for stop, path in [*sorted(kept_snapshots), (checkpoint, None)]:
            for count, entry in enumerate(store.scan(reference.position, until=stop)):
                reference.apply(entry)
                if report is not None and count % 4096 == 0:
                    report(entry.position)
            if path is not None:
                problems.extend(_compare_snapshot(store, path, reference))
    expected = reference.states()
    found = {state.session_id: state for state in read_model.states()}
    for session_id in sorted(expected.keys() | found.keys()):
        folded, kept = expected.get(session_id), found.get(session_id)
        if folded == kept:
            continue
        if kept is None:
            why = "is missing from the read model"
        elif folded is None:
            why = "is in the read model but not in the log"
        else:
            why = "differs between the read model and the fold of the log"
        problems.append(Mismatch(checkpoint, session_id, f"the session {why}"))
    live = len(reference)
    if read_model.count() != live:
        problems.append(
            Mismatch(checkpoint, None, f"the read model counts {read_model.count()} live sessions, the log {live}")
        )
    if not problems:
        order = [s.session_id for s in reference.sessions()]
        walked: list[str] = []
        after = None
        while True:
            page = read_model.page(as_of=checkpoint, after=after, cwd=None, limit=1000, archived="include")
            walked.extend(s.session_id for s in page.states)
            if not page.more:
                break
            after = sort_key(page.states[-1])
        if walked != order:
            first = next(
                (i for i, (a, b) in enumerate(zip(walked, order, strict=False)) if a != b), min(len(walked), len(order))
            )
            problems.append(
                Mismatch(checkpoint, None, f"the read model's list order departs from the log's at entry {first}")
            )
    return ReadModelCheck(read_model.kind, checkpoint, floor, len(expected), len(kept_snapshots), problems)


def _compare_snapshot(store: EventStore, path: Path, reference: Projection) -> list[Mismatch]:
    position = reference.position
    try:
        snapshot = read_snapshot(path, store)
    except SnapshotError as exc:
        return [Mismatch(position, None, f"kept snapshot {path} {exc}")]
    kept = {state.session_id: state for state in snapshot.sessions}
    expected = reference.states()
    return [
        Mismatch(position, session_id, f"kept snapshot {path}: the session differs from the fold of the log")
        for session_id in sorted(expected.keys() | kept.keys())
        if expected.get(session_id) != kept.get(session_id)
    ]
