"""Writing a run's results: ``<name>.json``, ``<name>.md`` and the growth plot, for ``benchmarks.run`` and the
PostgreSQL part run alone (``benchmarks.postgres_registry``)."""

from __future__ import annotations

from pathlib import Path

import msgspec
from rich.console import Console

from benchmarks.plots import plot_growth
from benchmarks.report import Run, markdown

__all__ = ["write_results"]


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
