"""The benchmark harness (issue 7): one seeded history fed to our event log and to every baseline, grown
stage by stage, with ratios taken at the same history size in the same run.

    python -m benchmarks.run --quick          # 10k and 100k sessions; a few minutes on 2 cores
    python -m benchmarks.run --full           # 10k, 100k and 1M sessions (~5M events)
    python -m benchmarks.run --sizes 1000,5000 --jsonl-sizes 100,1000 --name try

Then the PostgreSQL part (``postgres_registry.py``: the registry on PostgreSQL beside raw psycopg, at 1k and 100k
sessions, 1M too with --full), which says it skipped when no server answers at --postgres-url; --no-postgres
leaves it out.

Writes ``benchmarks/results/<name>.json`` (figures and machine), ``<name>.md`` (ratio table) and
``<name>-growth.png`` (each cost against history size). Scratch files go to ``$BENCH_DIR`` or
``benchmarks/.work`` and are removed afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks import baselines, keys, postgres_registry, registry_bench
from benchmarks.args import DEFAULT_POSTGRES, bench_parser
from benchmarks.baselines import RawSqliteLog
from benchmarks.event_log import EventLogBench, ImportBench, subscription_latency
from benchmarks.figures import (
    Figure,
    Latency,
    Stopwatch,
    Timer,
    interleave,
    latency,
    rate_of,
    repeat_rate,
    throughput,
)
from benchmarks.generate import (
    DEFAULT_SEED,
    History,
    iter_histories,
    last_activity,
    working_directories,
    write_jsonl,
)
from benchmarks.machine import DISTURBED_CORES, CpuMeter, describe_machine
from benchmarks.plots import plot_growth
from benchmarks.report import JsonlPoint, Run, Stage, markdown, ratios
from events import Event, SessionDeleted, SessionUpdated

__all__ = ["MODES", "Settings", "main", "run", "write_results"]

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Settings:
    sizes: list[int]
    jsonl_sizes: list[int]
    durable_sessions: int = 500  # per stage: sessions appended as durable batches (cut to a tenth of small stages)
    durable_events: int = 500  # per stage: single events appended durably
    reconstruct: int = 2000  # aggregates eventsourcing's repository.get rebuilds per stage (uniform sample)
    subscription_events: int = 200
    chunk: int = 1000  # sessions per bulk-load step (one transaction for raw sqlite3 and eventsourcing)
    seed: int = DEFAULT_SEED
    plot: bool = True
    notes: list[str] = field(default_factory=list)
    postgres: postgres_registry.PostgresSettings | None = None  # None: no PostgreSQL part


MODES = {
    "quick": Settings(
        sizes=[10_000, 100_000], jsonl_sizes=[1_000, 10_000, 100_000], postgres=postgres_registry.MODES["quick"]
    ),
    "full": Settings(
        sizes=[10_000, 100_000, 1_000_000],
        jsonl_sizes=[1_000, 10_000, 100_000],
        postgres=postgres_registry.MODES["full"],
    ),
}


_NOTES = {
    keys.OURS_BATCH: "one session per transaction, synchronous=FULL",
    keys.ES_SAVE: "one aggregate per save (durable: the library keeps SQLite's synchronous=FULL)",
    keys.OURS_SINGLE: "one event per transaction, synchronous=FULL",
    keys.RAW_SINGLE: "one event per transaction, synchronous=FULL, no index",
    keys.FSYNC: "100 B written + fsync, taking turns with the appends",
    keys.ES_COMMAND: "repository.get + command + save",
    keys.OURS_IMPORT: "append_batch of 1000 sessions per call, synchronous=FULL",
}


class _Baseline(Protocol):
    """What the harness needs of the eventsourcing baseline (its module is optional: the bench extra)."""

    loaded: Stopwatch

    def load(self, histories: Sequence[History]) -> None: ...
    def saves(self) -> AbstractContextManager[Timer[History]]: ...
    def commands(self) -> AbstractContextManager[Timer[tuple[str, Event]]]: ...
    def read_notifications(self, batch: int = ...) -> int: ...
    def reconstruct(self, session_ids: Sequence[str]) -> int: ...
    def close(self) -> None: ...


def _open_eventsourcing(path: Path) -> _Baseline | None:
    try:
        from benchmarks.eventsourcing_baseline import EventsourcingLog  # noqa: PLC0415  (optional extra)
    except ImportError:
        return None
    return EventsourcingLog(path)


class _Reservoir:
    """A uniform sample of every session seen so far (Algorithm R): which aggregates to rebuild one by one."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.ids: list[str] = []
        self._size = size
        self._rng = rng
        self._seen = 0

    def offer(self, histories: Sequence[History]) -> None:
        for session_id, _ in histories:
            self._seen += 1
            if len(self.ids) < self._size:
                self.ids.append(session_id)
            elif (slot := self._rng.randrange(self._seen)) < self._size:
                self.ids[slot] = session_id


