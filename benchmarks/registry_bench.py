"""The registry's own measurements (``registry/``: the read model, ``SessionRegistry``, ``session/list`` pages,
``acp-registry serve``, time travel, the change stream), each at every history size of the run.

The harness calls every hook below with the stage's SQLite store, which holds ``sessions`` sessions appended
straight to the log (as an import would): the first hook to open a registry on it therefore builds the read
model's tables (and kept snapshots) from the log, which ``read_model_build`` measures. Hooks never append to the
log: the next stage keeps growing the same file. ``report.py`` turns the figures into ratios against baselines
of the same stage (the page-encode floor, the JSONL listing, eventsourcing's recorder, a 1,000-session store
measured the same way in the same stage, the in-memory fold from the newest snapshot, a full fold of the log).
"""

from __future__ import annotations

import functools
import json
import os
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from benchmarks import keys, stdio_pages
from benchmarks.change_stream import fastest_writers, sync_seconds
from benchmarks.figures import Figure, Latency, Quantity, latency, repeat_rate, throughput
from events import AppendRequest, SessionCreated, SessionUpdated, SqliteStore
from registry import SessionRegistry
from registry.backends import backend_for
from registry.projection import Projection
from registry.timetravel import projection_at

_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["HOOKS", "Hook", "StageContext", "first_answer", "first_answer_of"]


@dataclass(frozen=True)
class StageContext:
    """What a hook may use at one history size."""

    sessions: int  # sessions appended so far (deleted ones included)
    live_sessions: int  # sessions not deleted: what session/list can return
    events: int
    store_path: Path  # the SQLite event log holding them; hooks never append to it
    work_dir: Path  # scratch space for the hook (small stores, child processes' files)
    page_floor: Latency  # encoding one page of SessionInfo alone, measured in this run
    cwds: list[str]  # working directories in the history, for the cwd-filtered pages
    rounds: int = 5  # fresh processes per figure and alternating rounds of the writer figure (the smoke test: 2)


Hook = Callable[[StageContext], dict[str, Figure] | None]


def _url(path: Path) -> str:
    return f"sqlite://{path}"


def _registry(path: Path, **options: Any) -> SessionRegistry:
    """A registry over the stage's log (no follower thread); it folds only what the tables lack."""
    return SessionRegistry(SqliteStore(path), follow=False, owns_store=True, **options)


