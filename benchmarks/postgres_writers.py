"""Writer processes on one PostgreSQL registry, and cross-host notification under their load: the writer rows of
``benchmarks.postgres_registry`` alone, repeated in rounds, with the ways of committing compared in the same run.

    python -m benchmarks.postgres_writers [--url postgresql://postgres@127.0.0.1:5432/test] [--writers 1,2,4,8]
        [--rounds 2] [--seconds 4] [--modes flush-barrier,in-lock] [--notifications 200] [--json out.json]

Needs a PostgreSQL server: without one it says so and exits 0 having measured nothing. Each writer process creates
a session, then records activity on it 4 times (a new session every 5 operations; sessions of its own). For each
round, each count of processes runs every mode and the raw baseline (processes doing a one-row ``INSERT`` +
``COMMIT``) one after the other, the order rotating between rounds, so that the machine's load (other sessions
share it) falls on every system alike. Per run: throughput, p50/p99 per operation, the machine's CPU busy share,
the writer processes' own CPU per operation, and what the server's backends were waiting for (sampled from
``pg_stat_activity`` every 20 ms: the advisory lock, the WAL flush, the client...). Modes (``commit`` of
``PostgresStore``): ``flush-barrier`` (the append lock released at COMMIT before the WAL flush, the flush awaited
after it), ``in-lock`` (the lock held across the flush), ``default`` (no option given: to compare with a checkout
of an earlier version, run from there with this file copied in). ``--flush-delay-us`` emulates a slower disk.
"""

from __future__ import annotations

import json
import multiprocessing
import time
import urllib.parse
import uuid
from collections import Counter
from typing import Any

from benchmarks.args import bench_parser, postgres_or_skip
from benchmarks.figures import latency
from benchmarks.postgres_processes import registry_mix
from benchmarks.postgres_registry import _fill, _schema

_SAMPLE = 0.02


def _commit(mode: str) -> dict[str, Any]:
    """The store's ``commit`` option for a mode; ``default`` passes none (and so runs on versions without it)."""
    return {} if mode == "default" else {"commit": mode}


def _writer(url: str, server: str, schema: str, seconds: float, mode: str, out: Any) -> None:
    durations: list[float] = []
    cpu = 0.0
    if mode == "raw":
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server, autocommit=True, prepare_threshold=0) as conn:
            insert = f"INSERT INTO {schema}.raw_turns (session, data) VALUES (%s, %s)".encode()
            cpu0 = time.process_time()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                start = time.perf_counter()
                conn.execute(insert, ("s-x", b"y" * 60))
                durations.append(time.perf_counter() - start)
            cpu = time.process_time() - cpu0
    else:
        from events.postgres import PostgresStore  # noqa: PLC0415
        from events.urls import split_postgres_url  # noqa: PLC0415
        from registry import SessionRegistry  # noqa: PLC0415

        conninfo, name = split_postgres_url(url)
        store = PostgresStore(conninfo, schema=name, **_commit(mode))
        with SessionRegistry(store, follow=False, owns_store=True) as registry:
            started: list[float] = []
            durations = registry_mix(registry, seconds, lambda: started.append(time.process_time()))
            cpu = time.process_time() - started[0]
    out.put((durations, cpu))