def _chunks(histories: Iterator[History], count: int, size: int) -> Iterator[list[History]]:
    """``count`` sessions from ``histories`` in lists of ``size``: memory stays bounded by one chunk."""
    left = count
    while left > 0:
        chunk = list(itertools.islice(histories, min(size, left)))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _single_events(sample: Sequence[History], count: int) -> list[tuple[str, Event]]:
    """``count`` activities on the sample's live sessions, a minute apart: recent sessions get the activity."""
    live = [(sid, last_activity(events)) for sid, events in sample if not isinstance(events[-1], SessionDeleted)]
    if not live:
        return []
    return [
        (sid, SessionUpdated(at=at + (n + 1) * 60_000_000_000, messages=1))
        for n, (sid, at) in zip(range(count), itertools.cycle(live), strict=False)
    ]


def _with_rate(figures: dict[str, Figure], key: str, measured: Latency, count: int) -> None:
    figures[key] = measured
    figures[keys.rate_key(key)] = rate_of(measured, count)


def _jsonl_for(points: Sequence[JsonlPoint], files: int) -> Latency | None:
    """The listing at this many files: measured when there is such a point, else scaled from the nearest
    (the listing reads every file, so its cost grows linearly; the figure says it was scaled)."""
    if not points:
        return None
    for point in points:
        if point.files == files:
            return point.listing
    nearest = min(points, key=lambda p: abs(p.files - files))
    return baselines.extrapolate(nearest.listing, nearest.files, files)


@dataclass
class _Logs:
    """Every log being compared, holding the same history, and what that history holds so far."""

    ours: EventLogBench
    imported: ImportBench  # the same bulk history, appended as an importer does (append_batch)
    raw: RawSqliteLog
    library: _Baseline | None
    sampled: _Reservoir
    sessions: int = 0
    live: int = 0
    events: int = 0

    def counted(self, histories: Sequence[History], extra_events: int = 0) -> None:
        self.sampled.offer(histories)
        self.sessions += len(histories)
        self.live += sum(not isinstance(events[-1], SessionDeleted) for _, events in histories)
        self.events += sum(len(events) for _, events in histories) + extra_events

    def close(self) -> None:
        self.ours.close()
        self.imported.close()
        self.raw.close()
        if self.library:
            self.library.close()


def _grow(
    logs: _Logs, chunks: Iterator[list[History]], figures: dict[str, Figure], advance: Callable[[int], None]
) -> None:
    """Bulk-load the next sessions into every log; the rates cover this stage's growth only."""
    ours, raw, library = logs.ours.loaded, logs.raw.inserted, logs.library.loaded if logs.library else None
    marks = [(watch.count, watch.seconds) for watch in (ours, raw, library) if watch is not None]
    imported = (logs.imported.loaded.count, logs.imported.loaded.seconds)
    for chunk in chunks:
        logs.ours.load(chunk)
        logs.imported.load(chunk)
        logs.raw.insert(chunk)
        if logs.library:
            logs.library.load(chunk)
        logs.counted(chunk)
        advance(len(chunk))
    figures[keys.OURS_LOAD] = throughput(ours.count - marks[0][0], ours.seconds - marks[0][1])
    figures[keys.RAW_INSERT] = throughput(raw.count - marks[1][0], raw.seconds - marks[1][1])
    if library:
        figures[keys.ES_BULK] = throughput(library.count - marks[2][0], library.seconds - marks[2][1])
    loaded = logs.imported.loaded
    figures[keys.OURS_IMPORT] = throughput(
        loaded.count - imported[0], loaded.seconds - imported[1], note=_NOTES[keys.OURS_IMPORT]
    )


