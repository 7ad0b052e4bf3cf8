"""The registry on PostgreSQL, each figure beside raw psycopg doing the same in the same run: the PostgreSQL part of
``benchmarks/run.py`` (``make bench``, ``make bench-full``), or on its own:

    python -m benchmarks.postgres_registry --quick         # 1k and 100k sessions, ~2 minutes
    python -m benchmarks.postgres_registry --full          # 1k, 100k and 1M sessions
    python -m benchmarks.postgres_registry --full --into full   # and put the figures into results/full.{json,md}

Needs a PostgreSQL server (``--url``, default ``$ACP_REGISTRY_BENCH_POSTGRES``): without one it says so and
skips. One schema of its own (dropped at the end) grows stage by stage with the same seeded history as the SQLite
stages (``benchmarks/generate.py``), imported with ``append_batch``; at each size (``keys.py``, ``PG_*``):

* durable ``append`` of one event, ``create``, ``record_activity`` - against one-row ``INSERT`` + ``COMMIT``,
  taking turns call by call;
* the import, 1,000 sessions a call - against ``COPY`` of the same events' bytes, chunk by chunk;
* the read model catching up with the import (a fresh process's first open);
* ``session/list`` first and 90%-deep page, with and without a cwd - against the raw keyset query of the same rows;
* ``session/list`` from a warm ``acp-registry serve`` over its pipes - against a plain Python stdio server doing
  that query (``stdio_pages.py``);
* a fresh ``acp-registry serve`` to its first page, and its RSS - against a fresh process that imports psycopg,
  connects and runs that query;

and at the largest size: 1, 2, 4, 8 writer processes (``postgres_processes.py``) - the registry's, and the bare
store's appending one event - against as many raw processes,
and the cross-host notification under 4 writer processes against a raw ``LISTEN`` woken by another process.
"""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from benchmarks import keys, postgres_processes, stdio_pages
from benchmarks.args import DEFAULT_POSTGRES, bench_parser, postgres_unreachable
from benchmarks.figures import Figure, Quantity, interleave, latency, rate_of, throughput
from benchmarks.generate import DEFAULT_SEED, History, iter_histories, working_directories
from benchmarks.machine import BusyMeter
from benchmarks.output import write_results
from benchmarks.report import PostgresPart, Run, Stage, ratios
from benchmarks.targets import POSTGRES_SPECS
from events import SessionDeleted, SessionUpdated

__all__ = ["MODES", "PostgresSettings", "measure"]

_ROOT = Path(__file__).resolve().parent.parent
PAGE = 50


@dataclass(frozen=True)
class PostgresSettings:
    sizes: list[int]
    url: str = DEFAULT_POSTGRES
    samples: int = 300  # timed calls per write and page figure
    writers: tuple[int, ...] = keys.WRITER_COUNTS
    writer_seconds: float = 6.0
    notifications: int = 200
    load: int = 4  # writer processes running during the notification figure
    serve_runs: int = 3
    chunk: int = 1000  # sessions per append_batch call and per COPY transaction
    seed: int = DEFAULT_SEED


MODES = {
    "quick": PostgresSettings(sizes=[1_000, 100_000], samples=100, writer_seconds=2.0, notifications=50),
    "full": PostgresSettings(sizes=[1_000, 100_000, 1_000_000]),
}


def _url(server: str, schema: str) -> str:
    return f"{server}{'&' if '?' in server else '?'}schema={schema}"


