"""The growth plot: how each cost grows with history size, ours and the baselines side by side (log-log).

matplotlib is the bench extra, imported only when a plot is drawn.
"""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks import keys
from benchmarks.figures import Figure, Latency, Throughput
from benchmarks.report import Run

__all__ = ["plot_growth"]

_Series = tuple[str, str, str, str]  # label, figure key, line style, colour (one colour per system)
_OURS, _ES, _RAW, _DISK, _REGISTRY, _JSONL = "tab:blue", "tab:green", "tab:purple", "black", "tab:red", "tab:orange"

_PANELS: tuple[tuple[str, tuple[_Series, ...]], ...] = (
    (
        "Durable single-event append",
        (
            ("ours", keys.rate_key(keys.OURS_SINGLE), "o-", _OURS),
            ("raw sqlite3 insert", keys.rate_key(keys.RAW_SINGLE), "s:", _RAW),
            ("eventsourcing get+command+save", keys.rate_key(keys.ES_COMMAND), "^-", _ES),
            ("disk: 100 B + fsync", keys.rate_key(keys.FSYNC), "x:", _DISK),
        ),
    ),
    (
        "Batched append (one session per transaction)",
        (
            ("ours, durable", keys.rate_key(keys.OURS_BATCH), "o-", _OURS),
            ("ours, synchronous=normal", keys.OURS_LOAD, "o--", _OURS),
            ("eventsourcing save, durable", keys.rate_key(keys.ES_SAVE), "^-", _ES),
            ("eventsourcing, 1000 aggregates per save", keys.ES_BULK, "^--", _ES),
            ("raw sqlite3, 1000 sessions per transaction", keys.RAW_INSERT, "s:", _RAW),
        ),
    ),
    (
        "Replay: read and decode every event",
        (
            ("ours iter_events()", keys.OURS_READ, "o-", _OURS),
            ("eventsourcing recorder + mapper", keys.ES_NOTIFICATIONS, "^-", _ES),
            ("eventsourcing repository.get", keys.ES_REPOSITORY, "^--", _ES),
            ("raw sqlite3 scan + decode", keys.RAW_SCAN, "s:", _RAW),
            ("registry projection rebuild", keys.REBUILD, "D-", _REGISTRY),
        ),
    ),
)


def _cost_us(figure: Figure | None) -> float | None:
    if isinstance(figure, Throughput) and figure.per_s > 0 and math.isfinite(figure.per_s):
        return 1e6 / figure.per_s
    if isinstance(figure, Latency):
        return figure.p50_us
    return None


def plot_growth(run: Run, path: Path) -> None:
    """One PNG, four panels: what each cost does as the history grows (log-log, lower is better)."""
    import matplotlib  # noqa: PLC0415  (optional extra: only the plot needs it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    # Taller than the data needs: each legend sits below its panel, never over the lines.
    fig, axes = plt.subplots(2, 2, figsize=(13, 12), constrained_layout=True)
    for ax, (title, series) in zip(axes.flat, _PANELS, strict=False):
        for label, key, style, colour in series:
            points = [(s.sessions, y) for s in run.stages if (y := _cost_us(s.figures.get(key))) is not None]
            if points:
                ax.plot(*zip(*points, strict=True), style, color=colour, label=label, markersize=5)
        ax.set_title(title)
        ax.set_ylabel("µs per event (lower is better)")

    ax = axes.flat[3]
    measured = [(p.files, p.listing.p50_us / 1e3) for p in run.jsonl]
    if measured:
        ax.plot(*zip(*measured, strict=True), "s-", color=_JSONL, label="JSONL directory (agents today)")
    guessed = [
        (s.live_sessions, f.p50_us / 1e3)
        for s in run.stages
        if isinstance(f := s.figures.get(keys.JSONL_LISTING), Latency) and f.extrapolated
    ]
    if measured and guessed:
        ax.plot(*zip(measured[-1], *guessed, strict=True), "s:", color=_JSONL, alpha=0.5, label="JSONL (extrapolated)")
    for label, key, style in (
        ("session/list, first page", keys.LIST_FIRST, "o-"),
        ("deep page", keys.LIST_DEEP, "o--"),
    ):
        points = [(s.sessions, y / 1e3) for s in run.stages if (y := _cost_us(s.figures.get(key))) is not None]
        if points:
            ax.plot(*zip(*points, strict=True), style, color=_REGISTRY, label=label, markersize=5)
    floor = run.stages[-1].figures.get(keys.PAGE_FLOOR) if run.stages else None
    if isinstance(floor, Latency):
        ax.axhline(floor.p50_us / 1e3, color=_DISK, linestyle=":", label="encoding the page alone (floor)")
    if not any(keys.LIST_FIRST in s.figures for s in run.stages):
        ax.text(
            0.98,
            0.35,
            "session/list: pending (extension point in benchmarks/registry_bench.py)",
            transform=ax.transAxes,
            ha="right",
            fontsize=9,
            color="grey",
        )
    ax.set_title("First page of session/list (50 sessions)")
    ax.set_ylabel("ms per answer, p50 (lower is better)")
    ax.set_xlabel("sessions in the history (JSONL: files, one per live session)")
    for ax in axes.flat:
        ax.set_xscale("log")
        ax.set_yscale("log")
        if not ax.get_xlabel():
            ax.set_xlabel("sessions in the history")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    m = run.machine
    fig.suptitle(
        f"acp-session-registry benchmarks: {run.name}, {m.date[:10]}, {m.cpu}, {m.cores} cores (noisy: compare ratios)"
    )
    fig.savefig(path, dpi=100)
    plt.close(fig)