def _timed(call: Callable[[], object], calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def read_model_build(ctx: StageContext) -> dict[str, Figure] | None:
    """The first open after the log grew by a bulk import: the tables catch up from their checkpoint (at the
    first stage, built from the whole log), keeping snapshots for time travel on the way (keys.BUILD, events/s)."""
    with SqliteStore(ctx.store_path) as store:
        before = _checkpoint(ctx.store_path)
        head = store.head()
        start = time.perf_counter()
        with SessionRegistry(store, follow=False):
            pass
        seconds = time.perf_counter() - start
    return {keys.BUILD: throughput(head - before, seconds, note=f"from position {before:,} to {head:,}")}


def _checkpoint(path: Path) -> int:
    import sqlite3  # noqa: PLC0415

    with sqlite3.connect(path) as db:
        try:
            row = db.execute("SELECT value FROM rm_meta WHERE key = 'checkpoint'").fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(row[0]) if row else 0


def _deep_cursor(registry: SessionRegistry, cwd: str | None, depth: float = 0.9) -> str | None:
    """The cursor of a page ``depth`` of the way through a walk (walked page by page, as a client would)."""
    return stdio_pages.walk(registry, cwd, depth)[0]


def session_list_in_process(ctx: StageContext) -> dict[str, Figure] | None:
    """``session/list`` in process through ``SessionRegistry`` (tables): first and deep page (90% of the way
    through a walk), with and without ``cwd``; p50/p99 over 2,000 calls each, built and encoded to JSON as the
    wire needs it. Targets: p50 <= 300 us at 1M; ratio to ``page_floor`` reported."""
    encode = msgspec.json.Encoder().encode
    with _registry(ctx.store_path) as registry:
        counts = registry.read_model.cwd_counts()
        cwd = max(ctx.cwds, key=lambda c: counts.get(c, 0))
        deep = _deep_cursor(registry, None)
        deep_cwd = _deep_cursor(registry, cwd)
        cases: dict[str, Callable[[], bytes]] = {
            keys.LIST_FIRST: lambda: encode(registry.list()),
            keys.LIST_DEEP: lambda: encode(registry.list(cursor=deep)),
            keys.LIST_FIRST_CWD: lambda: encode(registry.list(cwd=cwd)),
            keys.LIST_DEEP_CWD: lambda: encode(registry.list(cwd=cwd, cursor=deep_cwd)),
        }
        figures: dict[str, Figure] = {}
        for key, call in cases.items():
            call()
            figures[key] = latency(_timed(call, 2_000), note="page of 50 from the tables, built and JSON-encoded")
        return figures


def _walk_cursors(registry: SessionRegistry, archived: str, depth: float = 0.9) -> str | None:
    """The cursor of the page ``depth`` of the way through a walk of the ``archived`` list (walked whole first:
    the read model counts live sessions, not archived ones)."""
    cursors: list[str] = []
    cursor: str | None = None
    while True:
        page = registry.list(cursor=cursor, archived=archived)
        if not isinstance(page.next_cursor, str):
            break
        cursor = page.next_cursor
        cursors.append(cursor)
    return cursors[int(len(cursors) * depth)] if cursors else None


def _page(registry: SessionRegistry, cursor: str | None, archived: str) -> bytes:
    return _encode(registry.list(cursor=cursor, archived=archived))


_encode = msgspec.json.Encoder().encode


def session_list_archived(ctx: StageContext) -> dict[str, Figure] | None:
    """``session/list`` with the ``archived`` filter (``only``, ``include``; the generated history archives every
    tenth session), first and deep page like ``session_list_in_process``; p50/p99 over 2,000 calls each.
    Target: p50 <= 300 us at 1M, ``only`` included."""
    figures: dict[str, Figure] = {}
    with _registry(ctx.store_path) as registry:
        for mode in ("only", "include"):
            deep = _walk_cursors(registry, mode)
            cases: dict[str, Callable[[], bytes]] = {
                keys.LIST_ARCHIVED.format(page="first", mode=mode): functools.partial(_page, registry, None, mode),
                keys.LIST_ARCHIVED.format(page="deep", mode=mode): functools.partial(_page, registry, deep, mode),
            }
            for key, call in cases.items():
                call()
                figures[key] = latency(_timed(call, 2_000), note=f"archived={mode}, page of 50 from the tables")
    return figures


def fork(ctx: StageContext) -> dict[str, Figure] | None:
    """``SessionRegistry.fork`` of a session of 10,000 events (FORK_10K): a reference to the source, durable, the
    tables kept up, on a store in the work dir; 20 forks. Target: <= 50 ms."""
    path = ctx.work_dir / "fork-10k.db"
    with SessionRegistry(SqliteStore(path), follow=False, owns_store=True) as registry:
        if registry.state("long") is None:
            registry.create("/work/bench", session_id="long", at=1_000_000)
            turns = [SessionUpdated(at=2_000_000 + n, messages=1, payload={"turn": n}) for n in range(9_999)]
            registry.store.append("long", turns, 1)
            registry.sync()
        base = registry.store.head()
        samples = _timed(lambda: registry.fork("long", "/work/fork"), 20)
        assert len(registry.store.read_stream("long")) == 10_000 and registry.store.head() == base + 20
    return {keys.FORK_10K: latency(samples, note="20 forks of a 10,000-event session")}


# -- fresh processes ---------------------------------------------------------------------------------------

_SERVE_IN_MEMORY = """
import sys
from registry.acp.agent import serve
sys.exit(serve(sys.argv[1], read_model="memory"))
"""

_LIST = b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}\n'
_INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


