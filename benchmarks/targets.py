"""The targets a benchmark run is judged by, as data: each row names the figure of ours, the baseline it is divided
by (measured in the same run), the kind of ratio, and the target; the target's text in the report is derived from
the target itself, and ``Spec.judge`` turns a stage's figures into the report's ``Ratio`` row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import msgspec

from benchmarks import keys
from benchmarks.figures import Figure, Latency, Quantity, Throughput
from benchmarks.keys import rate_key

__all__ = ["POSTGRES_SPECS", "SPECS", "Ratio", "Spec"]

Kind = Literal["rate", "time", "value", "size"]


class Ratio(msgspec.Struct, frozen=True, kw_only=True):
    """``ours / baseline``: a rate ratio (> 1 is faster) or a time ratio (< 1 is faster), per ``kind``."""

    topic: str
    measure: str
    sessions: int
    kind: Kind
    ours: float | None
    baseline: float | None
    ratio: float | None
    target: str
    met: bool | None


def _value(figure: Figure | None, field: str) -> float | None:
    if isinstance(figure, Throughput):
        return figure.per_s
    if isinstance(figure, Latency):
        return float(getattr(figure, field))
    if isinstance(figure, Quantity):
        return figure.value
    return None


def _amount(target: float, unit: str) -> str:
    if unit == "/s":
        return f"{target:,.0f}/s"
    if target >= 1e5:
        return f"{target / 1e6:g} s"
    return f"{target / 1e3:g} ms" if target >= 1e3 else f"{target:g} µs"


@dataclass(frozen=True)
class Spec:
    topic: str
    measure: str
    ours: str
    baseline: str | None  # None: compare ``ours`` with the target itself
    kind: Kind
    target: float | None = None  # rate: ratio >= target; time, size: ratio <= target; value: see ``unit``
    judged_from: int = 0  # a target set "at 1M" is judged at that history size and above, not below
    field: Literal["p50_us", "p99_us"] = "p50_us"
    unit: Literal["µs", "/s"] = "µs"  # a value's: a time (a maximum) or a rate (a minimum)
    note: str = ""  # the target column's text where there is no target

    @property
    def at_least(self) -> bool:
        return self.kind == "rate" or (self.kind == "value" and self.unit == "/s")

    @property
    def target_text(self) -> str:
        if self.target is None:
            return self.note
        if self.kind == "value":
            amount = _amount(self.target, self.unit)
        else:
            amount = f"1/{1 / self.target:,.0f}" if self.target < 0.01 else f"{self.target:.3g}x"
        at = {0: "", 100_000: " at 100k", 1_000_000: " at 1M"}.get(self.judged_from, f" at {self.judged_from:,}")
        return f"{'≥' if self.at_least else '≤'} {amount}{at}"

    def judge(self, sessions: int, figures: Mapping[str, Figure]) -> Ratio:
        """The row at a history of ``sessions`` sessions: ``ratio`` None when a figure was not measured."""
        ours = _value(figures.get(self.ours), self.field)
        base = None if self.baseline is None else _value(figures.get(self.baseline), self.field)
        ratio = ours  # without a baseline, an absolute check: the figure itself against the target
        if self.baseline is not None:
            ratio = None if ours is None or not base else ours / base
        met = None
        if ratio is not None and self.target is not None and sessions >= self.judged_from:
            met = ratio >= self.target if self.at_least else ratio <= self.target
        return Ratio(
            topic=self.topic,
            measure=self.measure,
            sessions=sessions,
            kind=self.kind,
            ours=ours,
            baseline=base,
            ratio=ratio,
            target=self.target_text,
            met=met,
        )


_1M = 1_000_000
_SINGLE, _FSYNC = rate_key(keys.OURS_SINGLE), rate_key(keys.FSYNC)

SPECS = (
    Spec("append", "durable single-event append ÷ disk fsync", _SINGLE, _FSYNC, "rate", 0.9),
    Spec(
        "append",
        "durable single-event append ÷ raw sqlite3 durable insert",
        _SINGLE,
        rate_key(keys.RAW_SINGLE),
        "rate",
        0.8,
    ),
    Spec(
        "append",
        "8 threads appending durably ÷ 1 thread (group commit)",
        keys.OURS_THREADS_8,
        keys.OURS_THREADS_1,
        "rate",
        4.0,
    ),
    Spec(
        "append",
        "batched import (append_batch, 1000 sessions/tx, durable) ÷ eventsourcing bulk save",
        keys.OURS_IMPORT,
        keys.ES_BULK,
        "rate",
        5.0,
    ),
    Spec(
        "append",
        "durable single-event append ÷ eventsourcing get+command+save",
        _SINGLE,
        rate_key(keys.ES_COMMAND),
        "rate",
    ),
    Spec(
        "append",
        "batched append, durable ÷ eventsourcing save per aggregate (durable)",
        rate_key(keys.OURS_BATCH),
        rate_key(keys.ES_SAVE),
        "rate",
        5.0,
    ),
    Spec(
        "append",
        "batched append, synchronous=normal ÷ eventsourcing save per aggregate (durable)",
        keys.OURS_LOAD,
        rate_key(keys.ES_SAVE),
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
        note="(the ≥ 10x target is the rebuild's, below)",
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
    ),
    Spec(
        "replay",
        "projection rebuild ÷ eventsourcing recorder read+decode",
        keys.REBUILD,
        keys.ES_NOTIFICATIONS,
        "rate",
        10.0,
    ),
    Spec(
        "replay",
        "replay --at head/2 from kept snapshots ÷ full fold of the log (time)",
        keys.REPLAY_HALF,
        keys.FULL_FOLD,
        "time",
        0.1,
        _1M,
    ),
    Spec(
        "start",
        "read-model tables built from the log (first open) ÷ the reference fold",
        keys.BUILD,
        keys.REBUILD,
        "rate",
    ),
    *(
        Spec(
            "start",
            f"serve to first session/list ÷ the same at 1,000 sessions{at} (time)",
            keys.SERVE_FIRST,
            keys.SERVE_FIRST_1K,
            "time",
            target,
            size,
        )
        for at, target, size in (("", 1.25, 100_000), (", at 1M", 1.5, _1M))
    ),
    Spec(
        "start",
        "serve to first session/list ÷ folding in memory from the newest snapshot (time)",
        keys.SERVE_FIRST,
        keys.SERVE_FIRST_SNAPSHOT,
        "time",
        0.1,
        _1M,
    ),
    Spec(
        "start",
        "serve to first session/list ÷ the same on an empty store (time)",
        keys.SERVE_FIRST,
        keys.SERVE_FIRST_EMPTY,
        "time",
    ),
    *(
        Spec(
            "start",
            f"serve RSS after the first page ÷ the same at 1,000 sessions{at}",
            keys.SERVE_RSS,
            keys.SERVE_RSS_1K,
            "size",
            target,
            size,
        )
        for at, target, size in (("", 1.3, 100_000), (", at 1M", 1.5, _1M))
    ),
    *(
        Spec("start", f"acp-registry {command}, whole process, p50 ms", key, None, "value", 500_000.0, _1M)
        for command, key in (("list", keys.CLI_LIST), ("show", keys.CLI_SHOW))
    ),
    Spec(
        "append",
        "SessionRegistry.create (durable, tables kept up) ÷ bare durable append",
        keys.WRITE_CREATE,
        keys.WRITE_APPEND,
        "rate",
        0.8,
    ),
    Spec(
        "list", "JSONL listing (agents today) ÷ page encode floor (time)", keys.JSONL_LISTING, keys.PAGE_FLOOR, "time"
    ),
    Spec("list", "session/list first page ÷ page encode floor (time)", keys.LIST_FIRST, keys.PAGE_FLOOR, "time", 2.0),
    Spec("list", "session/list deep page ÷ page encode floor (time)", keys.LIST_DEEP, keys.PAGE_FLOOR, "time", 2.0),
    Spec(
        "list",
        "session/list first page ÷ JSONL listing (time)",
        keys.LIST_FIRST,
        keys.JSONL_LISTING,
        "time",
        1 / 50_000,
        100_000,
    ),
    Spec(
        "stream",
        "cross-process notification p99 (store subscription), ms",
        keys.SUBSCRIPTION,
        None,
        "value",
        50_000.0,
        field="p99_us",
    ),
    Spec(
        "stream",
        "change stream to 1 subscriber, diffs/s",
        keys.DIFFS_PER_S.format(subscribers=1),
        None,
        "value",
        200_000.0,
        unit="/s",
    ),
    *(
        Spec("list", f"session/list {title}, p50 µs", keys.LIST[page], None, "value", 300.0, _1M)
        for page, title in (
            ("first", "first page"),
            ("deep", "deep page"),
            ("first_cwd", "first page of one cwd"),
            ("deep_cwd", "deep page of one cwd"),
        )
    ),
    *(
        Spec(
            "list",
            f"session/list {page} page, archived={mode} (10% archived), p50 µs",
            keys.LIST_ARCHIVED.format(page=page, mode=mode),
            None,
            "value",
            300.0,
            _1M,
        )
        for mode in ("only", "include")
        for page in ("first", "deep")
    ),
    Spec("fork", "SessionRegistry.fork of a 10,000-event session, p50 ms", keys.FORK_10K, None, "value", 50_000.0),
    Spec("list", "session/list over stdio ÷ in process (time)", keys.STDIO_LIST, keys.LIST_FIRST, "time"),
    *(
        Spec(
            "list",
            f"session/list {title} from a warm serve ÷ a raw stdio server's (time)",
            keys.STDIO_PAGE[page],
            keys.RAW_STDIO[page],
            "time",
            2.0,
            _1M,
        )
        for page, title in keys.STDIO_PAGES.items()
    ),
    Spec(
        "stream",
        "change stream to 10 subscribers, diffs/s each",
        keys.DIFFS_PER_S.format(subscribers=10),
        None,
        "value",
        100_000.0,
        unit="/s",
    ),
    Spec(
        "stream",
        "change_info with 100 in-process subscribers ÷ none (writes/s, bursts of 100)",
        keys.WRITER_SUBSCRIBERS.format(subscribers=100),
        keys.WRITER_SUBSCRIBERS.format(subscribers=0),
        "rate",
        1 / 1.2,
    ),
)
"""The SQLite run's targets (``benchmarks/run.py``'s stages)."""

_RAW_INSERT = rate_key(keys.PG_RAW_INSERT)


def _writers(count: int) -> str:
    return f"{count} writer process{'es' if count > 1 else ''}"


_PERCENTILES: tuple[Literal["p50_us", "p99_us"], ...] = ("p50_us", "p99_us")
_WRITERS_SCALE = {4: 1.2}  # throughput over a single writer process's, on different sessions
_WRITERS_RAW = {4: 0.4}  # throughput over as many raw INSERT + COMMIT processes

POSTGRES_SPECS = (
    *(
        Spec("pg append", f"postgres: {what} ÷ raw INSERT + COMMIT", rate_key(key), _RAW_INSERT, "rate", target)
        for what, key, target in (
            ("durable append of one event", keys.PG_APPEND, 0.8),
            ("SessionRegistry.create", keys.PG_CREATE, 0.5),
            ("SessionRegistry.record_activity", keys.PG_RECORD, 0.5),
        )
    ),
    Spec(
        "pg append", "postgres: append_batch import ÷ raw COPY (sessions/s)", keys.PG_IMPORT, keys.PG_RAW_COPY, "rate"
    ),
    Spec("pg append", "postgres: the log's bytes ÷ the raw COPY table's", keys.PG_LOG_BYTES, keys.PG_RAW_BYTES, "size"),
    *(
        Spec(
            "pg list",
            f"postgres: session/list {title} ÷ raw keyset query (time)",
            keys.PG_LIST[page],
            keys.PG_RAW_LIST[page],
            "time",
            2.0,
            _1M,
        )
        for page, title in keys.PAGES.items()
    ),
    Spec(
        "pg list",
        "postgres: session/list page 90% deep, changed since the walk began ÷ raw keyset query (time)",
        keys.PG_LIST_CHANGED,
        keys.PG_RAW_LIST["deep"],
        "time",
        2.0,
        _1M,
    ),
    *(
        Spec(
            "pg list",
            f"postgres: session/list {title} from a warm serve ÷ a raw stdio server's (time)",
            keys.PG_STDIO[page],
            keys.PG_RAW_STDIO[page],
            "time",
            2.0,
            _1M,
        )
        for page, title in keys.STDIO_PAGES.items()
    ),
    Spec(
        "pg start",
        "postgres: fresh serve to first page ÷ fresh raw psycopg process (time)",
        keys.PG_SERVE_FIRST,
        keys.PG_RAW_FIRST,
        "time",
    ),
    Spec("pg start", "postgres: serve RSS ÷ raw psycopg process RSS", keys.PG_SERVE_RSS, keys.PG_RAW_RSS, "size"),
    *(
        Spec(
            "pg writers",
            f"postgres{who}: {_writers(count)} ÷ as many of raw INSERT + COMMIT (ops/s)",
            rate_key(key.format(count=count)),
            rate_key(keys.PG_RAW_WRITERS.format(count=count)),
            "rate",
            _WRITERS_RAW.get(count),
        )
        for who, key in (("", keys.PG_WRITERS), (" store", keys.PG_STORE_WRITERS))
        for count in keys.WRITER_COUNTS
    ),
    *(
        Spec(
            "pg writers",
            f"postgres{who}: {_writers(count)} ÷ 1 (ops/s)",
            rate_key(key.format(count=count)),
            rate_key(key.format(count=1)),
            "rate",
            _WRITERS_SCALE.get(count),
        )
        for who, key in (("", keys.PG_WRITERS), (" store", keys.PG_STORE_WRITERS))
        for count in keys.WRITER_COUNTS[1:]
    ),
    *(
        Spec(
            "pg writers",
            f"postgres: {_writers(count)}, p99 per operation ÷ raw p99 (time)",
            keys.PG_WRITERS.format(count=count),
            keys.PG_RAW_WRITERS.format(count=count),
            "time",
            field="p99_us",
        )
        for count in keys.WRITER_COUNTS
    ),
    Spec(
        "pg stream",
        "postgres: cross-host notification p99 under 4 writer processes, ms",
        keys.PG_NOTIFY,
        None,
        "value",
        50_000.0,
        field="p99_us",
    ),
    *(
        Spec(
            "pg stream",
            f"postgres: cross-host notification ÷ raw LISTEN/NOTIFY, {field[:3]} (time)",
            keys.PG_NOTIFY,
            keys.PG_RAW_NOTIFY,
            "time",
            field=field,
        )
        for field in _PERCENTILES
    ),
)
"""The PostgreSQL part's targets (``benchmarks/postgres_registry.py``'s stages), each against raw psycopg."""
