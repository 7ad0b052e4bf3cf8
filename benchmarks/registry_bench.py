"""EXTENSION POINTS for the registry's own measurements (``registry/``: projections, ``SessionRegistry``,
``session/list`` pages, the change stream), to be filled in against the registry's API. The harness already
calls every hook below at every history size and reports each one as *pending* while it returns None.

To add one: make the hook return its figures under the keys named here (``report.py`` already turns them into
ratios against the baselines of the same stage: ``page_floor`` and the JSONL listing for ``session/list``,
the eventsourcing replay for the rebuild, ``ours.read`` for cold start). Hooks get the stage's SQLite store,
already holding ``sessions`` sessions, and must not write to it: the next stage keeps growing the same file.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.change_stream import sync_seconds
from benchmarks.figures import Figure, Latency, Quantity, latency, repeat_rate, throughput
from events import SqliteStore
from registry import Projection, SessionRegistry

_ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "BYTES_PER_SESSION",
    "COLD_START_REPLAY",
    "COLD_START_SNAPSHOT",
    "DIFFS_PER_S",
    "HOOKS",
    "LIST_DEEP",
    "LIST_DEEP_CWD",
    "LIST_FIRST",
    "LIST_FIRST_CWD",
    "REBUILD",
    "Hook",
    "StageContext",
]

# Figure keys the report knows (Latency unless said otherwise).
LIST_FIRST = "registry.list_first"  # session/list first page, no cwd filter, in process
LIST_DEEP = "registry.list_deep"  # a page reached by a cursor far into the walk
LIST_FIRST_CWD = "registry.list_first_cwd"
LIST_DEEP_CWD = "registry.list_deep_cwd"
REBUILD = "registry.rebuild"  # Throughput: events/s of a full projection rebuild from the log
COLD_START_REPLAY = "registry.cold_start_replay"  # open the store to first answered session/list, no snapshot
COLD_START_SNAPSHOT = "registry.cold_start_snapshot"  # the same from the projection snapshot
DIFFS_PER_S = "registry.diffs_per_s.{subscribers}"  # Throughput, for 0, 1 and 10 subscribers
BYTES_PER_SESSION = "registry.bytes_per_session"  # Quantity: resident bytes per live session, indexes included


@dataclass(frozen=True)
class StageContext:
    """What a hook may use at one history size."""

    sessions: int  # sessions appended so far (deleted ones included)
    live_sessions: int  # sessions not deleted: what session/list can return
    events: int
    store_path: Path  # the SQLite event log holding them; open it read-only in spirit
    work_dir: Path  # scratch space for the hook (snapshots, child processes' files)
    page_floor: Latency  # encoding one page of SessionInfo alone, measured in this run
    cwds: list[str]  # working directories in the history, for the cwd-filtered pages


Hook = Callable[[StageContext], dict[str, Figure] | None]


def _registry(path: Path, **options: Any) -> SessionRegistry:
    """A registry over the stage's log that never writes to the log (no follower thread)."""
    return SessionRegistry(SqliteStore(path), follow=False, owns_store=True, **options)


