"""What ``stats`` and ``verify`` say about the projection snapshot beside a SQLite store: the only place the CLI
reads it. It is only read, never repaired (the next registry to open the store discards a bad one)."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from events.errors import CorruptEventError
from events.store import EventStore
from registry.cli.stores import snapshot_file
from registry.cli.terminal import progress
from registry.cli.timetravel import fold_log
from registry.model import format_time
from registry.snapshot import Snapshot, SnapshotError, read_snapshot

__all__ = ["Problem", "SnapshotInfo", "check_snapshot", "describe_snapshot"]


class Problem(msgspec.Struct, rename="camel"):
    position: int
    session_id: str | None
    problem: str


class SnapshotInfo(msgspec.Struct, rename="camel", omit_defaults=True):
    path: str
    position: int | None = None
    created_at: str | None = None
    age_seconds: float | None = None
    behind_head: int | None = None
    problem: str | None = None


def _against_log(snapshot: Snapshot, store: EventStore, head: int) -> str | None:
    """Why the snapshot is not this log's (None: it names this store and the event at its position)."""
    if snapshot.store_id != store.identity.store_id:
        return "belongs to another store"
    if snapshot.position > head:
        return f"reflects position {snapshot.position}, beyond the log's head ({head})"
    if snapshot.position > 0:
        try:
            at = store.read(snapshot.position - 1, 1)
        except CorruptEventError:
            return None  # the corrupt record is reported by the log check
        if not at or at[0].position != snapshot.position or at[0].event_id != snapshot.event_id:
            return f"does not match the log at position {snapshot.position} (a restored backup?)"
    return None


def _read(path: Path) -> Snapshot | str | None:
    """The snapshot, or why it cannot be used, or None when there is none."""
    if not path.exists():
        return None
    try:
        return read_snapshot(path)
    except SnapshotError as exc:
        return str(exc)


def describe_snapshot(store: EventStore, head: int) -> SnapshotInfo | None:
    """``stats``: where the snapshot is, how old and how far behind (None: this store keeps none)."""
    path = snapshot_file(store)
    if path is None:
        return None
    info = SnapshotInfo(str(path))
    found = _read(path)
    if found is None:
        info.problem = "there is no snapshot yet"
    elif isinstance(found, str):
        info.problem = found
    else:
        info.position = found.position
        info.created_at = format_time(found.created_at)
        info.age_seconds = round((time.time_ns() - found.created_at) / 1e9, 3)
        info.behind_head = head - found.position
        info.problem = _against_log(found, store, head)
    return info


def check_snapshot(store: EventStore, head: int) -> tuple[str, list[Problem]]:
    """``verify``: a note on the snapshot, and its problems (at its position)."""
    path = snapshot_file(store)
    if path is None:
        return "none (kept only beside a SQLite store)", []
    found = _read(path)
    if found is None:
        return "none yet", []
    if isinstance(found, str):
        return f"{path} is unusable", [Problem(0, None, f"snapshot {path} {found}")]
    position = found.position
    mismatch = _against_log(found, store, head)
    if mismatch is not None:
        return f"{path} is unusable", [Problem(position, None, f"snapshot {path} {mismatch}")]
    try:
        with progress("comparing the snapshot with the log", position) as report:
            folded = fold_log(store, stop=lambda record: record.position > position, report=report)
    except CorruptEventError as exc:
        return f"{path} was not compared with the log: the record at position {exc.position} is corrupt", []
    from_log = folded.projection.states()
    from_snapshot = {state.session_id: state for state in found.sessions}
    problems = []
    for session_id in sorted(from_log.keys() | from_snapshot.keys()):
        logged, kept = from_log.get(session_id), from_snapshot.get(session_id)
        if logged == kept:
            continue
        if kept is None:
            why = "is missing from the snapshot"
        elif logged is None:
            why = "is in the snapshot but not in the log"
        else:
            why = "differs between the snapshot and the log"
        problems.append(Problem(position, session_id, f"snapshot {path}: the session {why} at position {position}"))
    note = f"{path} agrees with the log at position {position}" if not problems else f"{path} disagrees with the log"
    return note, problems