def _serve_command(url: str, kind: str) -> list[str]:
    if kind == "tables":
        return [str(Path(sys.executable).with_name("acp-registry")), "serve", "--store", url]
    return [sys.executable, "-c", _SERVE_IN_MEMORY, url]


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")  # pragma: no cover - Linux only


def first_answer(url: str, kind: str) -> tuple[float, int]:
    """Seconds from spawning a serve process to its session/list answer (initialize first, as clients do), and
    its resident memory then."""
    return first_answer_of(_serve_command(url, kind))


def first_answer_of(command: list[str]) -> tuple[float, int]:
    """Seconds from spawning ``command`` to its answer to request 2 (sent after an initialize, as clients do), and
    its resident memory then; it must answer one JSON line per request and end when its input does."""
    start = time.perf_counter()
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=_ROOT
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(_INITIALIZE + _LIST)
        child.stdin.flush()
        while True:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError(f"{command[0]} ended before answering")
            if json.loads(line).get("id") == 2:
                seconds = time.perf_counter() - start
                return seconds, _rss(child.pid)
    finally:
        child.stdin.close()
        child.wait(60)


def _small_store(ctx: StageContext, sessions: int) -> Path:
    """A store of ``sessions`` sessions shaped like the stage's (made once per run, kept in the work dir)."""
    path = ctx.work_dir / f"registry-{sessions}.db"
    if not path.exists():
        with SqliteStore(path, synchronous="off") as store:
            for begin in range(0, sessions, 5_000):  # a commit per 5,000 sessions, not two per session
                store.append_batch(
                    [
                        request
                        for n in range(begin, min(sessions, begin + 5_000))
                        for request in (
                            AppendRequest(
                                f"small-{n}", [SessionCreated(cwd=ctx.cwds[n % len(ctx.cwds)], at=n * 1_000_000)]
                            ),
                            AppendRequest(f"small-{n}", [SessionUpdated(at=n * 2_000_000, messages=2)]),
                        )
                    ]
                )
        with SessionRegistry(SqliteStore(path), follow=False, owns_store=True):
            pass  # its tables, as a store the registry has written would have
    return path


def serve_cold_start(ctx: StageContext) -> dict[str, Figure] | None:
    """A fresh ``acp-registry serve`` to its first ``session/list`` answer (imports and page cache charged as a
    user sees them): on the stage's store (keys.SERVE_FIRST), on a 1,000-session store (keys.SERVE_FIRST_1K), on an
    empty one (keys.SERVE_FIRST_EMPTY), and folding in memory from the newest kept snapshot as every process did before
    the tables (keys.SERVE_FIRST_SNAPSHOT); resident memory after the answer (keys.SERVE_RSS, keys.SERVE_RSS_1K). Flat
    (<= 1.25x the 1k figure at 100k, <= 1.5x at 1M), <= 0.1x the snapshot path at 1M, RSS <= 1.3x / 1.5x."""
    runs = ctx.rounds if ctx.events < 2_000_000 else min(3, ctx.rounds)
    cases = {
        keys.SERVE_FIRST: (_url(ctx.store_path), "tables", keys.SERVE_RSS),
        keys.SERVE_FIRST_1K: (_url(_small_store(ctx, 1_000)), "tables", keys.SERVE_RSS_1K),
        keys.SERVE_FIRST_EMPTY: (_url(_small_store(ctx, 0)), "tables", None),
    }
    figures: dict[str, Figure] = {}
    for key, (url, kind, rss_key) in cases.items():
        samples = [first_answer(url, kind) for _ in range(runs)]
        figures[key] = latency([s for s, _ in samples], note=f"{runs} fresh processes")
        if rss_key is not None:
            rss = statistics.median(r for _, r in samples)
            figures[rss_key] = Quantity(value=rss, unit="B", note=f"VmRSS after the first page, median of {runs}")
    snapshot_runs = min(3, ctx.rounds) if ctx.events < 2_000_000 else 1
    samples = [first_answer(_url(ctx.store_path), "memory") for _ in range(snapshot_runs)]
    figures[keys.SERVE_FIRST_SNAPSHOT] = latency(
        [s for s, _ in samples],
        note=f"{snapshot_runs} fresh processes; RSS {statistics.median(r for _, r in samples) / 1e6:.0f} MB",
    )
    return figures


