"""The benchmark harness (issue 7): one seeded history fed to our event log and to every baseline, grown
stage by stage, with ratios taken at the same history size in the same run.

    python -m benchmarks.run --quick          # 10k and 100k sessions; a few minutes on 2 cores
    python -m benchmarks.run --full           # 10k, 100k and 1M sessions (~5M events)
    python -m benchmarks.run --sizes 1000,5000 --jsonl-sizes 100,1000 --name try

Each stage grows every log compared to the next size and times bulk loads, durable appends and replay on them
(``sqlite_stages.py``), then the registry's own figures (``registry_bench.py``); after the last, the JSONL listing
and cross-process notifications. Then the PostgreSQL part (``postgres_registry.py``: the registry on PostgreSQL
beside raw psycopg, at 1k and 100k sessions, 1M too with --full), which says it skipped when no server answers at
--postgres-url; --no-postgres leaves it out.

Writes ``benchmarks/results/<name>.json`` (figures and machine), ``<name>.md`` (ratio table) and
``<name>-growth.png`` (each cost against history size). Last, the search part (``search.py``: a corpus of
conversations, 100k sessions / ~2 M messages, 1 M / ~20 M with --full; --search-sessions N, --no-search), written to
``<name>-search.json`` and ``<name>-search.md``. Scratch files go to ``$BENCH_DIR`` or
``benchmarks/.work`` and are removed afterwards.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks import baselines, keys, postgres_registry, registry_bench, search, sqlite_stages
from benchmarks.args import DEFAULT_POSTGRES, bench_parser
from benchmarks.baselines import RawSqliteLog
from benchmarks.event_log import EventLogBench, ImportBench, subscription_latency
from benchmarks.figures import Figure, Latency
from benchmarks.generate import DEFAULT_SEED, iter_histories, working_directories, write_jsonl
from benchmarks.machine import DISTURBED_CORES, CpuMeter, describe_machine
from benchmarks.output import write_results
from benchmarks.report import JsonlPoint, Run, Stage, ratios

__all__ = ["MODES", "Settings", "main", "run"]

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Settings:
    sizes: list[int]
    jsonl_sizes: list[int]
    durable_sessions: int = 500  # per stage: sessions appended as durable batches (cut to a tenth of small stages)
    durable_events: int = 500  # per stage: single events appended durably
    reconstruct: int = 2000  # aggregates eventsourcing's repository.get rebuilds per stage (uniform sample)
    subscription_events: int = 200
    rounds: int = 5  # fresh processes per serve / CLI figure, alternating rounds of the writer figure
    chunk: int = 1000  # sessions per bulk-load step (one transaction for raw sqlite3 and eventsourcing)
    seed: int = DEFAULT_SEED
    plot: bool = True
    notes: list[str] = field(default_factory=list)
    postgres: postgres_registry.PostgresSettings | None = None  # None: no PostgreSQL part
    search: search.SearchSettings | None = None  # None: no search part (benchmarks/search.py)


MODES = {
    "quick": Settings(
        sizes=[10_000, 100_000],
        jsonl_sizes=[1_000, 10_000, 100_000],
        postgres=postgres_registry.MODES["quick"],
        search=search.MODES["quick"],
    ),
    "full": Settings(
        sizes=[10_000, 100_000, 1_000_000],
        jsonl_sizes=[1_000, 10_000, 100_000],
        postgres=postgres_registry.MODES["full"],
        search=search.MODES["full"],
    ),
}


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

    library = sqlite_stages.open_eventsourcing(work / "eventsourcing.db")
    if library is None:
        notes.append("eventsourcing is not installed (pip install -e '.[bench]'): its baselines were skipped.")
    logs = sqlite_stages.Logs(
        ours=EventLogBench(work / "ours.db"),
        imported=ImportBench(work / "imported.db"),
        raw=RawSqliteLog(work / "raw.db"),
        library=library,
        sampled=sqlite_stages.Reservoir(settings.reconstruct, random.Random(settings.seed + 1)),
    )
    stages: list[Stage] = []
    histories = iter_histories(largest, settings.seed)
    try:
        for size in sorted(settings.sizes):
            figures: dict[str, Figure] = {keys.PAGE_FLOOR: floor}
            durable = min(settings.durable_sessions, max(1, size // 10))
            bulk = max(0, size - logs.sessions - durable)
            task = progress.add_task(f"history → {size:,} sessions", total=bulk)
            sqlite_stages.grow(
                logs,
                sqlite_stages.chunks(histories, bulk, settings.chunk),
                figures,
                functools.partial(progress.advance, task),
            )

            task = progress.add_task(f"durable appends at {size:,}", total=1)
            sample = list(itertools.islice(histories, durable))
            figures.update(
                sqlite_stages.durable(logs, sample, sqlite_stages.single_events(sample, settings.durable_events), work)
            )
            progress.advance(task)

            task = progress.add_task(f"replay at {size:,}", total=4 if library else 2)
            sqlite_stages.replay(logs, figures, functools.partial(progress.advance, task))

            stage = Stage(sessions=logs.sessions, live_sessions=logs.live, events=logs.events, figures=figures)
            context = registry_bench.StageContext(
                sessions=logs.sessions,
                live_sessions=logs.live,
                events=logs.events,
                store_path=logs.ours.path,
                work_dir=work,
                page_floor=floor,
                cwds=working_directories(settings.seed),
                rounds=settings.rounds,
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
    parser.add_argument("--no-search", action="store_true", help="leave the search part out (benchmarks/search.py)")
    parser.add_argument(
        "--search-sessions", type=int, help="the search part's corpus in sessions (default: the mode's)"
    )
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
        search=None
        if args.no_search or base.search is None
        else replace(base.search, sessions=args.search_sessions or base.search.sessions),
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
    if settings.search is not None:  # its own corpus and stores: after the rest, alone on the machine
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            found = search.measure(settings.search, Path(tmp), progress=lambda text: console.print(f"search: {text}"))
        for path in search.write(found, args.out / f"{name}-search"):
            print(path)
    took = time.perf_counter() - started
    print(f"measured for {result.wall_seconds:,.0f} s; {took:,.0f} s with scratch files removed", file=sys.stderr)


if __name__ == "__main__":
    main()
