"""The registry on PostgreSQL, each figure beside a raw-psycopg baseline measured in the same run (interleaved).

    python -m benchmarks.postgres_registry [--url postgresql://postgres@127.0.0.1:5432/test] [--sizes 1000,100000]
        [--markdown benchmarks/results/postgres.md] [--json out.json]

Needs a PostgreSQL server: without one (``--url`` unreachable) it says so and exits 0 having measured nothing.
Each size gets a schema of its own (dropped at the end), filled straight through the log (``append_batch``, as an
import would) and then folded once into the read model. Measured, per size:

* durable ``append`` of one event, ``create``, ``record_activity`` - against a one-row ``INSERT`` + ``COMMIT``;
* ``append_batch`` import of 1,000-session batches - against ``COPY`` of the same rows' bytes;
* ``session/list`` first and deep page, with and without a cwd - against the raw keyset query of the same rows;
* a fresh ``acp-registry serve`` to its first page, and its RSS;
* 1, 2, 4, 8 writer processes, each creating and recording activity on sessions of its own - throughput and
  p99 per operation, against the same number of processes doing raw ``INSERT`` + ``COMMIT``; the server's lock
  waits and the CPU time of the machine during the run;
* cross-host notification: a subscribing process's delay from another process's commit to its wake-up, p50 and
  p99, under the load of 4 writer processes.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.args import bench_parser, postgres_or_skip
from benchmarks.figures import Figure, Latency, interleave, latency
from benchmarks.registry_bench import first_answer

_ROOT = Path(__file__).resolve().parent.parent
PAGE = 50
CWDS = 16


def _url(server: str, schema: str) -> str:
    return f"{server}{'&' if '?' in server else '?'}schema={schema}"


@contextmanager
def _schema(server: str, name: str) -> Iterator[str]:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    try:
        yield _url(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _fill(url: str, sessions: int) -> float:
    """``sessions`` sessions (created, then one turn) through ``append_batch``; returns sessions per second."""
    from events import AppendRequest, SessionCreated, SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    start = time.perf_counter()
    with PostgresStore.from_url(url) as store:
        for base in range(0, sessions, 1000):
            store.append_batch(
                [
                    AppendRequest(
                        f"s-{n:08d}",
                        [
                            SessionCreated(cwd=f"/work/p{n % CWDS}", at=n * 1_000_000),
                            SessionUpdated(at=n * 2_000_000, messages=2),
                        ],
                    )
                    for n in range(base, min(base + 1000, sessions))
                ]
            )
    return sessions / (time.perf_counter() - start)


def _copy_baseline(server: str, sessions: int) -> float:
    """Raw: the same number of 2-event sessions' bytes COPYed into a bare table, 1,000 sessions a transaction."""
    import psycopg  # noqa: PLC0415

    blob = b"x" * 60
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE raw_import (position bigint PRIMARY KEY, session text, data bytea)")
        start = time.perf_counter()
        for base in range(0, sessions, 1000):
            with conn.transaction(), conn.cursor().copy("COPY raw_import FROM STDIN") as copy:
                for n in range(base * 2, min(base + 1000, sessions) * 2):
                    copy.write_row((n, f"s-{n // 2:08d}", blob))
        return sessions / (time.perf_counter() - start)


class _Raw:
    """The baselines: a bare psycopg connection, statements prepared, autocommit."""

    def __init__(self, server: str, schema: str) -> None:
        import psycopg  # noqa: PLC0415

        self.conn = psycopg.connect(server, autocommit=True, prepare_threshold=0)
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {schema}.raw_turns (n bigserial PRIMARY KEY, session text, data bytea)"
        )
        self.insert = f"INSERT INTO {schema}.raw_turns (session, data) VALUES (%s, %s)".encode()
        self.schema = schema

    def insert_commit(self, _item: object) -> float:
        start = time.perf_counter()
        self.conn.execute(self.insert, ("s-x", b"y" * 60))
        return time.perf_counter() - start

    def page(self, cwd: str | None, after: tuple[int, str] | None) -> Callable[[object], float]:
        where = (
            "live AND archived = false"  # the registry's default list: archived sessions left out
            + (" AND cwd = %(cwd)s" if cwd else "")
            + (" AND (rank, session_id) > (%(r)s, %(s)s)" if after else "")
        )
        query = (
            f"SELECT rank, session_id, state FROM {self.schema}.rm_sessions WHERE {where}"
            f" ORDER BY rank, session_id LIMIT {PAGE + 1}"
        )
        params = {"cwd": cwd, "r": after[0] if after else None, "s": after[1] if after else None}

        def run(_item: object) -> float:
            start = time.perf_counter()
            self.conn.execute(query.encode(), params).fetchall()
            return time.perf_counter() - start

        return run