def _durable(logs: _Logs, sample: list[History], singles: list[tuple[str, Event]], work: Path) -> dict[str, Figure]:
    """Durable appends. The same sessions and events go to every log, so they keep holding one history; the
    systems take turns item by item (with the raw fsync among them) so disk drift hits all alike."""
    figures: dict[str, Figure] = {}
    sample_events = sum(len(events) for _, events in sample)
    with contextlib.ExitStack() as stack:
        batches: dict[str, Timer[History]] = {keys.OURS_BATCH: stack.enter_context(logs.ours.durable_batches())}
        if logs.library:
            batches[keys.ES_SAVE] = stack.enter_context(logs.library.saves())
        for key, samples in interleave(batches, sample).items():
            _with_rate(figures, key, latency(samples, note=_NOTES[key]), sample_events)
    logs.raw.insert(sample)
    with contextlib.ExitStack() as stack:
        appends: dict[str, Timer[tuple[str, Event]]] = {
            keys.OURS_SINGLE: stack.enter_context(logs.ours.durable_appends()),
            keys.RAW_SINGLE: stack.enter_context(logs.raw.durable_inserts()),
            keys.FSYNC: stack.enter_context(baselines.fsync_timer(work)),
        }
        if logs.library:
            appends[keys.ES_COMMAND] = stack.enter_context(logs.library.commands())
        for key, samples in interleave(appends, singles).items():
            _with_rate(figures, key, latency(samples, note=_NOTES[key]), len(singles))
    logs.counted(sample, extra_events=len(singles))
    # Group commit, on the import store (the other logs keep holding one history): the same number of durable
    # single-event appends from one thread, then from eight.
    figures[keys.OURS_THREADS_1] = logs.imported.appenders(singles, 1)
    figures[keys.OURS_THREADS_8] = logs.imported.appenders(singles, 8)
    return figures


def _replay(logs: _Logs, figures: dict[str, Figure], advance: Callable[[], object]) -> None:
    """Read and decode the whole history from every log."""
    figures[keys.OURS_READ] = repeat_rate(logs.ours.read_all)
    figures[keys.OURS_SCAN] = repeat_rate(logs.ours.scan_all)
    advance()
    figures[keys.RAW_SCAN] = repeat_rate(logs.raw.scan)
    advance()
    if logs.library:
        figures[keys.ES_NOTIFICATIONS] = repeat_rate(logs.library.read_notifications)
        advance()
        start = time.perf_counter()
        replayed = logs.library.reconstruct(logs.sampled.ids)
        note = f"{len(logs.sampled.ids):,} aggregates sampled uniformly per size"
        figures[keys.ES_REPOSITORY] = throughput(replayed, time.perf_counter() - start, note=note)
        advance()