def _timed(call: Callable[[], object], calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def _deep_cursor(registry: SessionRegistry, cwd: str | None, depth: float = 0.9) -> str | None:
    """The cursor of a page ``depth`` of the way through a walk (walked page by page, as a client would)."""
    pages = max(1, int(len(registry) * depth) // registry.page_size) if cwd is None else 0
    if cwd is not None:
        with_cwd = registry.read_model.cwd_counts().get(cwd, 0)
        pages = max(1, int(with_cwd * depth) // registry.page_size)
    cursor: str | None = None
    for _ in range(pages):
        page = registry.list(cwd=cwd, cursor=cursor)
        if not isinstance(page.next_cursor, str):
            break
        cursor = page.next_cursor
    return cursor


def session_list_in_process(ctx: StageContext) -> dict[str, Figure] | None:
    """``session/list`` in process through ``SessionRegistry``: first and deep page (90% of the way through a
    walk), with and without ``cwd``; p50/p99 over 2,000 calls each. The page is built and encoded to JSON, as
    the wire needs it. Targets: p50 <= 2x ``page_floor``, flat from first to deepest page at 1M sessions,
    >= 50,000x faster than the JSONL listing at 100k."""
    encode = msgspec.json.Encoder().encode
    registry = _registry(ctx.store_path)
    try:
        counts = registry.read_model.cwd_counts()
        cwd = max(ctx.cwds, key=lambda c: counts.get(c, 0))
        deep = _deep_cursor(registry, None)
        deep_cwd = _deep_cursor(registry, cwd)
        cases: dict[str, Callable[[], bytes]] = {
            LIST_FIRST: lambda: encode(registry.list()),
            LIST_DEEP: lambda: encode(registry.list(cursor=deep)),
            LIST_FIRST_CWD: lambda: encode(registry.list(cwd=cwd)),
            LIST_DEEP_CWD: lambda: encode(registry.list(cwd=cwd, cursor=deep_cwd)),
        }
        figures: dict[str, Figure] = {}
        for key, call in cases.items():
            call()  # the first call renders the page's sessions once; a live registry has them warm
            figures[key] = latency(_timed(call, 2_000), note="page of 50, built and JSON-encoded")
        return figures
    finally:
        registry.close()


_CHILD_COLD_START = """
import sys, time
start = time.perf_counter()
from registry import SessionRegistry
from events import SqliteStore
kind = sys.argv[2]
registry = SessionRegistry(SqliteStore(sys.argv[1]), follow=False, read_model=kind, owns_store=True)
registry.handle("session/list", {})
print(time.perf_counter() - start, registry.read_model.kind)
"""


def _cold_start(path: Path, kind: str, runs: int) -> list[float]:
    """Seconds from a fresh interpreter's first line to its first answered session/list (imports included)."""
    samples = []
    for _ in range(runs):
        argv = [sys.executable, "-c", _CHILD_COLD_START, str(path), kind]
        out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=_ROOT).stdout.split()
        if out[1] != kind:
            raise RuntimeError(f"the cold start used the {out[1]} read model, not {kind}")
        samples.append(float(out[0]))
    return samples


def cold_start(ctx: StageContext) -> dict[str, Figure] | None:
    """Full projection rebuild from the log in process (REBUILD, events/s), and cold start to the first
    answered ``session/list`` with and without the snapshot (COLD_START_*), each in a fresh OS process so imports
    and the page cache are charged as a user would see them. Targets: rebuild >= 10x the eventsourcing replay;
    snapshot start <= 10% of a full replay at 1M sessions."""

    def rebuild() -> int:
        with SqliteStore(ctx.store_path) as store:
            projection = Projection()
            return projection.load(store.iter_events(), head=store.head())

    figures: dict[str, Figure] = {REBUILD: repeat_rate(rebuild, min_seconds=1.0, max_runs=3)}
    with _registry(ctx.store_path):  # builds the tables once (the stage's appends bypassed the registry)
        pass
    runs = 3 if ctx.events < 2_000_000 else 1
    figures[COLD_START_REPLAY] = latency(_cold_start(ctx.store_path, "memory", runs), note=f"{runs} fresh processes")
    figures[COLD_START_SNAPSHOT] = latency(_cold_start(ctx.store_path, "tables", runs), note=f"{runs} fresh processes")
    return figures


def change_stream(ctx: StageContext) -> dict[str, Figure] | None:
    """Diffs/s delivered with 0, 1 and 10 subscribers (DIFFS_PER_S.format(subscribers=n)): as many activity
    events as the stage's log holds (2,000 to 100,000), folded by a registry on an in-memory log, each
    subscriber on its own thread. With 0 subscribers it is the projection alone; with n it counts n x events
    over the whole time. Target: >= 200k diffs/s to one subscriber. (Cross-process latency: store level.)"""
    figures: dict[str, Figure] = {}
    changes = max(2_000, min(100_000, ctx.events))
    for subscribers in (0, 1, 10):
        seconds = sync_seconds(subscribers, changes)
        count = changes * max(1, subscribers)
        figures[DIFFS_PER_S.format(subscribers=subscribers)] = throughput(
            count, seconds, note="projection fold included" if subscribers else "projection fold alone"
        )
    return figures


_CHILD_MEMORY = """
import gc, sys, tracemalloc
from events import SqliteStore
from registry import SessionRegistry

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

store = SqliteStore(sys.argv[1])
gc.collect()
before = rss()
tracemalloc.start()
registry = SessionRegistry(store, follow=False)
gc.collect()
traced = tracemalloc.get_traced_memory()[0]
print(rss() - before, traced, len(registry))
"""


def memory_per_session(ctx: StageContext) -> dict[str, Figure] | None:
    """Bytes per live session held by the projection with its indexes (BYTES_PER_SESSION): Python allocations
    still alive after the registry loaded (tracemalloc), in a child process; the RSS growth, which also counts
    memory the allocator freed but kept, is given in the note. Target: <= 1 KB."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD_MEMORY, str(ctx.store_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=_ROOT,
    ).stdout.split()
    rss_growth, traced, live = int(out[0]), int(out[1]), int(out[2])
    return {
        BYTES_PER_SESSION: Quantity(
            value=traced / live,
            unit="B",
            note=f"live allocations after load; RSS grew {rss_growth / live:.0f} B per live session",
        )
    }


HOOKS: dict[str, Hook] = {
    "session/list in-process": session_list_in_process,
    "cold start": cold_start,
    "change stream": change_stream,
    "memory per session": memory_per_session,
}
