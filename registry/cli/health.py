"""``stats`` and ``verify``: how big the log is, and whether it (and what is derived from it) can be trusted.

``verify`` checks what every store promises (``events.verify.verify_log``: positions increase, versions run
1..n, every record decodes) and that the read model and each kept snapshot equal the fold of the log at their
positions (``registry.readmodel.check``): a disagreement is a problem, reported at its position. Derived data is
only read, never repaired here (``acp-registry rebuild`` refolds the read model).
"""

from __future__ import annotations

import argparse
import os

import msgspec

from events.errors import CorruptEventError
from events.sqlite import SqliteStore
from events.store import EventStore
from events.verify import verify_log
from registry.cli.stores import locate, open_log
from registry.cli.terminal import human_size, progress, stdout_console, write_json
from registry.cli.timetravel import fold_log
from registry.readmodel import open_read_model
from registry.readmodel.check import check_read_model
from registry.snapshot import snapshots

__all__ = ["stats", "verify"]


class Problem(msgspec.Struct, rename="camel"):
    position: int
    session_id: str | None
    problem: str


class ReadModelInfo(msgspec.Struct, rename="camel"):
    kind: str
    """``tables`` (in the store) or ``memory`` (folded at open)."""
    checkpoint: int
    floor: int
    """Walks that started at or after it are exact."""
    behind_head: int
    kept_snapshots: list[int]
    """Positions of the kept snapshots (time travel starts from the nearest)."""


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
    read_model: ReadModelInfo


class VerifyResult(msgspec.Struct, rename="camel"):
    healthy: bool
    events: int
    sessions: int
    head: int
    read_model: str
    problems: list[Problem]


def _log_bytes(store: EventStore) -> int | None:
    """A SQLite log's size on disk: the database file plus its write-ahead log."""
    if not isinstance(store, SqliteStore):
        return None
    return sum(os.path.getsize(p) for p in (store.path, store.path + "-wal") if os.path.exists(p))


def stats(args: argparse.Namespace) -> int:
    location = locate(args.store)
    with open_log(location, create=False) as store:
        head = store.head()
        with progress("reading the log", head) as report:
            folded = fold_log(store, report=report)
        read_model = open_read_model(store, catch_up=False)
        try:
            info = ReadModelInfo(
                read_model.kind,
                read_model.position,
                read_model.window_floor(),
                head - read_model.position,
                [position for position, _path in snapshots(store)],
            )
        finally:
            read_model.close()
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
        read_model=info,
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
    model = result.read_model
    summary.add_row(
        "read model",
        f"{model.kind}, at position {model.checkpoint} ({model.behind_head} behind the head), exact walks from "
        f"position {model.floor}",
    )
    kept = ", ".join(map(str, model.kept_snapshots)) or "none yet"
    summary.add_row("kept snapshots", Text(kept))
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


def _verify_derived(store: EventStore) -> tuple[str, list[Problem]]:
    """A note on the read model and the kept snapshots, and their problems."""
    read_model = open_read_model(store, catch_up=False)
    try:
        with progress("comparing the read model with the log", read_model.position) as report:
            checked = check_read_model(store, read_model, report=report)
    except CorruptEventError as exc:
        return f"not compared with the log: the record at position {exc.position} is corrupt", []
    finally:
        read_model.close()
    problems = [Problem(m.position, m.session_id, m.problem) for m in checked.mismatches]
    verdict = "agrees" if not problems else "disagrees"
    note = (
        f"{checked.kind} at position {checked.checkpoint} ({checked.sessions} sessions) and {checked.snapshots} kept "
        f"snapshot{'s' if checked.snapshots != 1 else ''}: {verdict} with the fold of the log"
    )
    return note, problems


def verify(args: argparse.Namespace) -> int:
    with open_log(locate(args.store), create=False) as store:
        head = store.head()
        with progress("verifying the log", head) as report:
            log = verify_log(store, progress=report)
        problems = [Problem(p.position, p.session_id, p.problem) for p in log.problems]
        note, derived = _verify_derived(store)
    problems.extend(derived)
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
    console.print(f"read model: {result.read_model}", markup=False, soft_wrap=True)
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