def run(name: str, settings: Settings, work: Path, progress: Progress | None = None) -> Run:
    """Run every measurement in ``work`` and return the results (nothing is written here)."""
    progress = progress or Progress(disable=True)
    started = time.perf_counter()
    meter = CpuMeter()
    machine = describe_machine()
    notes = list(settings.notes)
    largest = max(settings.sizes)

    # The floor: encoding a real page of this history's sessions, taken before the disk is busy.
    floor = baselines.page_encode_latency(_first_page(largest, settings.seed))

    library = _open_eventsourcing(work / "eventsourcing.db")
    if library is None:
        notes.append("eventsourcing is not installed (pip install -e '.[bench]'): its baselines were skipped.")
    logs = _Logs(
        ours=EventLogBench(work / "ours.db"),
        imported=ImportBench(work / "imported.db"),
        raw=RawSqliteLog(work / "raw.db"),
        library=library,
        sampled=_Reservoir(settings.reconstruct, random.Random(settings.seed + 1)),
    )
    stages: list[Stage] = []
    histories = iter_histories(largest, settings.seed)
    try:
        for size in sorted(settings.sizes):
            figures: dict[str, Figure] = {keys.PAGE_FLOOR: floor}
            durable = min(settings.durable_sessions, max(1, size // 10))
            bulk = max(0, size - logs.sessions - durable)
            task = progress.add_task(f"history → {size:,} sessions", total=bulk)
            _grow(logs, _chunks(histories, bulk, settings.chunk), figures, functools.partial(progress.advance, task))

            task = progress.add_task(f"durable appends at {size:,}", total=1)
            sample = list(itertools.islice(histories, durable))
            figures.update(_durable(logs, sample, _single_events(sample, settings.durable_events), work))
            progress.advance(task)

            task = progress.add_task(f"replay at {size:,}", total=4 if library else 2)
            _replay(logs, figures, functools.partial(progress.advance, task))

            stage = Stage(sessions=logs.sessions, live_sessions=logs.live, events=logs.events, figures=figures)
            context = registry_bench.StageContext(
                sessions=logs.sessions,
                live_sessions=logs.live,
                events=logs.events,
                store_path=logs.ours.path,
                work_dir=work,
                page_floor=floor,
                cwds=working_directories(settings.seed),
            )
            for hook_name, hook in registry_bench.HOOKS.items():
                measured = hook(context)
                if measured is None:
                    stage.pending.append(hook_name)
                else:
                    figures.update(measured)
            stages.append(stage)
    finally:
        logs.close()

    # Deleted sessions have no file, so reaching a size in files takes ~5% more sessions. When the stores'
    # history is too short for that, the directory gets a longer history from the same generator and seed.
    jsonl_history = max(largest, math.ceil(max(settings.jsonl_sizes) / 0.9))
    if jsonl_history > largest:
        notes.append(
            f"The JSONL directory was written from a {jsonl_history:,}-session history (same generator and seed) "
            f"to reach {max(settings.jsonl_sizes):,} files; deleted sessions have no file."
        )
    jsonl = _jsonl_points(work / "sessions", settings, jsonl_history, progress)
    for stage in stages:
        # Compared at the stage's live sessions: an agent keeps one file per session it can list.
        listing = _jsonl_for(jsonl, stage.live_sessions)
        if listing is not None:
            stage.figures[keys.JSONL_LISTING] = listing
    task = progress.add_task("cross-process notifications", total=1)
    stages[-1].figures[keys.SUBSCRIPTION] = subscription_latency(work, settings.subscription_events)
    progress.advance(task)
    # The SQLite part ends here: the PostgreSQL part's server is another process, whose CPU would count as others'.
    wall = time.perf_counter() - started
    others, load_after = meter.others(wall), os.getloadavg()
    postgres = None
    if settings.postgres is not None:
        task = progress.add_task("postgres", total=None)
        postgres = postgres_registry.measure(
            settings.postgres, progress=lambda text: progress.update(task, description=text)
        )
        progress.update(task, total=1, completed=1)

    notes += [
        f"Each size's durable figures append {settings.durable_sessions} sessions (a tenth of smaller sizes) as "
        f"per-session batches and {settings.durable_events} single events to the sessions just added, to every "
        "log alike, so all of them always hold the same history.",
        "Append timings cover only the store calls: generating events and building eventsourcing aggregates is "
        "not counted (which flatters eventsourcing a little).",
        "Replay rates are the median of up to 5 repeats within at least 1 s; latencies are p50 / p99 over the "
        "calls listed (n).",
        "JSONL files here hold no message payloads, so reading their last line is cheaper than in real agents' "
        "transcripts: the JSONL listing is a lower bound. Listings ran on a warm page cache.",
    ]
    if others > DISTURBED_CORES:
        notes.append(
            f"Other processes used {others:.2f} of the {machine.cores} cores on average during this run: treat "
            "these figures as disturbed (do not commit them)."
        )
    result = Run(
        name=name,
        seed=settings.seed,
        machine=msgspec.structs.replace(machine, load_after=load_after, others_cpu_cores=round(others, 3)),
        settings={
            "sizes": settings.sizes,
            "jsonl_sizes": settings.jsonl_sizes,
            "durable_sessions": settings.durable_sessions,
            "durable_events": settings.durable_events,
            "reconstruct": settings.reconstruct,
            "chunk": settings.chunk,
        },
        stages=stages,
        jsonl=jsonl,
        wall_seconds=wall,
        notes=notes,
        postgres=postgres,
    )
    result.ratios = ratios(stages)
    return result


def _first_page(sessions: int, seed: int) -> list[baselines.SessionInfo]:
    """The 50 live sessions created first: real titles, cwds and ``_meta`` for the page-encoding floor."""
    page: list[baselines.SessionInfo] = []
    for sid, events in iter_histories(sessions, seed):
        info = baselines.session_info(sid, events)
        if info is not None:
            page.append(info)
            if len(page) == baselines.PAGE_SIZE:
                break
    return page


def _jsonl_points(folder: Path, settings: Settings, sessions: int, progress: Progress) -> list[JsonlPoint]:
    """Grow one directory of session files to each size in turn and time the listing at each."""
    points: list[JsonlPoint] = []
    histories = iter_histories(sessions, settings.seed)  # the same history as the stores got
    written = 0
    task = progress.add_task("JSONL files", total=max(settings.jsonl_sizes))
    for files in sorted(settings.jsonl_sizes):
        added = write_jsonl(folder, histories, files - written)
        written += added
        progress.advance(task, added)
        if written < files:
            break  # the history has fewer live sessions than this size
        points.append(JsonlPoint(files=written, listing=baselines.time_jsonl_listing(folder)))
    return points


def _sizes(text: str) -> list[int]:
    sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive sizes separated by commas, got {text!r}")
    return sizes


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, json=False)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="mode", const="quick", help="10k and 100k sessions")
    mode.add_argument("--full", action="store_const", dest="mode", const="full", help="10k, 100k and 1M sessions")
    parser.add_argument("--sizes", type=_sizes, help="history sizes in sessions, e.g. 10000,100000")
    parser.add_argument("--jsonl-sizes", type=_sizes, help="JSONL directory sizes in files")
    parser.add_argument("--subscription-events", type=int, help="cross-process notifications to time")
    parser.add_argument("--name", help="results file name (default: the mode, or 'custom' with --sizes)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder (default: benchmarks/results)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES, help="the PostgreSQL part's server")
    parser.add_argument("--no-postgres", action="store_true", help="leave the PostgreSQL part out")
    parser.add_argument("--postgres-sizes", type=_sizes, help="the PostgreSQL part's sizes (default: the mode's)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    base = MODES[args.mode or "quick"]
    settings = Settings(
        sizes=args.sizes or base.sizes,
        jsonl_sizes=args.jsonl_sizes or base.jsonl_sizes,
        subscription_events=args.subscription_events or base.subscription_events,
        seed=args.seed,
        plot=not args.no_plot,
        postgres=None
        if args.no_postgres or base.postgres is None
        else replace(
            base.postgres, url=args.postgres_url, seed=args.seed, sizes=args.postgres_sizes or base.postgres.sizes
        ),
    )
    name = args.name or ("custom" if args.sizes else args.mode or "quick")
    console = Console(stderr=True)
    scratch = Path(os.environ.get("BENCH_DIR") or Path(__file__).parent / ".work")
    scratch.mkdir(parents=True, exist_ok=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with (
        tempfile.TemporaryDirectory(dir=scratch) as tmp,
        Progress(*columns, console=console, disable=not console.is_terminal) as progress,
    ):
        result = run(name, settings, Path(tmp), progress)
        progress.add_task("removing scratch files", total=None)
    for path in write_results(result, args.out, plot=settings.plot, console=console):
        print(path)
    took = time.perf_counter() - started
    print(f"measured for {result.wall_seconds:,.0f} s; {took:,.0f} s with scratch files removed", file=sys.stderr)


def write_results(result: Run, out: Path, *, plot: bool = True, console: Console | None = None) -> list[Path]:
    """``<name>.json``, ``<name>.md`` and (with matplotlib) ``<name>-growth.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / result.name
    written = [stem.with_suffix(".json"), stem.with_suffix(".md")]
    written[0].write_bytes(msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n")
    written[1].write_text(markdown(result), encoding="utf-8")
    if plot:
        try:
            plot_growth(result, out / f"{result.name}-growth.png")
            written.append(out / f"{result.name}-growth.png")
        except ImportError:
            (console or Console(stderr=True)).print("matplotlib is not installed (pip install -e '.[bench]'): no plot")
    return written


if __name__ == "__main__":
    main()
