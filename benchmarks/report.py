"""A run's results: the JSON record, the markdown table of ratios against same-run baselines, and the plots.

Ratios, not absolute figures, are what compare across runs: these machines differ by up to ~30% from one
whole run to the next. Every ratio below divides two figures taken at the same history size in the same run.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from benchmarks import registry_bench as reg
from benchmarks.figures import Figure, Latency, Quantity, Throughput
from benchmarks.machine import Machine

__all__ = [
    "BOUNDS_FILE",
    "ES_BULK",
    "ES_COMMAND",
    "ES_NOTIFICATIONS",
    "ES_REPOSITORY",
    "ES_SAVE",
    "FSYNC",
    "JSONL_LISTING",
    "OURS_BATCH",
    "OURS_IMPORT",
    "OURS_LOAD",
    "OURS_READ",
    "OURS_SCAN",
    "OURS_SINGLE",
    "OURS_THREADS_1",
    "OURS_THREADS_8",
    "PAGE_FLOOR",
    "RAW_INSERT",
    "RAW_SCAN",
    "RAW_SINGLE",
    "SUBSCRIPTION",
    "JsonlPoint",
    "Ratio",
    "Run",
    "Stage",
    "markdown",
    "rate_key",
    "ratios",
    "read_bounds",
]

# Figure keys of one stage. A durable append's Latency sits under its key, its events/s under rate_key(key).
FSYNC = "disk.fsync"
RAW_INSERT = "raw.insert"
RAW_SINGLE = "raw.single_durable"
RAW_SCAN = "raw.scan"
OURS_LOAD = "ours.batch_normal"
OURS_BATCH = "ours.batch_durable"
OURS_SINGLE = "ours.single_durable"
OURS_READ = "ours.read"
# Store figures of issue 14 (events helper): the lean scan, append_batch imports, group commit.
OURS_SCAN = "ours.scan"
OURS_IMPORT = "ours.import_batch"
OURS_THREADS_1 = "ours.threads_1"
OURS_THREADS_8 = "ours.threads_8"
ES_BULK = "es.save_bulk"
ES_SAVE = "es.save_each"
ES_COMMAND = "es.command_each"
ES_NOTIFICATIONS = "es.read_notifications"
ES_REPOSITORY = "es.repository_get"
PAGE_FLOOR = "floor.page_encode"
JSONL_LISTING = "jsonl.listing"
SUBSCRIPTION = "ours.subscription_cross_process"


def rate_key(key: str) -> str:
    return f"{key}.rate"


class Stage(msgspec.Struct, kw_only=True):
    """Figures taken when the history held ``sessions`` sessions and ``events`` events."""

    sessions: int
    live_sessions: int  # not deleted: what session/list can return, and how many files an agent keeps
    events: int
    figures: dict[str, Figure] = msgspec.field(default_factory=dict)
    pending: list[str] = msgspec.field(default_factory=list)


class JsonlPoint(msgspec.Struct, frozen=True, kw_only=True):
    files: int
    listing: Latency


class Ratio(msgspec.Struct, frozen=True, kw_only=True):
    """``ours / baseline``: a rate ratio (> 1 is faster) or a time ratio (< 1 is faster), per ``kind``."""

    topic: str
    measure: str
    sessions: int
    kind: Literal["rate", "time", "value", "size"]
    ours: float | None
    baseline: float | None
    ratio: float | None
    target: str
    met: bool | None


class Run(msgspec.Struct, kw_only=True):
    name: str
    seed: int
    machine: Machine
    settings: dict[str, int | list[int] | str]
    stages: list[Stage]
    jsonl: list[JsonlPoint]
    wall_seconds: float = 0.0
    notes: list[str] = msgspec.field(default_factory=list)
    ratios: list[Ratio] = msgspec.field(default_factory=list)


# -- ratios -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    topic: str
    measure: str
    ours: str
    baseline: str | None  # None: compare ``ours`` with the target itself
    kind: Literal["rate", "time", "value", "size"]
    target: float | None = None  # rate: ratio >= target; time: ratio <= target; value: see ``higher``
    target_text: str = ""
    field: Literal["p50_us", "p99_us"] = "p50_us"
    higher: bool = False  # for a value: whether the target is a minimum (diffs/s) or a maximum (bytes)
    judged_from: int = 0  # a target set "at 1M" is judged at that history size and above, not below


_SPECS = (
    _Spec(
        "append",
        "durable single-event append ÷ disk fsync",
        rate_key(OURS_SINGLE),
        rate_key(FSYNC),
        "rate",
        0.9,
        "≥ 0.9x",
    ),
    _Spec(
        "append",
        "durable single-event append ÷ raw sqlite3 durable insert",
        rate_key(OURS_SINGLE),
        rate_key(RAW_SINGLE),
        "rate",
        0.8,
        "≥ 0.8x",
    ),
    _Spec(
        "append",
        "8 threads appending durably ÷ 1 thread (group commit)",
        OURS_THREADS_8,
        OURS_THREADS_1,
        "rate",
        4.0,
        "≥ 4x",
    ),
    _Spec(
        "append",
        "batched import (append_batch, 1000 sessions/tx, durable) ÷ eventsourcing bulk save",
        OURS_IMPORT,
        ES_BULK,
        "rate",
        5.0,
        "≥ 5x",
    ),
    _Spec(
        "append",
        "durable single-event append ÷ eventsourcing get+command+save",
        rate_key(OURS_SINGLE),
        rate_key(ES_COMMAND),
        "rate",
    ),
    _Spec(
        "append",
        "batched append, durable ÷ eventsourcing save per aggregate (durable)",
        rate_key(OURS_BATCH),
        rate_key(ES_SAVE),
        "rate",
        5.0,
        "≥ 5x",
    ),
    _Spec(
        "append",
        "batched append, synchronous=normal ÷ eventsourcing save per aggregate (durable)",
        OURS_LOAD,
        rate_key(ES_SAVE),
        "rate",
    ),
    _Spec(
        "append",
        "batched append, synchronous=normal ÷ raw sqlite3 bulk insert (ceiling)",
        OURS_LOAD,
        RAW_INSERT,
        "rate",
    ),
    _Spec(
        "replay",
        "log read+decode ÷ eventsourcing recorder read+mapper decode",
        OURS_READ,
        ES_NOTIFICATIONS,
        "rate",
        None,
        "(the ≥ 10x target is the rebuild's, below)",
    ),
    _Spec("replay", "log read+decode ÷ eventsourcing repository.get per aggregate", OURS_READ, ES_REPOSITORY, "rate"),
    _Spec("replay", "log read+decode ÷ raw sqlite3 scan+msgspec decode (ceiling)", OURS_READ, RAW_SCAN, "rate"),
    _Spec(
        "replay",
        "lean scan (for folds) ÷ raw sqlite3 scan+msgspec decode (ceiling)",
        OURS_SCAN,
        RAW_SCAN,
        "rate",
        0.5,
        "≥ 0.5x",
    ),
    _Spec(
        "replay",
        "projection rebuild ÷ eventsourcing recorder read+decode",
        reg.REBUILD,
        ES_NOTIFICATIONS,
        "rate",
        10.0,
        "≥ 10x",
    ),
    _Spec(
        "replay",
        "replay --at head/2 from kept snapshots ÷ full fold of the log (time)",
        reg.REPLAY_HALF,
        reg.FULL_FOLD,
        "time",
        0.1,
        "≤ 0.1x at 1M",
        judged_from=1_000_000,
    ),
    _Spec(
        "start",
        "read-model tables built from the log (first open) ÷ the reference fold",
        reg.BUILD,
        reg.REBUILD,
        "rate",
    ),
    _Spec(
        "start",
        "serve to first session/list ÷ the same at 1,000 sessions (time)",
        reg.SERVE_FIRST,
        reg.SERVE_FIRST_1K,
        "time",
        1.25,
        "≤ 1.25x at 100k",
        judged_from=100_000,
    ),
    _Spec(
        "start",
        "serve to first session/list ÷ the same at 1,000 sessions, at 1M (time)",
        reg.SERVE_FIRST,
        reg.SERVE_FIRST_1K,
        "time",
        1.5,
        "≤ 1.5x at 1M",
        judged_from=1_000_000,
    ),
    _Spec(
        "start",
        "serve to first session/list ÷ folding in memory from the newest snapshot (time)",
        reg.SERVE_FIRST,
        reg.SERVE_FIRST_SNAPSHOT,
        "time",
        0.1,
        "≤ 0.1x at 1M",
        judged_from=1_000_000,
    ),
    _Spec(
        "start",
        "serve to first session/list ÷ the same on an empty store (time)",
        reg.SERVE_FIRST,
        reg.SERVE_FIRST_EMPTY,
        "time",
    ),
    _Spec(
        "start",
        "serve RSS after the first page ÷ the same at 1,000 sessions",
        reg.SERVE_RSS,
        reg.SERVE_RSS_1K,
        "size",
        1.3,
        "≤ 1.3x at 100k",
        judged_from=100_000,
    ),
    _Spec(
        "start",
        "serve RSS after the first page ÷ the same at 1,000 sessions, at 1M",
        reg.SERVE_RSS,
        reg.SERVE_RSS_1K,
        "size",
        1.5,
        "≤ 1.5x at 1M",
        judged_from=1_000_000,
    ),
    _Spec("start", "acp-registry list, whole process, p50 ms", reg.CLI_LIST, None, "value", 500_000.0, "≤ 0.5 s at 1M"),
    _Spec("start", "acp-registry show, whole process, p50 ms", reg.CLI_SHOW, None, "value", 500_000.0, "≤ 0.5 s at 1M"),
    _Spec(
        "append",
        "SessionRegistry.create (durable, tables kept up) ÷ bare durable append",
        reg.WRITE_CREATE,
        reg.WRITE_APPEND,
        "rate",
        0.8,
        "≥ 0.8x",
    ),
    _Spec("list", "JSONL listing (agents today) ÷ page encode floor (time)", JSONL_LISTING, PAGE_FLOOR, "time"),
    _Spec(
        "list", "session/list first page ÷ page encode floor (time)", reg.LIST_FIRST, PAGE_FLOOR, "time", 2.0, "≤ 2x"
    ),
    _Spec("list", "session/list deep page ÷ page encode floor (time)", reg.LIST_DEEP, PAGE_FLOOR, "time", 2.0, "≤ 2x"),
    _Spec(
        "list",
        "session/list first page ÷ JSONL listing (time)",
        reg.LIST_FIRST,
        JSONL_LISTING,
        "time",
        1 / 50_000,
        "≤ 1/50,000 at 100k",
        judged_from=100_000,
    ),
    _Spec(
        "stream",
        "cross-process notification p99 (store subscription), ms",
        SUBSCRIPTION,
        None,
        "value",
        50_000.0,
        "≤ 50 ms",
        "p99_us",
    ),
    _Spec(
        "stream",
        "change stream to 1 subscriber, diffs/s",
        reg.DIFFS_PER_S.format(subscribers=1),
        None,
        "value",
        200_000.0,
        "≥ 200,000/s",
        higher=True,
    ),
    _Spec(
        "list",
        "session/list first page, p50 µs",
        reg.LIST_FIRST,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    _Spec(
        "list",
        "session/list deep page, p50 µs",
        reg.LIST_DEEP,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    _Spec(
        "list",
        "session/list first page of one cwd, p50 µs",
        reg.LIST_FIRST_CWD,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    _Spec(
        "list",
        "session/list deep page of one cwd, p50 µs",
        reg.LIST_DEEP_CWD,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    *(
        _Spec(
            "list",
            f"session/list {page} page, archived={mode} (10% archived), p50 µs",
            reg.LIST_ARCHIVED.format(page=page, mode=mode),
            None,
            "value",
            300.0,
            "≤ 300 µs at 1M",
            judged_from=1_000_000,
        )
        for mode in ("only", "include")
        for page in ("first", "deep")
    ),
    _Spec(
        "fork",
        "SessionRegistry.fork of a 10,000-event session, p50 ms",
        reg.FORK_10K,
        None,
        "value",
        50_000.0,
        "≤ 50 ms",
    ),
    _Spec("list", "session/list over stdio ÷ in process (time)", reg.STDIO_LIST, reg.LIST_FIRST, "time"),
    _Spec(
        "stream",
        "change stream to 10 subscribers, diffs/s each",
        reg.DIFFS_PER_S.format(subscribers=10),
        None,
        "value",
        100_000.0,
        "≥ 100,000/s",
        higher=True,
    ),
)


def _value(figure: Figure | None, field: str) -> float | None:
    if isinstance(figure, Throughput):
        return figure.per_s
    if isinstance(figure, Latency):
        return float(getattr(figure, field))
    if isinstance(figure, Quantity):
        return figure.value
    return None


def ratios(stages: Sequence[Stage]) -> list[Ratio]:
    """Every spec at every stage; a figure not measured yet gives a row with ``ratio`` None (pending)."""
    rows: list[Ratio] = []
    for spec in _SPECS:
        for stage in stages:
            ours = _value(stage.figures.get(spec.ours), spec.field)
            base = None if spec.baseline is None else _value(stage.figures.get(spec.baseline), spec.field)
            if spec.baseline is None:
                ratio = ours  # an absolute check: the figure itself against the target
            elif ours is None or not base:
                ratio = None
            else:
                ratio = ours / base
            met = None
            if ratio is not None and spec.target is not None and stage.sessions >= spec.judged_from:
                at_least = spec.kind == "rate" or (spec.kind == "value" and spec.higher)
                met = ratio >= spec.target if at_least else ratio <= spec.target
            if ours is None and stage is not stages[-1]:
                continue  # pending, or measured once per run: one row says so
            rows.append(
                Ratio(
                    topic=spec.topic,
                    measure=spec.measure,
                    sessions=stage.sessions,
                    kind=spec.kind,
                    ours=ours,
                    baseline=base,
                    ratio=ratio,
                    target=spec.target_text,
                    met=met,
                )
            )
    return rows


# -- markdown ---------------------------------------------------------------------------------------------


def _si(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def _figure(figure: Figure) -> str:
    if isinstance(figure, Throughput):
        text = f"{_si(figure.per_s)}/s"
        return f"{text} (median of {figure.runs})" if figure.runs > 1 else text
    if isinstance(figure, Latency):
        text = f"{_time(figure.p50_us)} / {_time(figure.p99_us)}"
        if figure.scaled_from:
            how = "extrapolated" if figure.extrapolated else "scaled"
            return f"{text} ({how} from {figure.scaled_from:,} files)"
        return f"{text} (n={figure.n:,})"
    return f"{_si(figure.value)} {figure.unit}"


def _figure_notes(stages: Sequence[Stage]) -> list[str]:
    """One line per figure with a note, named as in the Figures table; a note that differs by history size
    says the size of each (e.g. the snapshot's size at each stage)."""
    by_key: dict[str, list[tuple[int, str]]] = {}
    for stage in stages:
        for key, figure in stage.figures.items():
            if figure.note:
                by_key.setdefault(key, []).append((stage.sessions, figure.note))
    notes = []
    for key, found in by_key.items():
        name = _FIGURE_NAMES.get(key, key)
        texts = {note for _, note in found}
        if len(texts) == 1:
            sizes = "" if len(found) == len(stages) else " (" + ", ".join(f"{n:,} sessions" for n, _ in found) + ")"
            notes.append(f"{name}{sizes}: {found[0][1]}")
        else:
            notes.append(f"{name}: " + " · ".join(f"{n:,} sessions: {note}" for n, note in found))
    return sorted(notes)


BOUNDS_FILE = Path(__file__).with_name("bounds.toml")


def read_bounds(path: Path = BOUNDS_FILE) -> dict[str, str]:
    """What bounds each target, by its measure (the ``measure`` of a ratio row): ``benchmarks/bounds.toml``."""
    if not path.exists():
        return {}
    with path.open("rb") as file:
        table = tomllib.load(file)
    return {measure: str(entry.get("bound", "")).strip() for measure, entry in table.items()}


def _unmet(rows: Sequence[Ratio], bounds: Mapping[str, str]) -> list[str]:
    """A section naming every unmet target once, at the sizes it was missed, and what bounds it."""
    missed: dict[str, list[Ratio]] = {}
    for row in rows:
        if row.met is False:
            missed.setdefault(row.measure, []).append(row)
    if not missed:
        return []
    lines = [
        "",
        "## Unmet targets and what bounds them",
        "",
        f"From `benchmarks/{BOUNDS_FILE.name}`, keyed by measure; a target without an entry there says so.",
        "",
        "| measure | target | missed at | what bounds it |",
        "| --- | --- | --- | --- |",
    ]
    for measure, found in missed.items():
        at = ", ".join(f"{row.sessions:,} ({_ratio_cell(row)})" for row in found)
        bound = " ".join(bounds.get(measure, "").split()) or f"not explained yet: add it to `{BOUNDS_FILE.name}`"
        lines.append(f"| {measure} | {found[0].target} | {at} | {bound} |")
    return lines


def _ratio_cell(row: Ratio) -> str:
    if row.ratio is None:
        return "pending" if row.ours is None else "n/a"
    if row.kind == "value":
        return _time(row.ratio) if "ms" in row.measure else _si(row.ratio)
    if row.ratio < 0.01:
        return f"1/{1 / row.ratio:,.0f}"
    return f"{row.ratio:,.0f}x" if row.ratio >= 100 else f"{row.ratio:.2f}x"


def _side(value: float | None, row: Ratio) -> str:
    if value is None:
        return "—"
    if row.kind == "size":
        return f"{value / 1e6:.1f} MB"
    if row.kind == "time" or (row.kind == "value" and "ms" in row.measure):
        return _time(value)
    return f"{_si(value)}/s" if row.kind == "rate" else _si(value)


_FIGURE_NAMES = {
    rate_key(FSYNC): "disk: write 100 B + fsync",
    FSYNC: "disk: write 100 B + fsync, p50 / p99",
    RAW_INSERT: "raw sqlite3: bulk insert (1000 sessions/tx, normal)",
    rate_key(RAW_SINGLE): "raw sqlite3: durable single insert",
    RAW_SINGLE: "raw sqlite3: durable single insert, p50 / p99",
    RAW_SCAN: "raw sqlite3: scan + msgspec decode",
    rate_key(OURS_SINGLE): "ours: durable single-event append",
    OURS_SINGLE: "ours: durable single-event append, p50 / p99",
    rate_key(OURS_BATCH): "ours: batched append (1 session/tx), durable",
    OURS_BATCH: "ours: batched append, durable, p50 / p99 per batch",
    OURS_LOAD: "ours: batched append (1 session/tx), synchronous=normal",
    OURS_READ: "ours: iter_events() read + decode",
    OURS_SCAN: "ours: scan() read + decode (position, session, version, event)",
    OURS_IMPORT: "ours: append_batch, 1000 sessions per call, durable (import)",
    OURS_THREADS_1: "ours: durable single-event appends, 1 thread",
    OURS_THREADS_8: "ours: durable single-event appends, 8 threads (group commit)",
    ES_BULK: "eventsourcing: save 1000 aggregates per call (bulk load)",
    rate_key(ES_SAVE): "eventsourcing: save per aggregate (durable)",
    ES_SAVE: "eventsourcing: save per aggregate, p50 / p99",
    rate_key(ES_COMMAND): "eventsourcing: get + command + save (durable)",
    ES_COMMAND: "eventsourcing: get + command + save, p50 / p99",
    ES_NOTIFICATIONS: "eventsourcing: recorder read + mapper decode",
    ES_REPOSITORY: "eventsourcing: repository.get (sampled aggregates)",
    PAGE_FLOOR: "msgspec: encode one page of 50 SessionInfo, p50 / p99",
    JSONL_LISTING: "JSONL directory: first page, p50 / p99",
    SUBSCRIPTION: "ours: cross-process notification, p50 / p99",
    reg.LIST_FIRST: "registry: session/list first page, p50 / p99",
    reg.LIST_DEEP: "registry: session/list page 90% deep, p50 / p99",
    reg.LIST_FIRST_CWD: "registry: session/list first page of one cwd, p50 / p99",
    reg.LIST_DEEP_CWD: "registry: session/list deep page of one cwd, p50 / p99",
    reg.BUILD: "registry: read-model tables built from the log (first open)",
    reg.REBUILD: "registry: reference fold of the whole log (lean read path)",
    reg.FULL_FOLD: "registry: full fold of the log from its start, once",
    reg.REPLAY_HALF: "registry: replay --at head/2 from kept snapshots, p50 / p99",
    reg.SERVE_FIRST: "registry: fresh `serve` to its first session/list answer, p50 / p99",
    reg.SERVE_FIRST_1K: "registry: the same on a 1,000-session store, p50 / p99",
    reg.SERVE_FIRST_EMPTY: "registry: the same on an empty store (start-up), p50 / p99",
    reg.SERVE_FIRST_SNAPSHOT: "registry: the same folding in memory from the newest snapshot, p50 / p99",
    reg.SERVE_RSS: "registry: that `serve` process's RSS after the first page",
    reg.SERVE_RSS_1K: "registry: the same on a 1,000-session store",
    reg.STDIO_LIST: "registry: session/list round trip over stdio, p50 / p99",
    reg.CLI_LIST: "registry: `acp-registry list`, whole process, p50 / p99",
    reg.CLI_SHOW: "registry: `acp-registry show`, whole process, p50 / p99",
    reg.WRITE_CREATE: "registry: SessionRegistry.create, durable, tables kept up",
    reg.WRITE_APPEND: "registry: the same store's bare durable append",
    **{
        reg.LIST_ARCHIVED.format(
            page=page, mode=mode
        ): f"registry: session/list {page} page, archived={mode}, p50 / p99"
        for mode in ("only", "include")
        for page in ("first", "deep")
    },
    reg.FORK_10K: "registry: fork of a 10,000-event session, p50 / p99",
    reg.DIFFS_PER_S.format(subscribers=1): "registry: change stream, 1 subscriber (diffs/s)",
    reg.DIFFS_PER_S.format(subscribers=10): "registry: change stream, 10 subscribers (diffs/s each)",
}


def markdown(run: Run, bounds: Mapping[str, str] | None = None) -> str:
    """The run as a markdown page; ``bounds`` says what bounds each target (default: ``BOUNDS_FILE``)."""
    bounds = read_bounds() if bounds is None else bounds
    m = run.machine
    lines = [
        f"# Benchmarks: {run.name}",
        "",
        f"{m.date} on {m.cpu} ({m.cores} cores, {m.ram_bytes / 2**30:.1f} GiB RAM), {m.system}; Python {m.python}, "
        f"SQLite {m.sqlite}, msgspec {m.msgspec}, eventsourcing {m.eventsourcing or 'not installed'}. "
        f"Seed {run.seed}; wall time {run.wall_seconds:,.0f} s; load average "
        f"{m.load_before[0]:.2f} before, {m.load_after[0]:.2f} after; other processes used "
        f"{m.others_cpu_cores:.2f} cores on average during the run.",
        "",
        "> These machines are noisy (whole runs differ by up to ~30%, and others run tests at the same time):",
        "> compare the ratios, taken at the same history size in the same run, not absolute figures across runs.",
        "",
    ]
    lines += [f"- {note}" for note in run.notes]
    lines += [
        "",
        "## Ratios against baselines",
        "",
        "Rate ratios: > 1 means ours is faster. Time ratios: < 1 means ours is faster.",
        "",
        "| topic | measure | sessions | ours | baseline | ratio | target | met |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | :---: |",
    ]
    for row in run.ratios:
        met = "" if row.met is None else ("yes" if row.met else "**no**")
        lines.append(
            f"| {row.topic} | {row.measure} | {row.sessions:,} | {_side(row.ours, row)} | "
            f"{_side(row.baseline, row)} | {_ratio_cell(row)} | {row.target} | {met} |"
        )
    lines += _unmet(run.ratios, bounds)
    sizes = [stage.sessions for stage in run.stages]
    lines += [
        "",
        "## Figures",
        "",
        "Rates are events/s (fsync: syncs/s); times are p50 / p99.",
        "",
        "| measure | " + " | ".join(f"{s:,} sessions" for s in sizes) + " |",
        "| --- |" + " ---: |" * len(sizes),
        "| events in the log | " + " | ".join(f"{stage.events:,}" for stage in run.stages) + " |",
        "| live (not deleted) sessions | " + " | ".join(f"{stage.live_sessions:,}" for stage in run.stages) + " |",
    ]
    for key, name in _FIGURE_NAMES.items():
        cells = [_figure(stage.figures[key]) if key in stage.figures else "—" for stage in run.stages]
        if any(cell != "—" for cell in cells):
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- {note}" for note in _figure_notes(run.stages)]]
    lines += [
        "",
        "## JSONL listing (what agents do today)",
        "",
        "| files | p50 | p99 | runs |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for point in run.jsonl:
        lines.append(
            f"| {point.files:,} | {_time(point.listing.p50_us)} | {_time(point.listing.p99_us)} | {point.listing.n} |"
        )
    pending = sorted({name for stage in run.stages for name in stage.pending})
    if pending:
        lines += [
            "",
            "## Pending",
            "",
            "Not measured yet (extension points in `benchmarks/registry_bench.py`): " + ", ".join(pending) + ".",
        ]
    return "\n".join(lines) + "\n"
