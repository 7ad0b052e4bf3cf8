"""``stats``: how big the log is - events by type, sessions live and deleted, per cwd, bytes, the read model."""

from __future__ import annotations

import argparse

import msgspec

from registry.backends import backend_for
from registry.cli.derived import ReadModelInfo, describe_derived
from registry.cli.stores import open_log
from registry.cli.tables import escaped
from registry.cli.terminal import human_size, progress, stdout_console, write_json
from registry.cli.timetravel import fold_log
from registry.cli.where import locate
from registry.evidence import IntegrityEvent, describe

__all__ = ["StoreStats", "add_arguments", "run"]


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
    integrity_events: list[IntegrityEvent]
    """Findings of a log shorter than what was derived from it, not yet acknowledged (``verify --acknowledge``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options of its own (``--store``, ``--json``)."""


def run(args: argparse.Namespace) -> int:
    location = locate(args.store)
    with open_log(location, create=False) as store:
        head = store.head()
        with progress("reading the log", head) as report:
            folded = fold_log(store, report=report)
        backend = backend_for(store)
        derived = describe_derived(backend, head)
        log_bytes = backend.log_bytes()
        evidence = [event for event in backend.integrity_events() if not event.acknowledged]
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
        read_model=derived,
        integrity_events=evidence,
    )
    if args.json:
        write_json(result)
    else:
        _print(result)
    return 0


def _read_model_line(model: ReadModelInfo) -> str:
    kept = ", ".join(map(str, model.kept_snapshots)) or "none yet"
    return (
        f"{model.kind}, at position {model.checkpoint} ({model.behind_head} behind the head), exact walks from "
        f"position {model.floor}; kept snapshots: {kept}"
    )


def _print(result: StoreStats) -> None:
    from rich.table import Table  # noqa: PLC0415

    summary = Table(show_header=False, title=escaped(result.store), title_justify="left")
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")
    kinds = ", ".join(f"{kind} {count}" for kind, count in result.events_by_type.items())
    summary.add_row("events", f"{result.events}" + (f" ({kinds})" if kinds else ""))
    summary.add_row("head position", str(result.head))
    summary.add_row("sessions", f"{result.sessions_live} live, {result.sessions_deleted} deleted")
    summary.add_row("log size", "-" if result.log_bytes is None else human_size(result.log_bytes))
    summary.add_row("read model", escaped(_read_model_line(result.read_model)))
    for event in result.integrity_events:
        summary.add_row("integrity", escaped(describe(event) + " (acp-registry verify --acknowledge)"), style="red")
    console = stdout_console()
    console.print(summary)
    if result.cwds:
        table = Table(title="sessions per cwd", title_justify="left")
        table.add_column("cwd", overflow="fold")
        table.add_column("live", justify="right")
        table.add_column("deleted", justify="right")
        for count in result.cwds:
            table.add_row(escaped(count.cwd), str(count.live), str(count.deleted))
        console.print(table)
