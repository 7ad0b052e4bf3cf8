"""The PostgreSQL figures that take other processes (``postgres_registry.py`` calls them), each beside raw psycopg
doing the same in the same run: writer processes side by side, a fresh process to its first page, and a commit in
one process waking another (a host) up.

Writer processes start, import, connect and make their first session, then wait at a barrier: the clock runs
from the release, for every process at once, so ``count`` processes are really ``count`` at a time.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import keys
from benchmarks.figures import Figure, Quantity, latency, throughput
from benchmarks.machine import BusyMeter
from benchmarks.registry_bench import first_answer_of

if TYPE_CHECKING:
    from registry import SessionRegistry

__all__ = ["first_pages", "notification", "raw_schema", "raw_table", "writers"]

_ROOT = Path(__file__).resolve().parent.parent
_RAW_CHANNEL = "acp_registry_bench_raw"


def raw_schema(schema: str) -> str:
    """The schema of the raw baselines' tables beside the store's ``schema`` (a store's schema holds its own
    tables alone)."""
    return f"{schema}_raw"


def raw_table(schema: str) -> str:
    """The table every raw INSERT + COMMIT goes to (made by ``postgres_registry``)."""
    return f"{raw_schema(schema)}.raw_turns"


def _insert(schema: str) -> bytes:
    return f"INSERT INTO {raw_table(schema)} (session, data) VALUES (%s, %s)".encode()


# -- writer processes -----------------------------------------------------------------------------------------


def _writer(url: str, server: str, schema: str, seconds: float, kind: str, gate: Any, out: Any) -> None:
    """Create a session, then 4 ``record_activity`` on it, over and over (``raw``: INSERT + COMMIT; ``store``: a
    bare store's append of one event, in a schema of its own) for ``seconds`` after the gate opens; the duration
    of every operation goes to ``out``."""
    import psycopg  # noqa: PLC0415

    from events import SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415

    durations: list[float] = []
    if kind == "store":
        with PostgresStore(server, schema=_store_schema(schema)) as store:
            own = f"w-{os.getpid()}"
            store.append(own, [SessionUpdated(at=0)])
            gate.wait()
            end = time.perf_counter() + seconds
            while (start := time.perf_counter()) < end:
                store.append(own, [SessionUpdated(at=len(durations), messages=1)])
                durations.append(time.perf_counter() - start)
    elif kind == "raw":
        with psycopg.connect(server, autocommit=True, prepare_threshold=0) as conn:
            insert = _insert(schema)
            conn.execute(insert, ("s-x", b"y" * 60))
            gate.wait()
            end = time.perf_counter() + seconds
            while (start := time.perf_counter()) < end:
                conn.execute(insert, ("s-x", b"y" * 60))
                durations.append(time.perf_counter() - start)
    else:
        with SessionRegistry(PostgresStore.from_url(url), follow=False, owns_store=True) as registry:
            durations = registry_mix(registry, seconds, gate.wait)
    out.put(durations)


def registry_mix(registry: SessionRegistry, seconds: float, ready: Callable[[], object]) -> list[float]:
    """A writer process's work on the registry: a session of its own, then ``record_activity`` on it, a new one
    every fifth operation, for ``seconds`` after ``ready()`` returns; the seconds of each operation."""
    own = registry.create("/work/writers").session_id
    ready()
    durations: list[float] = []
    end = time.perf_counter() + seconds
    n = 0
    while (start := time.perf_counter()) < end:
        if n % 5 == 4:
            own = registry.create("/work/writers").session_id
        else:
            registry.record_activity(own, messages=1)
        durations.append(time.perf_counter() - start)
        n += 1
    return durations


def _lock_waiters(server: str) -> int:
    """Backends waiting for a lock right now (0 when the server cannot be asked: a sample lost, not the run)."""
    import psycopg  # noqa: PLC0415

    try:
        with psycopg.connect(server, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            return int(row[0]) if row else 0
    except psycopg.OperationalError:
        return 0


def _store_schema(schema: str) -> str:
    """The schema of the bare store's writers beside the registry's (a store without a read model appending to the
    registry's own would leave its read model behind)."""
    return f"{schema}_log"


def _side_by_side(url: str, server: str, schema: str, count: int, seconds: float, kind: str) -> dict[str, Figure]:
    context = multiprocessing.get_context("spawn")
    gate, queue = context.Barrier(count + 1), context.Queue()
    procs = [
        context.Process(target=_writer, args=(url, server, schema, seconds, kind, gate, queue)) for _ in range(count)
    ]
    for proc in procs:
        proc.start()
    gate.wait()
    busy = BusyMeter()
    waits = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        waits.append(_lock_waiters(server))
        time.sleep(0.1)
    cpu = busy.fraction()
    durations = [d for _ in procs for d in queue.get()]
    for proc in procs:
        proc.join()
    key = {"raw": keys.PG_RAW_WRITERS, "store": keys.PG_STORE_WRITERS, "registry": keys.PG_WRITERS}[kind]
    key = key.format(count=count)
    figures: dict[str, Figure] = {key: latency(durations), keys.rate_key(key): throughput(len(durations), seconds)}
    if kind == "registry":
        figures[keys.PG_WRITERS_CPU.format(count=count)] = Quantity(value=cpu * 100, unit="%")
        figures[keys.PG_WRITERS_WAITS.format(count=count)] = Quantity(value=statistics.fmean(waits or [0]), unit="")
    return figures


def writers(url: str, server: str, schema: str, counts: tuple[int, ...], seconds: float) -> dict[str, Figure]:
    """``count`` registry writer processes, then as many bare store ones, then as many raw ones, for each count in
    turn."""
    import psycopg  # noqa: PLC0415

    figures: dict[str, Figure] = {}
    try:
        for count in counts:
            for kind in ("registry", "store", "raw"):
                figures.update(_side_by_side(url, server, schema, count, seconds, kind))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{_store_schema(schema)}" CASCADE')
    return figures


# -- a fresh process to its first page --------------------------------------------------------------------------

# A fresh process that answers like `serve` (one JSON line for request id 2) with the page it read through a bare
# psycopg connection: what importing psycopg, connecting and one query cost, without the registry.
_RAW_PAGE = """
import json, sys
import psycopg
sys.stdin.readline(); sys.stdin.readline()
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    rows = conn.execute(sys.argv[2]).fetchall()
    sys.stdout.write(json.dumps({"id": 2, "result": [[r[0], r[1], r[2].hex()] for r in rows]}) + "\\n")
    sys.stdout.flush()
    sys.stdin.read()
"""


def first_pages(url: str, server: str, page_query: str, runs: int) -> dict[str, Figure]:
    """A fresh ``acp-registry serve`` to its first page, and a fresh raw process to the same rows, taking turns;
    the resident memory of each after its page (median)."""
    serve = [str(Path(sys.executable).with_name("acp-registry")), "serve", "--store", url]
    raw = [sys.executable, "-c", _RAW_PAGE, server, page_query]
    samples: dict[str, list[tuple[float, int]]] = {keys.PG_SERVE_FIRST: [], keys.PG_RAW_FIRST: []}
    for _ in range(runs):
        samples[keys.PG_SERVE_FIRST].append(first_answer_of(serve))
        samples[keys.PG_RAW_FIRST].append(first_answer_of(raw))
    figures: dict[str, Figure] = {}
    for key, rss_key in ((keys.PG_SERVE_FIRST, keys.PG_SERVE_RSS), (keys.PG_RAW_FIRST, keys.PG_RAW_RSS)):
        figures[key] = latency([s for s, _ in samples[key]], note=f"{runs} fresh processes")
        rss = statistics.median(r for _, r in samples[key])
        figures[rss_key] = Quantity(value=rss, unit="B", note=f"VmRSS after the first page, median of {runs}")
    return figures


# -- cross-host notification ------------------------------------------------------------------------------------


def _pinger(url: str, server: str, schema: str, count: int, gate: Any) -> None:
    """``count`` pings of each kind, taking turns 10 ms apart: a store append, and a raw INSERT + pg_notify in one
    statement and one commit; each carries its commit's wall-clock time."""
    import psycopg  # noqa: PLC0415

    from events import SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    notify = (
        f"WITH row AS (INSERT INTO {raw_table(schema)} (session, data) VALUES ('ping', '') RETURNING n)"
        f" SELECT pg_notify('{_RAW_CHANNEL}', %s) FROM row"
    ).encode()
    with PostgresStore.from_url(url) as store, psycopg.connect(server, autocommit=True) as conn:
        gate.wait()
        for _ in range(count):
            time.sleep(0.01)
            store.append("ping", [SessionUpdated(at=time.time_ns(), messages=0)])
            time.sleep(0.01)
            conn.execute(notify, (str(time.time_ns()),))


def _listen_raw(server: str, count: int, ready: threading.Event, delays: list[float]) -> None:
    import psycopg  # noqa: PLC0415

    try:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"LISTEN {_RAW_CHANNEL}")
            ready.set()
            for note in conn.notifies(timeout=60, stop_after=count):
                delays.append((time.time_ns() - int(note.payload)) / 1e9)
    except psycopg.OperationalError:
        ready.set()  # the connection was lost (a server restart): the figure keeps the pings it has, and says so


def notification(url: str, server: str, schema: str, count: int, load: int, seconds: float) -> dict[str, Figure]:
    """A store subscription here, and a raw LISTEN connection on a thread; another process pings both in turn,
    while ``load`` registry writer processes run for ``seconds``."""
    from events import SessionCreated, SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    context = multiprocessing.get_context("spawn")
    delays: list[float] = []
    raw_delays: list[float] = []
    with PostgresStore.from_url(url) as store:
        store.append("ping", [SessionCreated(cwd="/ping", at=1)])
        gate, queue = context.Barrier(load + 2), context.Queue()
        loaders = [
            context.Process(target=_writer, args=(url, server, schema, seconds, False, gate, queue))
            for _ in range(load)
        ]
        pinger = context.Process(target=_pinger, args=(url, server, schema, count, gate))
        for proc in [*loaders, pinger]:
            proc.start()
        listening = threading.Event()
        listener = threading.Thread(target=_listen_raw, args=(server, count, listening, raw_delays))
        listener.start()
        listening.wait(30)
        with store.subscribe() as subscription:
            gate.wait()
            deadline = time.monotonic() + 60 + count * 0.05
            while len(delays) < count and time.monotonic() < deadline:
                for record in subscription.poll(1):
                    if record.session_id == "ping" and isinstance(record.event, SessionUpdated):
                        delays.append((time.time_ns() - record.event.at) / 1e9)
        listener.join()
        pinger.join()
        for _ in loaders:
            queue.get()
        for proc in loaders:
            proc.join()
    note = f"{len(delays)} pings under {load} writer processes"
    figures: dict[str, Figure] = {keys.PG_NOTIFY: latency(delays, note=note)}
    if raw_delays:
        figures[keys.PG_RAW_NOTIFY] = latency(raw_delays, note=f"{len(raw_delays)} pings, taking turns with ours")
    return figures
