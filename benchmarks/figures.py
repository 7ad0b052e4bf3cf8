"""What a measurement returns: a rate or a latency distribution, as msgspec structs so results are plain JSON.

Rates count only the measured calls (the timer runs around each call, never around the generator feeding
it), so every system is charged for its own work and nothing else.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import msgspec

__all__ = [
    "Figure",
    "Latency",
    "Quantity",
    "Stopwatch",
    "Throughput",
    "Timer",
    "interleave",
    "latency",
    "rate_of",
    "repeat_rate",
    "run_together",
    "throughput",
]

T = TypeVar("T")

Timer = Callable[[T], float]
"""Does one measured operation on an item and returns the seconds spent in the measured part alone."""


class Throughput(msgspec.Struct, frozen=True, kw_only=True, tag="throughput", omit_defaults=True):
    """``count`` items in ``seconds``; ``runs`` > 1 when ``per_s`` is the median rate of repeated runs."""

    count: int
    seconds: float
    per_s: float
    runs: int = 1
    note: str = ""


class Latency(msgspec.Struct, frozen=True, kw_only=True, tag="latency", omit_defaults=True):
    """The distribution of ``n`` timed calls, in microseconds. A figure scaled from another measurement has
    ``n`` 0 and says from how many items (``scaled_from``), and whether that was beyond what was measured."""

    n: int
    p50_us: float
    p99_us: float
    mean_us: float
    note: str = ""
    scaled_from: int = 0
    extrapolated: bool = False


class Quantity(msgspec.Struct, frozen=True, kw_only=True, tag="quantity", omit_defaults=True):
    """A measured amount that is neither a rate nor a time, e.g. resident bytes per live session."""

    value: float
    unit: str
    note: str = ""


Figure = Throughput | Latency | Quantity


def throughput(count: int, seconds: float, *, note: str = "") -> Throughput:
    return Throughput(count=count, seconds=seconds, per_s=count / seconds if seconds > 0 else math.inf, note=note)


def latency(samples_s: Sequence[float], *, note: str = "") -> Latency:
    """Median and p99 (nearest rank) of per-call durations given in seconds."""
    if not samples_s:
        raise ValueError("latency needs at least one sample")
    ordered = sorted(samples_s)
    rank = max(1, math.ceil(0.99 * len(ordered)))
    return Latency(
        n=len(ordered),
        p50_us=statistics.median(ordered) * 1e6,
        p99_us=ordered[rank - 1] * 1e6,
        mean_us=statistics.fmean(ordered) * 1e6,
        note=note,
    )


def rate_of(measured: Latency, count: int | None = None) -> Throughput:
    """The rate the timed calls of ``measured`` add up to: ``count`` items (default: one a call) over the time
    spent inside the calls."""
    return throughput(measured.n if count is None else count, measured.mean_us * measured.n / 1e6)


def run_together(works: Sequence[Callable[[], object]]) -> float:
    """Run each of ``works`` on a thread of its own, all released at once: the seconds from the release until the
    last one ended (threads starting up are not timed)."""
    gate = threading.Barrier(len(works) + 1)

    def run(work: Callable[[], object]) -> None:
        gate.wait()
        work()

    workers = [threading.Thread(target=run, args=(work,)) for work in works]
    for worker in workers:
        worker.start()
    gate.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start


def repeat_rate(run: Callable[[], int], *, min_seconds: float = 1.0, max_runs: int = 5) -> Throughput:
    """Median rate of ``run`` (which returns how many items it handled), repeated until ``min_seconds`` have
    passed or ``max_runs`` runs: a short run on a noisy machine says little on its own."""
    rates: list[float] = []
    total = 0
    spent = 0.0
    while not rates or (spent < min_seconds and len(rates) < max_runs):
        start = time.perf_counter()
        count = run()
        took = time.perf_counter() - start
        rates.append(count / took if took > 0 else math.inf)
        total += count
        spent += took
    return Throughput(count=total, seconds=spent, per_s=statistics.median(rates), runs=len(rates))


def interleave(timers: Mapping[str, Timer[T]], items: Sequence[T]) -> dict[str, list[float]]:
    """Every timer on every item, round robin, rotating who goes first: when the shared disk or CPU speeds
    up or slows down mid-run, every system compared feels it alike, so their ratio stays honest."""
    names = list(timers)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for n, item in enumerate(items):
        turn = n % len(names)
        for name in names[turn:] + names[:turn]:
            samples[name].append(timers[name](item))
    return samples


class Stopwatch:
    """Accumulates the time spent inside ``with watch:`` blocks and the items they handled."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._start

    def rate(self, *, note: str = "") -> Throughput:
        return throughput(self.count, self.seconds, note=note)