def _timed(call: Callable[[], object]) -> Callable[[object], float]:
    def run(_item: object) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    return run


def _deep(registry: Any, cwd: str | None, pages: int) -> tuple[str | None, tuple[int, str] | None]:
    """A cursor about ``pages`` pages deep and the sort key it continues after."""
    from registry.model import ListFilter  # noqa: PLC0415

    cursor = None
    for _ in range(pages):
        page = registry.list(cwd=cwd, cursor=cursor)
        if not isinstance(page.next_cursor, str):
            break
        cursor = page.next_cursor
    if cursor is None:
        return None, None
    walk = registry._cursors.decode(cursor, ListFilter(cwd))
    return cursor, (walk.rank, walk.session_id)


def in_process(server: str, url: str, schema: str, samples: int) -> dict[str, Figure]:
    from events import SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415

    figures: dict[str, Figure] = {}
    raw = _Raw(server, schema)
    store = PostgresStore.from_url(url)
    with SessionRegistry(store, follow=False, owns_store=True) as registry:
        mine = [registry.create("/work/bench").session_id for _ in range(20)]
        counter = iter(range(10**9))
        writes = interleave(
            {
                "raw_insert_commit": raw.insert_commit,
                "append": _timed(lambda: store.append(mine[0], [SessionUpdated(at=1, messages=1)])),
                "create": _timed(lambda: registry.create("/work/bench")),
                "record_activity": _timed(lambda: registry.record_activity(mine[next(counter) % 20], messages=1)),
            },
            range(samples),
        )
        figures.update({f"write.{k}": latency(v) for k, v in writes.items()})
        for cwd in (None, "/work/p3"):
            label = "cwd" if cwd else "all"
            deep_cursor, deep_after = _deep(registry, cwd, 10)
            timers: dict[str, Callable[[object], float]] = {
                "raw_first": raw.page(cwd, None),
                "first": _timed(functools.partial(registry.list, cwd=cwd)),
            }
            if deep_cursor is not None:
                timers["raw_deep"] = raw.page(cwd, deep_after)
                timers["deep"] = _timed(functools.partial(registry.list, cwd=cwd, cursor=deep_cursor))
            pages = interleave(timers, range(samples))
            figures.update({f"list_{label}.{k}": latency(v) for k, v in pages.items()})
    raw.conn.close()
    return figures


# -- writer processes ---------------------------------------------------------------------------------


def _writer(url: str, server: str, schema: str, seconds: float, raw: bool, out: Any) -> None:
    durations: list[float] = []
    if raw:
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server, autocommit=True, prepare_threshold=0) as conn:
            insert = f"INSERT INTO {schema}.raw_turns (session, data) VALUES (%s, %s)".encode()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                start = time.perf_counter()
                conn.execute(insert, ("s-x", b"y" * 60))
                durations.append(time.perf_counter() - start)
    else:
        from events.postgres import PostgresStore  # noqa: PLC0415
        from registry import SessionRegistry  # noqa: PLC0415

        with SessionRegistry(PostgresStore.from_url(url), follow=False, owns_store=True) as registry:
            own = registry.create("/work/writers").session_id
            end = time.perf_counter() + seconds
            n = 0
            while time.perf_counter() < end:
                start = time.perf_counter()
                if n % 5 == 0:
                    own = registry.create("/work/writers").session_id
                else:
                    registry.record_activity(own, messages=1)
                durations.append(time.perf_counter() - start)
                n += 1
    out.put(durations)