def stdio_round_trip(ctx: StageContext) -> dict[str, Figure] | None:
    """``session/list`` first page over the pipes of a running ``acp-registry serve`` (keys.STDIO_LIST): JSON-RPC
    framing and the process hop beside the in-process figure."""
    child = subprocess.Popen(
        _serve_command(_url(ctx.store_path), "tables"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=_ROOT,
    )
    assert child.stdin is not None and child.stdout is not None
    samples = []
    try:
        child.stdin.write(_INITIALIZE)
        child.stdin.flush()
        child.stdout.readline()
        for n in range(600):
            request = b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}\n' % (n + 10)
            start = time.perf_counter()
            child.stdin.write(request)
            child.stdin.flush()
            while True:
                select.select([child.stdout], [], [])
                if b'"sessions"' in child.stdout.readline():
                    break
            if n >= 100:  # after a warm-up
                samples.append(time.perf_counter() - start)
    finally:
        child.stdin.close()
        child.wait(60)
    return {keys.STDIO_LIST: latency(samples, note="first page, 500 requests after 100 to warm up")}


def stdio_pages_beside_raw(ctx: StageContext) -> dict[str, Figure] | None:
    """``session/list`` from a warm ``serve`` over its pipes, first page and one 80% deep, beside a plain Python
    stdio server doing the raw keyset query of the same rows (``benchmarks.stdio_pages``), taking turns. Target:
    <= 2x the raw server's at 1M."""
    with _registry(ctx.store_path) as registry:
        cases = stdio_pages.cases(registry, keys.STDIO_PAGE, keys.RAW_STDIO)
    serve = _serve_command(_url(ctx.store_path), "tables")
    return stdio_pages.side_by_side(serve, [str(ctx.store_path), "sqlite"], cases)


def cli_commands(ctx: StageContext) -> dict[str, Figure] | None:
    """``acp-registry list`` and ``show SESSION`` as whole processes (keys.CLI_LIST, keys.CLI_SHOW). Target <= 0.5 s at
    1M."""
    command = str(Path(sys.executable).with_name("acp-registry"))
    url = _url(ctx.store_path)
    with _registry(ctx.store_path) as registry:
        some = registry.list().sessions[-1].session_id
    env = {**os.environ, "COLUMNS": "120"}
    figures: dict[str, Figure] = {}
    for key, argv in ((keys.CLI_LIST, ["list"]), (keys.CLI_SHOW, ["show", some])):
        samples = []
        for _ in range(ctx.rounds):
            start = time.perf_counter()
            subprocess.run([command, "--store", url, *argv], check=True, capture_output=True, env=env, cwd=_ROOT)
            samples.append(time.perf_counter() - start)
        figures[key] = latency(samples, note=f"{ctx.rounds} whole processes, output to a pipe")
    return figures


# -- the fold, time travel, writes -------------------------------------------------------------------------


