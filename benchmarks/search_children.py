"""What the search benchmark's parts share: child processes timed (and their peak RSS), the registry's command
line, a store's URL, and a sample's p50 and p99."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Built", "cli", "quantiles", "run_child", "run_child_rss", "store_url"]


@dataclass
class Built:
    """A benchmark store as ``benchmarks.search`` built it: its file, its conversations as JSON lines, what it holds."""

    store: Path
    jsonl: Path | None
    sessions: int = 0
    messages: int = 0
    text_bytes: int = 0
    seconds: float = 0.0


def store_url(path: Path) -> str:
    return f"sqlite://{path}"


def cli() -> list[str]:
    return [sys.executable, "-m", "registry.cli"]


def run_child(argv: list[str]) -> float:
    """Run ``argv`` to its end (its output read and dropped): wall seconds."""
    started = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return wall


def run_child_rss(argv: list[str]) -> tuple[float, int, str]:
    """Run ``argv`` to its end: wall seconds, its own peak RSS in bytes (``ru_maxrss`` from ``os.wait4``), stdout."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[:4]} failed ({proc.returncode}): {err.read().decode()[-2000:]}")
        return wall, usage.ru_maxrss * 1024, out.read().decode()


def quantiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1e3,
    }
