"""The logs the SQLite run compares (``run.py``), all holding one history, and three of each stage's measurements
over them: growing the history (bulk loads), durable appends (the systems taking turns item by item), and
replaying it all. Ours (a store, and a second one filled as an importer would), a bare sqlite3 table, and the
eventsourcing library when its optional extra is installed."""

from __future__ import annotations

import contextlib
import itertools
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from benchmarks import baselines, keys
from benchmarks.baselines import RawSqliteLog
from benchmarks.event_log import EventLogBench, ImportBench
from benchmarks.figures import Figure, Latency, Stopwatch, Timer, interleave, latency, rate_of, repeat_rate, throughput
from benchmarks.generate import History, last_activity
from events import Event, SessionDeleted, SessionUpdated

__all__ = ["Logs", "Reservoir", "chunks", "durable", "grow", "open_eventsourcing", "replay", "single_events"]

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


def open_eventsourcing(path: Path) -> _Baseline | None:
    try:
        from benchmarks.eventsourcing_baseline import EventsourcingLog  # noqa: PLC0415  (optional extra)
    except ImportError:
        return None
    return EventsourcingLog(path)


class Reservoir:
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


def chunks(histories: Iterator[History], count: int, size: int) -> Iterator[list[History]]:
    """``count`` sessions from ``histories`` in lists of ``size``: memory stays bounded by one chunk."""
    left = count
    while left > 0:
        chunk = list(itertools.islice(histories, min(size, left)))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def single_events(sample: Sequence[History], count: int) -> list[tuple[str, Event]]:
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


@dataclass
class Logs:
    """Every log being compared, holding the same history, and what that history holds so far."""

    ours: EventLogBench
    imported: ImportBench  # the same bulk history, appended as an importer does (append_batch)
    raw: RawSqliteLog
    library: _Baseline | None
    sampled: Reservoir
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


def grow(
    logs: Logs, chunks: Iterator[list[History]], figures: dict[str, Figure], advance: Callable[[int], None]
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


def durable(logs: Logs, sample: list[History], singles: list[tuple[str, Event]], work: Path) -> dict[str, Figure]:
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


def replay(logs: Logs, figures: dict[str, Figure], advance: Callable[[], object]) -> None:
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
