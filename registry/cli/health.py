"""``stats`` and ``verify``: how big the log is, and whether it (and the snapshot beside it) can be trusted.

``verify`` checks what every store promises (``events.verify.verify_log``: positions increase, versions run
1..n, every record decodes) and that the projection snapshot a registry would start from is the log's own and
equals the fold of the log up to its position: a snapshot that disagrees with the log is a problem, reported
at the snapshot's position. The snapshot is only read, never repaired (the next registry to open the store
discards a bad one and writes a new one).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import msgspec

from events.errors import CorruptEventError
from events.sqlite import SqliteStore
from events.store import EventStore
from events.verify import verify_log
from registry.cli.stores import locate, open_log, snapshot_file
from registry.cli.terminal import human_age, human_size, progress, stdout_console, write_json
from registry.cli.timetravel import fold_log
from registry.model import format_time
from registry.snapshot import Snapshot, SnapshotError, read_snapshot

__all__ = ["stats", "verify"]


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


class CwdCount(msgspec.Struct):
    cwd: str
    live: int
    deleted: int


class StoreStats(msgspec.Struct, rename="camel"):
    store: str
    head: int
    events: int
    events_by_type: dict[str, int]
    sessions_live: int
    sessions_deleted: int
    cwds: list[CwdCount]
    log_bytes: int | None
    snapshot: SnapshotInfo | None


class VerifyResult(msgspec.Struct, rename="camel"):
    healthy: bool
    events: int
    sessions: int
    head: int
    snapshot: str
    problems: list[Problem]


def _log_bytes(store: EventStore) -> int | None:
    """A SQLite log's size on disk: the database file plus its write-ahead log."""
    if not isinstance(store, SqliteStore):
        return None
    return sum(os.path.getsize(p) for p in (store.path, store.path + "-wal") if os.path.exists(p))


def _snapshot_against_log(snapshot: Snapshot, store: EventStore, head: int) -> str | None:
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


def stats(args: argparse.Namespace) -> int:
    location = locate(args.store)
    with open_log(location, create=False) as store:
        head = store.head()
        with progress("reading the log", head) as report:
            folded = fold_log(store, report=report)
        snapshot_info = None
        path = snapshot_file(store)
        if path is not None:
            snapshot_info = SnapshotInfo(str(path))
            found = _read(path)
            if found is None:
                snapshot_info.problem = "there is no snapshot yet"
            elif isinstance(found, str):
                snapshot_info.problem = found
            else:
                snapshot_info.position = found.position
                snapshot_info.created_at = format_time(found.created_at)
                snapshot_info.age_seconds = round((time.time_ns() - found.created_at) / 1e9, 3)
                snapshot_info.behind_head = head - found.position
                snapshot_info.problem = _snapshot_against_log(found, store, head)
        log_bytes = _log_bytes(store)
    cwds: dict[str, CwdCount] = {}
    states = folded.projection.states().values()
    for state in states:
        count = cwds.setdefault(state.cwd, CwdCount(state.cwd, 0, 0))
        if state.deleted:
            count.deleted += 1
        else:
            count.live += 1
    result = StoreStats(
        store=location.url,
        head=head,
        events=folded.events,
        events_by_type=dict(sorted(folded.kinds.items())),
        sessions_live=len(folded.projection),
        sessions_deleted=sum(1 for s in states if s.deleted),
        cwds=sorted(cwds.values(), key=lambda c: (-c.live, -c.deleted, c.cwd)),
        log_bytes=log_bytes,
        snapshot=snapshot_info,
    )
    if args.json:
        write_json(result)
    else:
        _print_stats(result)
    return 0


def _print_stats(result: StoreStats) -> None:
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    summary = Table(show_header=False, title=result.store, title_justify="left")
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")
    kinds = ", ".join(f"{kind} {count}" for kind, count in result.events_by_type.items())
    summary.add_row("events", Text(f"{result.events}" + (f" ({kinds})" if kinds else "")))
    summary.add_row("head position", str(result.head))
    summary.add_row("sessions", f"{result.sessions_live} live, {result.sessions_deleted} deleted")
    summary.add_row("log size", "-" if result.log_bytes is None else human_size(result.log_bytes))
    snapshot = result.snapshot
    if snapshot is None:
        summary.add_row("snapshot", "none (kept only beside a SQLite store)")
    elif snapshot.position is None:
        summary.add_row("snapshot", Text(f"{snapshot.problem} ({snapshot.path})"))
    else:
        assert snapshot.age_seconds is not None
        text = (
            f"position {snapshot.position} ({snapshot.behind_head} behind the head), written "
            f"{human_age(snapshot.age_seconds)}" + (f"; unusable: it {snapshot.problem}" if snapshot.problem else "")
        )
        summary.add_row("snapshot", Text(text))
    console = stdout_console()
    console.print(summary)
    if result.cwds:
        table = Table(title="sessions per cwd", title_justify="left")
        table.add_column("cwd", overflow="fold")
        table.add_column("live", justify="right")
        table.add_column("deleted", justify="right")
        for count in result.cwds:
            table.add_row(Text(count.cwd), str(count.live), str(count.deleted))
        console.print(table)


def _verify_snapshot(store: EventStore, head: int) -> tuple[str, list[Problem]]:
    """A note on the snapshot, and its problems (at its position)."""
    path = snapshot_file(store)
    if path is None:
        return "none (kept only beside a SQLite store)", []
    found = _read(path)
    if found is None:
        return "none yet", []
    if isinstance(found, str):
        return f"{path} is unusable", [Problem(0, None, f"snapshot {path} {found}")]
    position = found.position
    mismatch = _snapshot_against_log(found, store, head)
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


def verify(args: argparse.Namespace) -> int:
    with open_log(locate(args.store), create=False) as store:
        head = store.head()
        with progress("verifying the log", head) as report:
            log = verify_log(store, progress=report)
        problems = [Problem(p.position, p.session_id, p.problem) for p in log.problems]
        note, snapshot_problems = _verify_snapshot(store, head)
    problems.extend(snapshot_problems)
    result = VerifyResult(not problems, log.events, log.sessions, log.head, note, problems)
    if args.json:
        write_json(result)
    else:
        _print_verify(result)
    return 0 if result.healthy else 1


def _print_verify(result: VerifyResult) -> None:
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    console = stdout_console()
    console.print(
        f"checked {result.events} events of {result.sessions} sessions up to position {result.head}", markup=False
    )
    console.print(f"snapshot: {result.snapshot}", markup=False, soft_wrap=True)
    if result.healthy:
        console.print("healthy: no problems found", style="green", markup=False)
        return
    table = Table(
        title=f"{len(result.problems)} problem{'s' if len(result.problems) != 1 else ''}", title_justify="left"
    )
    table.add_column("position", justify="right")
    table.add_column("session", no_wrap=True)
    table.add_column("problem", overflow="fold")
    for problem in result.problems:
        table.add_row(str(problem.position), Text(problem.session_id or "-"), Text(problem.problem))
    console.print(table)
