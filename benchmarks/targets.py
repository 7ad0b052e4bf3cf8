"""The targets a benchmark run is judged by, as data: each row names the figure of ours, the baseline it is divided
by (measured in the same run), the kind of ratio, and the target (``report.ratios`` computes them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from benchmarks import keys

__all__ = ["SPECS", "Spec"]


@dataclass(frozen=True)
class Spec:
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


SPECS = (
    Spec(
        "append",
        "durable single-event append ÷ disk fsync",
        keys.rate_key(keys.OURS_SINGLE),
        keys.rate_key(keys.FSYNC),
        "rate",
        0.9,
        "≥ 0.9x",
    ),
    Spec(
        "append",
        "durable single-event append ÷ raw sqlite3 durable insert",
        keys.rate_key(keys.OURS_SINGLE),
        keys.rate_key(keys.RAW_SINGLE),
        "rate",
        0.8,
        "≥ 0.8x",
    ),
    Spec(
        "append",
        "8 threads appending durably ÷ 1 thread (group commit)",
        keys.OURS_THREADS_8,
        keys.OURS_THREADS_1,
        "rate",
        4.0,
        "≥ 4x",
    ),
    Spec(
        "append",
        "batched import (append_batch, 1000 sessions/tx, durable) ÷ eventsourcing bulk save",
        keys.OURS_IMPORT,
        keys.ES_BULK,
        "rate",
        5.0,
        "≥ 5x",
    ),
    Spec(
        "append",
        "durable single-event append ÷ eventsourcing get+command+save",
        keys.rate_key(keys.OURS_SINGLE),
        keys.rate_key(keys.ES_COMMAND),
        "rate",
    ),
    Spec(
        "append",
        "batched append, durable ÷ eventsourcing save per aggregate (durable)",
        keys.rate_key(keys.OURS_BATCH),
        keys.rate_key(keys.ES_SAVE),
        "rate",
        5.0,
        "≥ 5x",
    ),
    Spec(
        "append",
        "batched append, synchronous=normal ÷ eventsourcing save per aggregate (durable)",
        keys.OURS_LOAD,
        keys.rate_key(keys.ES_SAVE),
        "rate",
    ),
    Spec(
        "append",
        "batched append, synchronous=normal ÷ raw sqlite3 bulk insert (ceiling)",
        keys.OURS_LOAD,
        keys.RAW_INSERT,
        "rate",
    ),
    Spec(
        "replay",
        "log read+decode ÷ eventsourcing recorder read+mapper decode",
        keys.OURS_READ,
        keys.ES_NOTIFICATIONS,
        "rate",
        None,
        "(the ≥ 10x target is the rebuild's, below)",
    ),
    Spec(
        "replay",
        "log read+decode ÷ eventsourcing repository.get per aggregate",
        keys.OURS_READ,
        keys.ES_REPOSITORY,
        "rate",
    ),
    Spec(
        "replay", "log read+decode ÷ raw sqlite3 scan+msgspec decode (ceiling)", keys.OURS_READ, keys.RAW_SCAN, "rate"
    ),
    Spec(
        "replay",
        "lean scan (for folds) ÷ raw sqlite3 scan+msgspec decode (ceiling)",
        keys.OURS_SCAN,
        keys.RAW_SCAN,
        "rate",
        0.5,
        "≥ 0.5x",
    ),
    Spec(
        "replay",
        "projection rebuild ÷ eventsourcing recorder read+decode",
        keys.REBUILD,
        keys.ES_NOTIFICATIONS,
        "rate",
        10.0,
        "≥ 10x",
    ),
    Spec(
        "replay",
        "replay --at head/2 from kept snapshots ÷ full fold of the log (time)",
        keys.REPLAY_HALF,
        keys.FULL_FOLD,
        "time",
        0.1,
        "≤ 0.1x at 1M",
        judged_from=1_000_000,
    ),
    Spec(
        "start",
        "read-model tables built from the log (first open) ÷ the reference fold",
        keys.BUILD,
        keys.REBUILD,
        "rate",
    ),
    Spec(
        "start",
        "serve to first session/list ÷ the same at 1,000 sessions (time)",
        keys.SERVE_FIRST,
        keys.SERVE_FIRST_1K,
        "time",
        1.25,
        "≤ 1.25x at 100k",
        judged_from=100_000,
    ),
    Spec(
        "start",
        "serve to first session/list ÷ the same at 1,000 sessions, at 1M (time)",
        keys.SERVE_FIRST,
        keys.SERVE_FIRST_1K,
        "time",
        1.5,
        "≤ 1.5x at 1M",
        judged_from=1_000_000,
    ),
    Spec(
        "start",
        "serve to first session/list ÷ folding in memory from the newest snapshot (time)",
        keys.SERVE_FIRST,
        keys.SERVE_FIRST_SNAPSHOT,
        "time",
        0.1,
        "≤ 0.1x at 1M",
        judged_from=1_000_000,
    ),
    Spec(
        "start",
        "serve to first session/list ÷ the same on an empty store (time)",
        keys.SERVE_FIRST,
        keys.SERVE_FIRST_EMPTY,
        "time",
    ),
    Spec(
        "start",
        "serve RSS after the first page ÷ the same at 1,000 sessions",
        keys.SERVE_RSS,
        keys.SERVE_RSS_1K,
        "size",
        1.3,
        "≤ 1.3x at 100k",
        judged_from=100_000,
    ),
    Spec(
        "start",
        "serve RSS after the first page ÷ the same at 1,000 sessions, at 1M",
        keys.SERVE_RSS,
        keys.SERVE_RSS_1K,
        "size",
        1.5,
        "≤ 1.5x at 1M",
        judged_from=1_000_000,
    ),
    Spec("start", "acp-registry list, whole process, p50 ms", keys.CLI_LIST, None, "value", 500_000.0, "≤ 0.5 s at 1M"),
    Spec("start", "acp-registry show, whole process, p50 ms", keys.CLI_SHOW, None, "value", 500_000.0, "≤ 0.5 s at 1M"),
    Spec(
        "append",
        "SessionRegistry.create (durable, tables kept up) ÷ bare durable append",
        keys.WRITE_CREATE,
        keys.WRITE_APPEND,
        "rate",
        0.8,
        "≥ 0.8x",
    ),
    Spec(
        "list", "JSONL listing (agents today) ÷ page encode floor (time)", keys.JSONL_LISTING, keys.PAGE_FLOOR, "time"
    ),
    Spec(
        "list",
        "session/list first page ÷ page encode floor (time)",
        keys.LIST_FIRST,
        keys.PAGE_FLOOR,
        "time",
        2.0,
        "≤ 2x",
    ),
    Spec(
        "list",
        "session/list deep page ÷ page encode floor (time)",
        keys.LIST_DEEP,
        keys.PAGE_FLOOR,
        "time",
        2.0,
        "≤ 2x",
    ),
    Spec(
        "list",
        "session/list first page ÷ JSONL listing (time)",
        keys.LIST_FIRST,
        keys.JSONL_LISTING,
        "time",
        1 / 50_000,
        "≤ 1/50,000 at 100k",
        judged_from=100_000,
    ),
    Spec(
        "stream",
        "cross-process notification p99 (store subscription), ms",
        keys.SUBSCRIPTION,
        None,
        "value",
        50_000.0,
        "≤ 50 ms",
        "p99_us",
    ),
    Spec(
        "stream",
        "change stream to 1 subscriber, diffs/s",
        keys.DIFFS_PER_S.format(subscribers=1),
        None,
        "value",
        200_000.0,
        "≥ 200,000/s",
        higher=True,
    ),
    Spec(
        "list",
        "session/list first page, p50 µs",
        keys.LIST_FIRST,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    Spec(
        "list",
        "session/list deep page, p50 µs",
        keys.LIST_DEEP,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    Spec(
        "list",
        "session/list first page of one cwd, p50 µs",
        keys.LIST_FIRST_CWD,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    Spec(
        "list",
        "session/list deep page of one cwd, p50 µs",
        keys.LIST_DEEP_CWD,
        None,
        "value",
        300.0,
        "≤ 300 µs at 1M",
        judged_from=1_000_000,
    ),
    *(
        Spec(
            "list",
            f"session/list {page} page, archived={mode} (10% archived), p50 µs",
            keys.LIST_ARCHIVED.format(page=page, mode=mode),
            None,
            "value",
            300.0,
            "≤ 300 µs at 1M",
            judged_from=1_000_000,
        )
        for mode in ("only", "include")
        for page in ("first", "deep")
    ),
    Spec(
        "fork",
        "SessionRegistry.fork of a 10,000-event session, p50 ms",
        keys.FORK_10K,
        None,
        "value",
        50_000.0,
        "≤ 50 ms",
    ),
    Spec("list", "session/list over stdio ÷ in process (time)", keys.STDIO_LIST, keys.LIST_FIRST, "time"),
    Spec(
        "stream",
        "change stream to 10 subscribers, diffs/s each",
        keys.DIFFS_PER_S.format(subscribers=10),
        None,
        "value",
        100_000.0,
        "≥ 100,000/s",
        higher=True,
    ),
)
