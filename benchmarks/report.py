"""A run's results: the JSON record, the markdown table of ratios against same-run baselines, and the plots.

Ratios, not absolute figures, are what compare across runs: these machines differ by up to ~30% from one
whole run to the next. Every ratio below divides two figures taken at the same history size in the same run.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from benchmarks import keys
from benchmarks.figures import Figure, Latency, Throughput
from benchmarks.machine import Machine
from benchmarks.targets import SPECS, Ratio, Spec

__all__ = [
    "BOUNDS_FILE",
    "POSTGRES_HEADING",
    "JsonlPoint",
    "PostgresPart",
    "Ratio",
    "Run",
    "Stage",
    "markdown",
    "postgres_section",
    "ratios",
    "read_bounds",
]


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


class PostgresPart(msgspec.Struct, kw_only=True):
    """The registry on PostgreSQL beside raw psycopg (``postgres_registry.py``): stages of its own history sizes in
    one schema grown stage by stage, or why it was skipped (no server answered)."""

    skipped: str = ""
    server: str = ""  # the server's version
    date: str = ""
    stages: list[Stage] = msgspec.field(default_factory=list)
    ratios: list[Ratio] = msgspec.field(default_factory=list)
    wall_seconds: float = 0.0
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cpu_busy: float = 0.0  # the machine's CPU busy during the part, as a fraction (the server's included)
    settings: dict[str, int | float | list[int] | str] = msgspec.field(default_factory=dict)
    notes: list[str] = msgspec.field(default_factory=list)


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
    postgres: PostgresPart | None = None


# -- ratios -----------------------------------------------------------------------------------------------


def ratios(stages: Sequence[Stage], specs: Sequence[Spec] = SPECS) -> list[Ratio]:
    """Every spec at every stage; a figure not measured yet gives a row with ``ratio`` None (pending)."""
    rows: list[Ratio] = []
    for spec in specs:
        for stage in stages:
            row = spec.judge(stage.sessions, stage.figures)
            if row.ours is None and stage is not stages[-1]:
                continue  # pending, or measured once per run: one row says so
            rows.append(row)
    return rows


# -- markdown ---------------------------------------------------------------------------------------------


_NUMBER = ((100.0, 1.0, "{:,.0f}"), (10.0, 1.0, "{:.1f}"), (-math.inf, 1.0, "{:.2f}"))
_MICROSECONDS = ((1e6, 1e6, "{:.2f} s"), (1e3, 1e3, "{:.2f} ms"), (-math.inf, 1.0, "{:.1f} µs"))


def _scaled(value: float, steps: Sequence[tuple[float, float, str]]) -> str:
    """``value`` written by the first step whose floor it reaches: divided by the step's divisor, in its format."""
    _, divisor, text = next(step for step in steps if value >= step[0])
    return text.format(value / divisor)


def _si(value: float) -> str:
    return _scaled(value, _NUMBER)


def _time(us: float) -> str:
    return _scaled(us, _MICROSECONDS)


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
        name = keys.NAMES.get(key, key)
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