def _cpu_busy() -> tuple[float, float]:
    with open("/proc/stat") as stat:
        fields = [float(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _lock_waits(server: str) -> int:
    """Backends waiting for a lock right now (0 when the server cannot be asked: a sample lost, not the run)."""
    import psycopg  # noqa: PLC0415

    try:
        with psycopg.connect(server, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            return int(row[0]) if row else 0
    except psycopg.OperationalError:
        return 0


def writers(server: str, url: str, schema: str, counts: list[int], seconds: float) -> dict[str, Any]:
    """Throughput and p99 of ``count`` writer processes, registry then raw, one count after another."""
    context = multiprocessing.get_context("spawn")
    result: dict[str, Any] = {}
    for count in counts:
        for raw in (False, True):
            queue = context.Queue()
            procs = [
                context.Process(target=_writer, args=(url, server, schema, seconds, raw, queue)) for _ in range(count)
            ]
            for proc in procs:
                proc.start()
            time.sleep(min(2.0, seconds / 3))  # start-up (imports, pool) is not the steady state
            busy0, total0 = _cpu_busy()
            waits = []
            sample_end = time.perf_counter() + seconds / 3
            while time.perf_counter() < sample_end:
                waits.append(_lock_waits(server))
                time.sleep(0.05)
            busy1, total1 = _cpu_busy()
            durations = [d for _ in procs for d in queue.get()]
            for proc in procs:
                proc.join()
            lat = latency(durations)
            result[f"{'raw' if raw else 'registry'}.{count}"] = {
                "ops_per_s": len(durations) / seconds,
                "p50_us": lat.p50_us,
                "p99_us": lat.p99_us,
                "cpu_busy": (busy1 - busy0) / max(total1 - total0, 1),
                "lock_waiters_mean": sum(waits) / max(len(waits), 1),
            }
    return result


# -- cross-host notification ------------------------------------------------------------------------


def _notifier(url: str, count: int, ready: Any) -> None:
    from events import SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    with PostgresStore.from_url(url) as store:
        ready.wait()
        for _ in range(count):
            time.sleep(0.02)
            store.append("ping", [SessionUpdated(at=time.time_ns(), messages=0)])


def notification(server: str, url: str, schema: str, count: int, load: int) -> Latency:
    """A subscriber here, the pings from another process, ``load`` writer processes busy meanwhile."""
    from events import SessionCreated, SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    context = multiprocessing.get_context("spawn")
    delays: list[float] = []
    with PostgresStore.from_url(url) as store:
        store.append("ping", [SessionCreated(cwd="/ping", at=1)])
        queue = context.Queue()
        loaders = [
            context.Process(target=_writer, args=(url, server, schema, count * 0.02 + 8, False, queue))
            for _ in range(load)
        ]
        for proc in loaders:
            proc.start()
        time.sleep(3)
        ready = context.Event()
        pinger = context.Process(target=_notifier, args=(url, count, ready))
        pinger.start()
        with store.subscribe() as subscription:
            ready.set()
            while len(delays) < count:
                for record in subscription.poll(5):
                    if record.session_id == "ping" and isinstance(record.event, SessionUpdated):
                        delays.append((time.time_ns() - record.event.at) / 1e9)
        pinger.join()
        for _ in loaders:
            queue.get()
        for proc in loaders:
            proc.join()
    return latency(delays, note=f"under {load} writer processes")


def serve_first(url: str, runs: int = 3) -> tuple[float, int]:
    """The median of ``runs`` fresh ``acp-registry serve`` processes to their first page, and the RSS then."""
    samples = sorted(first_answer(url, "tables") for _ in range(runs))
    return samples[len(samples) // 2]


def main() -> None:
    parser = bench_parser(__doc__, postgres=True)
    parser.add_argument("--sizes", default="1000,100000", help="sessions per stage, e.g. 1000,100000")
    parser.add_argument("--samples", type=int, default=300, help="timed calls per figure")
    parser.add_argument("--writer-seconds", type=float, default=6.0)
    parser.add_argument("--writers", default="1,2,4,8")
    parser.add_argument("--notifications", type=int, default=200)
    parser.add_argument("--markdown", type=Path, help="also write the figures as a markdown report here")
    args = parser.parse_args()
    server = postgres_or_skip(args.url)
    if server is None:
        return
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "sizes": {}}
    for size in [int(s) for s in args.sizes.split(",")]:
        schema = f"bench_pg_{size}_{uuid.uuid4().hex[:6]}"
        stage: dict[str, Any] = {}
        with _schema(server, schema) as url:
            stage["import_sessions_per_s"] = _fill(url, size)
            stage["raw_copy_sessions_per_s"] = _copy_baseline(server, min(size, 100_000))
            build = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; from registry import SessionRegistry; "
                    "from events.postgres import PostgresStore; "
                    "SessionRegistry(PostgresStore.from_url(sys.argv[1]), follow=False, owns_store=True).close()",
                    url,
                ],
                check=True,
                cwd=_ROOT,
            )
            stage["read_model_build_s"] = time.perf_counter() - build
            figures = in_process(server, url, schema, args.samples)
            stage["figures"] = {k: msgspec.to_builtins(v) for k, v in figures.items()}
            seconds, rss = serve_first(url)
            stage["serve_first_s"], stage["serve_rss_mb"] = seconds, rss / 2**20
            if size == max(int(s) for s in args.sizes.split(",")):
                stage["writers"] = writers(
                    server, url, schema, [int(c) for c in args.writers.split(",")], args.writer_seconds
                )
                stage["notification"] = msgspec.to_builtins(notification(server, url, schema, args.notifications, 4))
        results["sizes"][str(size)] = stage
        print(json.dumps({size: stage}, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.markdown:
        from benchmarks.postgres_report import markdown  # noqa: PLC0415

        args.markdown.write_text(markdown(results))


if __name__ == "__main__":
    main()
