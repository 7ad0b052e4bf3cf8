"""EXTENSION POINTS for the registry's own measurements (``registry/``: projections, ``SessionRegistry``,
``session/list`` pages, the change stream), to be filled in against the registry's API. The harness already
calls every hook below at every history size and reports each one as *pending* while it returns None.

To add one: make the hook return its figures under the keys named here (``report.py`` already turns them into
ratios against the baselines of the same stage: ``page_floor`` and the JSONL listing for ``session/list``,
the eventsourcing replay for the rebuild, ``ours.read`` for cold start). Hooks get the stage's SQLite store,
already holding ``sessions`` sessions, and must not write to it: the next stage keeps growing the same file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.figures import Figure, Latency

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


def session_list_in_process(ctx: StageContext) -> dict[str, Figure] | None:
    """EXTENSION POINT: ``session/list`` in process through ``SessionRegistry``, first and deep page, with and
    without ``cwd`` (LIST_* keys; median and p99 over >= 1000 calls each). Targets: p50 <= 2x ``page_floor``,
    flat from first to deepest page at 1M sessions, >= 50,000x faster than the JSONL listing at 100k."""
    return None


def cold_start(ctx: StageContext) -> dict[str, Figure] | None:
    """EXTENSION POINT: full projection rebuild from the log (REBUILD) and cold start to the first answered
    ``session/list`` with and without the snapshot (COLD_START_*), each in a fresh OS process so imports and
    page cache are charged as a user would see them. Targets: rebuild >= 10x the eventsourcing replay;
    snapshot start <= 10% of a full replay at 1M sessions."""
    return None


def change_stream(ctx: StageContext) -> dict[str, Figure] | None:
    """EXTENSION POINT: diffs/s delivered with 0, 1 and 10 subscribers (DIFFS_PER_S.format(subscribers=n)).
    Target: >= 200k diffs/s to one subscriber. (The store-level cross-process latency is measured already.)"""
    return None


def memory_per_session(ctx: StageContext) -> dict[str, Figure] | None:
    """EXTENSION POINT: resident bytes per live session in the projection with its indexes
    (BYTES_PER_SESSION), measured in a child process as RSS growth over the empty registry.
    Target: <= 1 KB."""
    return None


HOOKS: dict[str, Hook] = {
    "session/list in-process": session_list_in_process,
    "cold start": cold_start,
    "change stream": change_stream,
    "memory per session": memory_per_session,
}