@contextmanager
def _schema(server: str, name: str) -> Iterator[str]:
    import psycopg  # noqa: PLC0415

    raw = postgres_processes.raw_schema(name)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"DROP SCHEMA IF EXISTS {raw} CASCADE")
        conn.execute(f"CREATE SCHEMA {raw}")
    try:
        yield _url(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
            conn.execute(f"DROP SCHEMA IF EXISTS {raw} CASCADE")


@dataclass
class _Log:
    """The schema being grown: what it holds so far."""

    url: str
    server: str
    schema: str
    sessions: int = 0
    live: int = 0
    events: int = 0


def _grow(log: _Log, histories: Iterator[History], count: int, chunk: int) -> dict[str, Figure]:
    """Import ``count`` more sessions with ``append_batch``, and COPY the same events' bytes into a bare table,
    chunk by chunk in turn; rates in sessions/s (generating the history is not timed)."""
    import psycopg  # noqa: PLC0415

    from events import AppendRequest  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    encode = msgspec.json.Encoder().encode
    spent = {keys.PG_IMPORT: 0.0, keys.PG_RAW_COPY: 0.0}
    added = 0
    with PostgresStore.from_url(log.url) as store, psycopg.connect(log.server, autocommit=True) as conn:
        raw_import = f"{postgres_processes.raw_schema(log.schema)}.raw_import"
        conn.execute(f"CREATE TABLE IF NOT EXISTS {raw_import} (n bigint PRIMARY KEY, data bytea)")
        while added < count:
            sessions = list(itertools.islice(histories, min(chunk, count - added)))
            if not sessions:
                break
            rows = [(sid, encode(event)) for sid, events in sessions for event in events]
            start = time.perf_counter()
            store.append_batch([AppendRequest(sid, events) for sid, events in sessions])
            spent[keys.PG_IMPORT] += time.perf_counter() - start
            start = time.perf_counter()
            with conn.transaction(), conn.cursor().copy(f"COPY {raw_import} FROM STDIN") as copy:
                for n, (_, data) in enumerate(rows, start=log.events):
                    copy.write_row((n, data))
            spent[keys.PG_RAW_COPY] += time.perf_counter() - start
            added += len(sessions)
            log.sessions += len(sessions)
            log.live += sum(not isinstance(events[-1], SessionDeleted) for _, events in sessions)
            log.events += len(rows)
    return {key: throughput(added, seconds) for key, seconds in spent.items()}


def _fill(url: str, sessions: int, seed: int = DEFAULT_SEED, chunk: int = 1000) -> float:
    """A new store of ``sessions`` sessions of the seeded history, imported with ``append_batch`` (the writer
    benchmark's setup); returns sessions/s."""
    from events import AppendRequest  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    histories = iter_histories(sessions, seed)
    start = time.perf_counter()
    with PostgresStore.from_url(url) as store:
        while batch := list(itertools.islice(histories, chunk)):
            store.append_batch([AppendRequest(sid, events) for sid, events in batch])
    return sessions / (time.perf_counter() - start)


_BUILD = """
import sys, time
from events.postgres import PostgresStore
from registry import SessionRegistry
store = PostgresStore.from_url(sys.argv[1])
start = time.perf_counter()
SessionRegistry(store, follow=False, owns_store=True).close()
print(time.perf_counter() - start)
"""


def _build(log: _Log, events: int) -> Figure:
    """A fresh process's first open: the read model catches up with the ``events`` just imported."""
    done = subprocess.run([sys.executable, "-c", _BUILD, log.url], check=True, capture_output=True, cwd=_ROOT)
    return throughput(events, float(done.stdout.split()[-1]), note=f"{events:,} events folded")


def _page_query(schema: str, cwd: str | None, after: tuple[int, str] | None = None) -> str:
    """The registry's default list (live, not archived) as one keyset query, values inlined (they are ours)."""
    where = "live AND archived = false" + (f" AND cwd = '{cwd}'" if cwd else "")
    if after:
        where += f" AND (rank, session_id) > ({after[0]}, '{after[1]}')"
    return (
        f"SELECT rank, session_id, state FROM {schema}.rm_sessions WHERE {where}"
        f" ORDER BY rank, session_id LIMIT {PAGE + 1}"
    )


class _Raw:
    """The baselines in process: a bare psycopg connection, statements prepared, autocommit."""

    def __init__(self, log: _Log) -> None:
        import psycopg  # noqa: PLC0415

        self.conn = psycopg.connect(log.server, autocommit=True, prepare_threshold=0)
        self.schema = log.schema
        self.insert = f"INSERT INTO {postgres_processes.raw_table(log.schema)} (session, data) VALUES (%s, %s)".encode()

    def insert_commit(self, _item: object) -> float:
        start = time.perf_counter()
        self.conn.execute(self.insert, ("s-x", b"y" * 60))
        return time.perf_counter() - start

    def page(self, cwd: str | None, after: tuple[int, str] | None) -> Callable[[object], float]:
        query = _page_query(self.schema, cwd, after).encode()

        def run(_item: object) -> float:
            start = time.perf_counter()
            self.conn.execute(query).fetchall()
            return time.perf_counter() - start

        return run

    def deep_key(self, cwd: str | None, depth: float = 0.9) -> tuple[int, str] | None:
        """The sort key a page ``depth`` of the way through the walk continues after."""
        where = "live AND archived = false" + (" AND cwd = %(cwd)s" if cwd else "")
        table = f"{self.schema}.rm_sessions"
        row = self.conn.execute(
            f"SELECT rank, session_id FROM {table} WHERE {where} ORDER BY rank, session_id"
            f" OFFSET (SELECT (count(*) * {depth})::bigint FROM {table} WHERE {where}) LIMIT 1",
            {"cwd": cwd},
        ).fetchone()
        return (int(row[0]), str(row[1])) if row else None


def _timed(call: Callable[[], object]) -> Callable[[object], float]:
    def run(_item: object) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    return run


def _deep_cursor(registry: Any, cwd: str | None, after: tuple[int, str]) -> str | None:
    """A cursor that continues after ``after``, as a client walking there would hold (the walk's start position
    taken from a first page's cursor); None when the list has a single page."""
    from registry.cursor import Cursor  # noqa: PLC0415
    from registry.filters import ListFilter  # noqa: PLC0415

    where = ListFilter(cwd=cwd)
    first = registry.list(cwd=cwd).next_cursor
    if not isinstance(first, str):
        return None
    position = registry._cursors.decode(first, where).position
    return str(registry._cursors.encode(Cursor(position, after[0], after[1]), where))


def _stdio_pages(log: _Log) -> dict[str, Figure]:
    """``session/list`` from a warm ``serve`` over its pipes beside a plain Python stdio server doing the raw
    keyset query with psycopg (``benchmarks.stdio_pages``), taking turns: first page and one 80% deep."""
    from events.postgres import PostgresStore  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415

    with SessionRegistry(PostgresStore.from_url(log.url), follow=False, owns_store=True) as registry:
        cases = stdio_pages.cases(registry, keys.PG_STDIO, keys.PG_RAW_STDIO)
    serve = [str(Path(sys.executable).with_name("acp-registry")), "serve", "--store", log.url]
    return stdio_pages.side_by_side(serve, [log.server, "postgresql", log.schema], cases)


def _in_process(log: _Log, cwd: str, samples: int) -> dict[str, Figure]:
    """Writes and pages, each interleaved call by call with its raw baseline."""
    from events.postgres import PostgresStore  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415

    figures: dict[str, Figure] = {}
    raw = _Raw(log)
    store = PostgresStore.from_url(log.url)
    with SessionRegistry(store, follow=False, owns_store=True) as registry:
        mine = [registry.create("/work/bench").session_id for _ in range(20)]
        turns = itertools.count()
        writes = interleave(
            {
                keys.PG_RAW_INSERT: raw.insert_commit,
                keys.PG_APPEND: _timed(lambda: store.append(mine[0], [SessionUpdated(at=1, messages=1)])),
                keys.PG_CREATE: _timed(lambda: registry.create("/work/bench")),
                keys.PG_RECORD: _timed(lambda: registry.record_activity(mine[next(turns) % 20], messages=1)),
            },
            range(samples),
        )
        for key, durations in writes.items():
            figures[key] = measured = latency(durations, note="durable, taking turns with the others")
            figures[keys.rate_key(key)] = rate_of(measured)
        log.sessions += 20 + samples
        log.live += 20 + samples
        log.events += 21 + 3 * samples
        timers: dict[str, Callable[[object], float]] = {}
        # A walk that began before the list changed: its later pages are read as of its start, through rm_past
        # (a walk with nothing changed since its start reads the current rows alone: the "deep" rows below).
        after = raw.deep_key(None)
        changed = None if after is None else _deep_cursor(registry, None, after)
        registry.record_activity(mine[0], messages=1)
        if changed is not None:
            timers[keys.PG_LIST_CHANGED] = _timed(functools.partial(registry.list, cursor=changed))
        for page, where in (("first", None), ("first_cwd", cwd)):
            timers[keys.PG_RAW_LIST[page]] = raw.page(where, None)
            timers[keys.PG_LIST[page]] = _timed(functools.partial(registry.list, cwd=where))
            deep = page.replace("first", "deep")
            after = raw.deep_key(where)
            cursor = None if after is None else _deep_cursor(registry, where, after)
            if after is not None and cursor is not None:
                timers[keys.PG_RAW_LIST[deep]] = raw.page(where, after)
                timers[keys.PG_LIST[deep]] = _timed(functools.partial(registry.list, cwd=where, cursor=cursor))
        for key, durations in interleave(timers, range(samples)).items():
            figures[key] = latency(durations, note="page of 50, taking turns with the others")
    raw.conn.close()
    return figures


def _table_bytes(log: _Log) -> dict[str, Figure]:
    """What the store's tables and the raw COPY's take on disk (heap and indexes), as the server counts them."""
    import psycopg  # noqa: PLC0415

    raw = postgres_processes.raw_schema(log.schema)
    with psycopg.connect(log.server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT n.nspname, c.relname, pg_table_size(c.oid) + pg_indexes_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN (%s, %s) AND c.relkind = 'r'",
            (log.schema, raw),
        ).fetchall()
    sizes = {keys.PG_LOG_BYTES: 0.0, keys.PG_READ_MODEL_BYTES: 0.0, keys.PG_RAW_BYTES: 0.0}
    for schema, table, size in rows:
        if schema == log.schema:
            sizes[keys.PG_READ_MODEL_BYTES if table.startswith("rm_") else keys.PG_LOG_BYTES] += size
        elif table == "raw_import":
            sizes[keys.PG_RAW_BYTES] += size
    return {key: Quantity(value=size, unit="B") for key, size in sizes.items()}


def _stage_sizes(log: _Log) -> Stage:
    return Stage(sessions=log.sessions, live_sessions=log.live, events=log.events)


def measure(settings: PostgresSettings, progress: Callable[[str], None] | None = None) -> PostgresPart:
    """Every PostgreSQL figure at every size of ``settings``; a part that says why it skipped when no server
    answers at ``settings.url``."""
    say = progress or (lambda _: None)
    why = postgres_unreachable(settings.url)
    if why is not None:
        return PostgresPart(skipped=why)
    import psycopg  # noqa: PLC0415

    with psycopg.connect(settings.url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    started, busy, load_before = time.perf_counter(), BusyMeter(), os.getloadavg()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    schema = f"bench_pg_{uuid.uuid4().hex[:8]}"
    cwds = working_directories(settings.seed)
    stages: list[Stage] = []
    with _schema(settings.url, schema) as url:
        log = _Log(url=url, server=settings.url, schema=schema)
        with psycopg.connect(settings.url, autocommit=True) as conn:
            table = postgres_processes.raw_table(schema)
            conn.execute(f"CREATE TABLE {table} (n bigserial PRIMARY KEY, session text, data bytea)")
        histories = iter_histories(max(settings.sizes), settings.seed)
        for size in sorted(settings.sizes):
            say(f"postgres: importing to {size:,} sessions")
            before = log.events
            figures = _grow(log, histories, size - log.sessions, settings.chunk)
            say(f"postgres: read model at {size:,}")
            figures[keys.PG_BUILD] = _build(log, log.events - before)
            stage = _stage_sizes(log)
            figures.update(_table_bytes(log))
            say(f"postgres: writes and pages at {size:,}")
            with psycopg.connect(settings.url, autocommit=True) as conn:
                counts = conn.execute(
                    f"SELECT cwd, count(*) FROM {schema}.rm_sessions WHERE live GROUP BY cwd"
                ).fetchall()
            cwd = max(counts, key=lambda row: row[1])[0] if counts else cwds[0]
            figures.update(_in_process(log, cwd, settings.samples))
            say(f"postgres: pages from a warm serve at {size:,}")
            figures.update(_stdio_pages(log))
            say(f"postgres: fresh processes at {size:,}")
            figures.update(
                postgres_processes.first_pages(url, settings.url, _page_query(schema, None), settings.serve_runs)
            )
            if size == max(settings.sizes):
                say("postgres: writer processes")
                figures.update(
                    postgres_processes.writers(url, settings.url, schema, settings.writers, settings.writer_seconds)
                )
                say("postgres: cross-host notification")
                figures.update(
                    postgres_processes.notification(
                        url,
                        settings.url,
                        schema,
                        settings.notifications,
                        settings.load,
                        settings.notifications * 0.02 + 3,
                    )
                )
            stage.figures = figures
            stages.append(stage)
    return PostgresPart(
        server=str(version[0]) if version else "",
        date=date,
        stages=stages,
        ratios=ratios(stages, POSTGRES_SPECS),
        wall_seconds=time.perf_counter() - started,
        load_before=load_before,
        load_after=os.getloadavg(),
        cpu_busy=busy.fraction(),
        settings={k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items() if k != "url"},
        notes=[
            f"One schema grown stage by stage with the seeded history of the SQLite stages (seed {settings.seed}). "
            f"The write figures create {20 + settings.samples} sessions at each size after it is measured (the next "
            "size imports that many fewer); the writer processes and the notification ran at the largest size only.",
            "Raw psycopg baselines: prepared statements on one autocommit connection; the same rows, the same "
            "server, taking turns call by call with the registry's calls (pages, writes) or chunk by chunk (import).",
            f"Writer processes: each count ran {settings.writer_seconds:g} s from a common start, the registry's "
            "processes then as many raw ones; the machine's CPU busy (the server's share included) and the backends "
            "waiting for a lock (pg_locks not granted, sampled every 0.1 s) were taken meanwhile.",
        ],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, json=False, postgres=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="mode", const="quick", help="1k and 100k sessions")
    mode.add_argument("--full", action="store_const", dest="mode", const="full", help="1k, 100k and 1M sessions")
    parser.add_argument("--sizes", help="history sizes in sessions, e.g. 1000,100000")
    parser.add_argument("--writer-seconds", type=float, help="how long each count of writer processes runs")
    parser.add_argument("--name", default="postgres", help="results file name (default: postgres)")
    parser.add_argument("--into", help="also put the part into results/INTO.json and INTO.md (e.g. full)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results", help="results folder")
    args = parser.parse_args(argv)
    settings = replace(MODES[args.mode or "quick"], url=args.url)
    if args.sizes:
        settings = replace(settings, sizes=[int(s.replace("_", "")) for s in args.sizes.split(",")])
    if args.writer_seconds:
        settings = replace(settings, writer_seconds=args.writer_seconds)
    part = measure(settings, progress=lambda text: print(time.strftime("%H:%M:%S"), text, file=sys.stderr, flush=True))
    if part.skipped:
        print(f"skipped: {part.skipped}")
        return
    for path in write_part(part, args.out, args.name, args.into):
        print(path)


def write_part(part: PostgresPart, out: Path, name: str, into: str | None = None) -> list[Path]:
    """``<name>.json`` and ``<name>.md`` holding the part alone; with ``into``, the part also replaces the
    PostgreSQL section of ``<into>.json`` and ``<into>.md``, the rest of both left as they are."""
    from benchmarks.machine import describe_machine  # noqa: PLC0415
    from benchmarks.report import POSTGRES_HEADING, markdown, postgres_section  # noqa: PLC0415

    machine = msgspec.structs.replace(describe_machine(), load_before=part.load_before, load_after=part.load_after)
    seed = part.settings.get("seed")
    seed = seed if isinstance(seed, int) else DEFAULT_SEED
    alone = Run(name=name, seed=seed, machine=machine, settings={}, stages=[], jsonl=[])
    alone.wall_seconds, alone.postgres = part.wall_seconds, part
    written = write_results(alone, out, plot=False)
    if into:
        json_path, md_path = out / f"{into}.json", out / f"{into}.md"
        run = msgspec.json.decode(json_path.read_bytes(), type=Run)
        alone_note = (
            f"Measured on its own (`python -m benchmarks.postgres_registry --into {into}`) on {part.date}, not in "
            f"the run above (of {run.machine.date}): the two parts' figures are not from the same run."
        )
        part = msgspec.structs.replace(part, notes=[alone_note, *part.notes])
        run.postgres = part
        json_path.write_bytes(msgspec.json.format(msgspec.json.encode(run), indent=2) + b"\n")
        text = md_path.read_text(encoding="utf-8") if md_path.exists() else markdown(run)
        kept = text.split(f"\n{POSTGRES_HEADING}\n", 1)[0].rstrip("\n")
        md_path.write_text(f"{kept}\n\n{postgres_section(part)}\n", encoding="utf-8")
        written += [json_path, md_path]
    return written


if __name__ == "__main__":
    main()