def folds(ctx: StageContext) -> dict[str, Figure] | None:
    """The in-memory reference fold of the whole log through the lean read path (keys.REBUILD, events/s; target >= 10x
    eventsourcing's recorder read+decode); a full fold once (keys.FULL_FOLD, as ``replay`` did for any position) and
    ``replay --at head/2`` from the nearest kept snapshot (keys.REPLAY_HALF; target <= 0.1x the full fold at 1M)."""

    def fold() -> int:
        with SqliteStore(ctx.store_path) as store:
            projection = Projection(window=0)
            return projection.load(store.scan(0))

    figures: dict[str, Figure] = {keys.REBUILD: repeat_rate(fold, min_seconds=1.0, max_runs=3)}
    with SqliteStore(ctx.store_path) as store:
        head = store.head()
        start = time.perf_counter()
        Projection(window=0).load(store.scan(0, until=head))  # the whole log, no snapshot: what replay did before
        figures[keys.FULL_FOLD] = latency([time.perf_counter() - start], note="one fold of the whole log")
        samples = []
        for _ in range(3):
            start = time.perf_counter()
            travel = projection_at(backend_for(store), head // 2, keep=False)
            samples.append(time.perf_counter() - start)
        note = f"from the snapshot at {travel.snapshot:,}" if travel.snapshot is not None else "no snapshot"
        figures[keys.REPLAY_HALF] = latency(
            samples, note=f"3 runs; {note}, {head // 2 - (travel.snapshot or 0):,} events"
        )
    return figures


def writes(ctx: StageContext) -> dict[str, Figure] | None:
    """Durable writes with the read model kept up: ``SessionRegistry.create`` (the tables folded in the append's
    own transaction: keys.WRITE_CREATE) beside a bare durable ``append`` of the same event on the same file by a store
    that keeps no read model (keys.WRITE_APPEND), 300 of each, on a 10,000-session store kept in the work dir (hooks
    never grow the stage's own log). Target: >= 0.8x."""
    path = _small_store(ctx, 10_000)
    figures: dict[str, Figure] = {}
    with SessionRegistry(SqliteStore(path), follow=False, owns_store=True) as registry:
        base = registry.store.head()
        start = time.perf_counter()
        for n in range(300):
            registry.create("/work/bench", session_id=f"w{base}-{n}")
        figures[keys.WRITE_CREATE] = throughput(300, time.perf_counter() - start, note="durable, tables caught up")
    with SqliteStore(path) as store:  # a store instance of its own: no read model folds in its transactions
        start = time.perf_counter()
        for n in range(300):
            store.append(f"a{base}-{n}", [SessionCreated(cwd="/work/bench", at=time.time_ns())], 0)
        figures[keys.WRITE_APPEND] = throughput(300, time.perf_counter() - start, note="durable, the log alone")
    return figures


def change_stream(ctx: StageContext) -> dict[str, Figure] | None:
    """Diffs/s delivered end to end with 1 and 10 subscribers (keys.DIFFS_PER_S.format(subscribers=n)): as many
    activity events as the stage's log holds (2,000 to 100,000), on an in-memory log, from ``sync()`` (the
    follower's fold of the log; session/list's read model is kept up by the writers, outside the clock) until
    every subscriber, each on its own thread, has every diff. With n subscribers the rate is events/s (each of
    the n receives all of them). Targets: >= 200k diffs/s to one, >= 100k to ten. And the writer's rate with 100
    in-process subscribers beside none (keys.WRITER_SUBSCRIBERS): target at most 1.2x the time, >= 0.83x the rate."""
    figures: dict[str, Figure] = {}
    changes = max(2_000, min(100_000, ctx.events))
    for subscribers in (1, 10):  # without a subscriber no follower runs: there is no stream to time
        seconds = sync_seconds(subscribers, changes)
        figures[keys.DIFFS_PER_S.format(subscribers=subscribers)] = throughput(changes, seconds, note="each gets all")
    # What subscribers cost the writer: 10 bursts of 100 title changes on a file of its own (the subscribers catch
    # up between bursts, off the clock), with none and with 100 subscribers in the process, fastest of the rounds.
    for subscribers, (seconds, _median) in fastest_writers((0, 100), 100, bursts=10, rounds=ctx.rounds).items():
        figures[keys.WRITER_SUBSCRIBERS.format(subscribers=subscribers)] = throughput(
            1000, seconds, note=f"fastest of {ctx.rounds} alternating rounds"
        )
    return figures


HOOKS: dict[str, Hook] = {
    "read model build": read_model_build,
    "session/list in-process": session_list_in_process,
    "session/list archived": session_list_archived,
    "fork": fork,
    "serve cold start": serve_cold_start,
    "stdio round trip": stdio_round_trip,
    "stdio pages beside a raw server": stdio_pages_beside_raw,
    "cli commands": cli_commands,
    "folds and time travel": folds,
    "writes": writes,
    "change stream": change_stream,
}