def _unmet(rows: Sequence[Ratio], bounds: Mapping[str, str], heading: str = "##") -> list[str]:
    """A section naming every unmet target once, at the sizes it was missed, and what bounds it."""
    missed: dict[str, list[Ratio]] = {}
    for row in rows:
        if row.met is False:
            missed.setdefault(row.measure, []).append(row)
    if not missed:
        return []
    lines = [
        "",
        f"{heading} Unmet targets and what bounds them",
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


def _ratio_table(rows: Sequence[Ratio]) -> list[str]:
    lines = [
        "Rate ratios: > 1 means ours is faster. Time ratios: < 1 means ours is faster.",
        "",
        "| topic | measure | sessions | ours | baseline | ratio | target | met |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | :---: |",
    ]
    for row in rows:
        met = "" if row.met is None else ("yes" if row.met else "**no**")
        lines.append(
            f"| {row.topic} | {row.measure} | {row.sessions:,} | {_side(row.ours, row)} | "
            f"{_side(row.baseline, row)} | {_ratio_cell(row)} | {row.target} | {met} |"
        )
    return lines


def _figure_table(stages: Sequence[Stage], what: str) -> list[str]:
    """Every named figure measured at some stage, a column a stage, then the figures' notes."""
    lines = [
        what,
        "",
        "| measure | " + " | ".join(f"{stage.sessions:,} sessions" for stage in stages) + " |",
        "| --- |" + " ---: |" * len(stages),
        "| events in the log | " + " | ".join(f"{stage.events:,}" for stage in stages) + " |",
        "| live (not deleted) sessions | " + " | ".join(f"{stage.live_sessions:,}" for stage in stages) + " |",
    ]
    for key, name in keys.NAMES.items():
        cells = [_figure(stage.figures[key]) if key in stage.figures else "—" for stage in stages]
        if any(cell != "—" for cell in cells):
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, "", *[f"- {note}" for note in _figure_notes(stages)]]


POSTGRES_HEADING = "## PostgreSQL, beside raw psycopg"


def postgres_section(part: PostgresPart | None, bounds: Mapping[str, str] | None = None) -> str:
    """The PostgreSQL part as a markdown section (``POSTGRES_HEADING``): why it skipped, or its ratios and figures."""
    bounds = read_bounds() if bounds is None else bounds
    lines = [POSTGRES_HEADING, ""]
    if part is None:
        return "\n".join([*lines, "Not measured in this run (it predates the PostgreSQL part of the harness)."])
    if part.skipped:
        return "\n".join([*lines, f"Skipped: {part.skipped}."])
    lines += [
        f"{part.date}, PostgreSQL {part.server} on the same machine. Wall time {part.wall_seconds:,.0f} s; load "
        f"average {part.load_before[0]:.2f} before, {part.load_after[0]:.2f} after; the machine's CPU was "
        f"{part.cpu_busy:.0%} busy during the part (the server's work included). Every ratio divides two figures "
        "taken at the same history size in this part, interleaved call by call where they are latencies.",
        "",
        *[f"- {note}" for note in part.notes],
        "",
        "### Ratios against raw psycopg",
        "",
        *_ratio_table(part.ratios),
        *_unmet(part.ratios, bounds, "###"),
        "",
        "### PostgreSQL figures",
        "",
        *_figure_table(
            part.stages, "Rates are operations/s (imports: sessions/s, the build: events/s); times are p50 / p99."
        ),
    ]
    return "\n".join(lines)


def markdown(run: Run, bounds: Mapping[str, str] | None = None) -> str:
    """The run as a markdown page; ``bounds`` says what bounds each target (default: ``BOUNDS_FILE``). A run of
    the PostgreSQL part alone (no SQLite stages) is its PostgreSQL section under the same heading."""
    bounds = read_bounds() if bounds is None else bounds
    m = run.machine
    machine = f"{m.cpu} ({m.cores} cores, {m.ram_bytes / 2**30:.1f} GiB RAM), {m.system}; Python {m.python}"
    if not run.stages:
        return (
            f"# Benchmarks: {run.name}\n\nOn {machine}; seed {run.seed}.\n\n{postgres_section(run.postgres, bounds)}\n"
        )
    lines = [
        f"# Benchmarks: {run.name}",
        "",
        f"{m.date} on {machine}, "
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
    lines += ["", "## Ratios against baselines", "", *_ratio_table(run.ratios), *_unmet(run.ratios, bounds)]
    lines += [
        "",
        "## Figures",
        "",
        *_figure_table(run.stages, "Rates are events/s (fsync: syncs/s); times are p50 / p99."),
    ]
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
    lines += ["", postgres_section(run.postgres, bounds)]
    return "\n".join(lines) + "\n"