def _cpu_busy() -> tuple[float, float]:
    with open("/proc/stat") as stat:
        fields = [float(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _waits(conn: Any, tag: str) -> Counter[str]:
    """What the writers' backends are doing right now (``Lock:advisory``, ``LWLock:WALWrite``, ``IO:WALSync``,
    ``Client:ClientRead``, ``CPU`` when active with no wait event...), and what the one holding an advisory lock
    (the append lock) is doing: ``holder ...``, ``holder none`` when nobody holds it."""
    rows = conn.execute(
        "SELECT a.state, a.wait_event_type, a.wait_event, EXISTS (SELECT 1 FROM pg_locks AS l"
        " WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)"
        " FROM pg_stat_activity AS a WHERE a.backend_type = 'client backend' AND a.application_name = %s",
        (tag,),
    ).fetchall()
    found: Counter[str] = Counter()
    held = False
    for state, kind, event, holds in rows:
        what = ("CPU" if state == "active" else str(state)) if kind is None else f"{kind}:{event}"
        found[what] += 1
        if holds:
            found[f"holder {what}"] += 1
            held = True
    if not held:
        found["holder none"] += 1
    return found


def run(server: str, url: str, schema: str, count: int, seconds: float, mode: str) -> dict[str, Any]:
    """``count`` processes of one mode for ``seconds``: throughput, latency, CPU, and the backends' waits."""
    import psycopg  # noqa: PLC0415

    tag = f"writers-{uuid.uuid4().hex[:8]}"
    tagged_server = f"{server}{'&' if '?' in server else '?'}application_name={tag}"
    tagged_url = f"{url}&application_name={tag}"
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    procs = [
        context.Process(target=_writer, args=(tagged_url, tagged_server, schema, seconds, mode, queue))
        for _ in range(count)
    ]
    for proc in procs:
        proc.start()
    time.sleep(min(2.0, seconds / 3))  # start-up (imports, pool) is not the steady state
    busy0, total0 = _cpu_busy()
    waits: Counter[str] = Counter()
    samples = 0
    with psycopg.connect(server, autocommit=True) as conn:
        sample_end = time.perf_counter() + seconds / 2
        while time.perf_counter() < sample_end:
            waits += _waits(conn, tag)
            samples += 1
            time.sleep(_SAMPLE)
    busy1, total1 = _cpu_busy()
    outcomes = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    durations = [d for found, _ in outcomes for d in found]
    lat = latency(durations)
    return {
        "ops_per_s": len(durations) / seconds,
        "p50_us": lat.p50_us,
        "p99_us": lat.p99_us,
        "cpu_busy": (busy1 - busy0) / max(total1 - total0, 1),
        "client_cpu_us_per_op": sum(cpu for _, cpu in outcomes) / max(len(durations), 1) * 1e6,
        "backends": {k: round(v / max(samples, 1), 2) for k, v in waits.most_common()},
    }


def notification(server: str, url: str, schema: str, count: int, load: int, mode: str) -> dict[str, Any]:
    """A subscriber here, the pings from another process, ``load`` writer processes of ``mode`` busy meanwhile: the
    delay from the ping's append (its timestamp) to the subscriber's poll returning it."""
    from events import SessionCreated, SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415
    from events.urls import split_postgres_url  # noqa: PLC0415

    context = multiprocessing.get_context("spawn")
    delays: list[float] = []
    got: dict[int, int] = {}
    conninfo, name = split_postgres_url(url)
    with PostgresStore(conninfo, schema=name) as store:
        store.append(f"ping-{mode}", [SessionCreated(cwd="/ping", at=1)])
        queue = context.Queue()
        loaders = [
            context.Process(target=_writer, args=(url, server, schema, count * 0.02 + 6, mode, queue))
            for _ in range(load)
        ]
        for proc in loaders:
            proc.start()
        time.sleep(2)
        ready = context.Event()
        acks = context.Queue()
        pinger = context.Process(target=_notifier, args=(url, count, ready, mode, acks))
        pinger.start()
        with store.subscribe(store.head()) as subscription:
            ready.set()
            while len(delays) < count:
                for record in subscription.poll(5):
                    if record.session_id == f"ping-{mode}" and isinstance(record.event, SessionUpdated):
                        now = time.time_ns()
                        delays.append((now - record.event.at) / 1e9)
                        got[record.event.at] = now
        acked: list[tuple[int, int]] = acks.get()
        pinger.join()
        for _ in loaders:
            queue.get()
        for proc in loaders:
            proc.join()
    lat = latency(delays)
    append = latency([(ack - at) / 1e9 for at, ack in acked])
    after_ack = sorted((got[at] - ack) / 1e3 for at, ack in acked if at in got)
    return {
        "p50_us": lat.p50_us,
        "p99_us": lat.p99_us,
        "n": lat.n,
        "ping_append_p50_us": append.p50_us,
        "ping_append_p99_us": append.p99_us,
        # from the pinger's append returning to the subscriber having the event (negative: before it returned)
        "after_ack_p50_us": after_ack[len(after_ack) // 2],
        "after_ack_p99_us": after_ack[max(0, -(-len(after_ack) * 99 // 100) - 1)],
    }


def _notifier(url: str, count: int, ready: Any, mode: str, acks: Any) -> None:
    from events import SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415
    from events.urls import split_postgres_url  # noqa: PLC0415

    conninfo, name = split_postgres_url(url)
    with PostgresStore(conninfo, schema=name, **_commit(mode)) as store:
        ready.wait()
        acked = []
        for _ in range(count):
            time.sleep(0.02)
            at = time.time_ns()
            store.append(f"ping-{mode}", [SessionUpdated(at=at, messages=0)])
            acked.append((at, time.time_ns()))
    acks.put(acked)


def main() -> None:
    parser = bench_parser(__doc__, postgres=True)
    parser.add_argument("--writers", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--modes", default="flush-barrier,in-lock")
    parser.add_argument("--notifications", type=int, default=200, help="pings per mode (0: none)")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions in the store before the writers run")
    parser.add_argument(
        "--flush-delay-us",
        type=int,
        default=0,
        help="emulate a slower WAL flush in the benchmark's own sessions: commit_delay (superuser only) with"
        " commit_siblings 0, so each flush waits this long first, holding the WAL write lock (other commits queue"
        " and share it, as on a slow disk); the server's settings are not changed",
    )
    args = parser.parse_args()
    server = postgres_or_skip(args.url)
    if server is None:
        return
    if args.flush_delay_us:
        options = urllib.parse.quote(f"-c commit_delay={args.flush_delay_us} -c commit_siblings=0")
        server = f"{server}{'&' if '?' in server else '?'}options={options}"
    modes = args.modes.split(",")
    counts = [int(c) for c in args.writers.split(",")]
    with open("/proc/loadavg") as load:
        load_before = load.read().split()[:3]
    schema = f"bench_writers_{uuid.uuid4().hex[:6]}"
    runs: dict[str, list[dict[str, Any]]] = {}
    notes: dict[str, dict[str, Any]] = {}
    with _schema(server, schema) as url:
        _fill(url, args.sessions)
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {schema}.raw_turns (n bigserial PRIMARY KEY, session text, data bytea)")
        for round_ in range(args.rounds):
            for count in counts:
                order = [*modes, "raw"]
                turn = (round_ + count) % len(order)
                for mode in order[turn:] + order[:turn]:
                    figures = run(server, url, schema, count, args.seconds, mode)
                    runs.setdefault(f"{mode}.{count}", []).append(figures)
                    print(json.dumps({"round": round_, "mode": mode, "processes": count, **figures}), flush=True)
        if args.notifications:
            for mode in modes:
                notes[mode] = notification(server, url, schema, args.notifications, 4, mode)
                print(json.dumps({"notification": mode, **notes[mode]}), flush=True)
    with open("/proc/loadavg") as load:
        load_after = load.read().split()[:3]
    summary = _summary(runs, modes, counts)
    print(summary)
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}")
    for mode, figures in notes.items():
        print(
            f"notification under 4 {mode} writers: p50 {figures['p50_us'] / 1e3:.1f} ms, p99"
            f" {figures['p99_us'] / 1e3:.1f} ms ({figures['n']} pings); the ping's own append p50"
            f" {figures['ping_append_p50_us'] / 1e3:.1f} ms, p99 {figures['ping_append_p99_us'] / 1e3:.1f} ms;"
            f" delivered after the append returned: p50 {figures['after_ack_p50_us'] / 1e3:.1f} ms, p99"
            f" {figures['after_ack_p99_us'] / 1e3:.1f} ms"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "notification": notes}, indent=1))


def _summary(runs: dict[str, list[dict[str, Any]]], modes: list[str], counts: list[int]) -> str:
    """A markdown table: per mode and count, the best round's throughput (the least disturbed by the machine's
    other load), x of 1 process of the same mode, and x of raw at the same count in the same round."""
    lines = [
        "| mode | processes | ops/s | x of 1 | x raw | raw x of 1 | p50 | p99 | CPU busy | client CPU/op"
        " | lock waiters | lock held, holder waiting for its client / on CPU / on the WAL |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    raw_one = max(r["ops_per_s"] for r in runs["raw.1"]) if "raw.1" in runs else 0
    for mode in modes:
        if f"{mode}.{counts[0]}" not in runs:
            continue
        one = max(r["ops_per_s"] for r in runs[f"{mode}.{counts[0]}"])
        for count in counts:
            rounds = runs[f"{mode}.{count}"]
            best = max(range(len(rounds)), key=lambda n: rounds[n]["ops_per_s"])
            fig, raw = rounds[best], runs[f"raw.{count}"][best]
            seen = fig["backends"]
            held = 1 - seen.get("holder none", 0)
            client = sum(v for k, v in seen.items() if k.startswith("holder ") and ("Client" in k or "idle" in k))
            wal = sum(v for k, v in seen.items() if k.startswith("holder ") and "WAL" in k)
            cpu = seen.get("holder CPU", 0)
            backends = f"{seen.get('Lock:advisory', 0):.2f} | {held:.0%}: {client:.0%} / {cpu:.0%} / {wal:.0%}"
            lines.append(
                f"| {mode} | {count} | {fig['ops_per_s']:,.0f} | {fig['ops_per_s'] / one:.2f}x |"
                f" {fig['ops_per_s'] / raw['ops_per_s']:.2f}x | {raw['ops_per_s'] / raw_one:.2f}x |"
                f" {fig['p50_us'] / 1e3:.2f} ms | {fig['p99_us'] / 1e3:.2f} ms | {fig['cpu_busy']:.0%} |"
                f" {fig['client_cpu_us_per_op']:.0f} µs | {backends} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
