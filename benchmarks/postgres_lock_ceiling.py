"""What one append lock per schema allows writer processes, whatever the store does under it: the ceiling behind
the "4 writer processes ÷ 1" rows of ``benchmarks.postgres_registry``, measured on bare tables.

    python -m benchmarks.postgres_lock_ceiling [--url postgresql://postgres@127.0.0.1:5432/test]
        [--writers 1,2,4,8] [--rounds 3] [--seconds 4] [--json out.json]

Needs a PostgreSQL server: without one it says so and exits 0 having measured nothing. Each writer process appends
one 100-byte record per operation to a table of (position, session, data, link), in one of four ways, or one
event through the store itself:

- ``raw``: a one-row ``INSERT`` + ``COMMIT``, no lock, no position, no link (what the hardware allows);
- ``client-link``: the store's exchange once writers contend - the schema's advisory lock and the head's position
  and link read in one round trip, the next link computed on the client (BLAKE2b, as ``events.chain``), the row and
  ``COMMIT`` in a second; the lock is held across the round trip;
- ``server-link``: the same lock, with the position and the link computed by the server (``sha256`` of the head's
  link and the record) in the same exchange: one round trip, the lock held for the server's work and the commit -
  what a store format whose link PostgreSQL can compute would allow;
- ``server-link-barrier``: as ``server-link``, committed without waiting for the WAL flush under the lock, then a
  second transaction waiting for a flush that covers it (the store's ``flush-barrier`` commit mode);
- ``store``: ``PostgresStore.append`` of one event with no commit hook (no read model): the store's own exchange,
  its position, version, stream and link computed by the server (store format 3), the expected version checked.

Each round runs every count of processes and every way, the order rotating between rounds; the best round of each
is reported (the machine is shared). Per way and count: operations per second, the ratio to one process of the same
way, and the writer processes' own CPU per operation.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
import uuid
from typing import Any, Final

from benchmarks.args import bench_parser, postgres_or_skip

WAYS: Final = ("raw", "client-link", "server-link", "server-link-barrier", "store")
_KEY: Final = 0x5EED_10C4
_LINK: Final = 16


def _statements(schema: str) -> dict[str, bytes]:
    table = f"{schema}.records"
    head = f"SELECT position, link FROM {table} ORDER BY position DESC LIMIT 1"
    return {
        "raw": f"INSERT INTO {schema}.raw (session, data) VALUES (%s, %b)".encode(),
        "lock": b"SELECT pg_advisory_xact_lock(%s)",
        "head": head.encode(),
        "insert": f"INSERT INTO {table} VALUES (%s, %s, %b, %b)".encode(),
        "insert_linked": (
            f"INSERT INTO {table} SELECT h.position + 1, %s, %b,"
            f" substring(sha256(h.link || int8send(h.position + 1) || %b) for {_LINK}) FROM ({head}) AS h"
        ).encode(),
        "unflushed": b"SET LOCAL synchronous_commit = off",
        "barrier": b"SELECT pg_logical_emit_message(true, 'acp-registry-bench', '')",
    }


def _writer(url: str, schema: str, way: str, seconds: float, results: Any, index: int) -> None:
    import psycopg  # noqa: PLC0415

    sql = _statements(schema)
    data, session = os.urandom(100), f"writer-{index}"
    done = 0
    if way == "store":
        results.put(_store_writer(url, schema, seconds, session))
        return
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        cpu, end = time.process_time(), time.perf_counter() + seconds
        while time.perf_counter() < end:
            if way == "raw":
                conn.execute(sql["raw"], (session, data))
            elif way == "client-link":
                with conn.pipeline() as pipeline:
                    conn.execute(b"BEGIN", prepare=False)
                    conn.execute(sql["lock"], (_KEY,))
                    head = conn.execute(sql["head"], binary=True)
                    pipeline.sync()
                    row = head.fetchone()
                    assert row is not None
                    position, previous = row
                    link = hashlib.blake2b(previous + position.to_bytes(8, "big") + data, digest_size=_LINK).digest()
                    conn.execute(sql["insert"], (position + 1, session, data, link))
                    conn.execute(b"COMMIT", prepare=False)
            else:
                barrier = way == "server-link-barrier"
                with conn.pipeline():
                    conn.execute(b"BEGIN", prepare=False)
                    if barrier:
                        conn.execute(sql["unflushed"], prepare=False)
                    conn.execute(sql["lock"], (_KEY,))
                    conn.execute(sql["insert_linked"], (session, data, data))
                    conn.execute(b"COMMIT", prepare=False)
                    if barrier:
                        conn.execute(sql["barrier"])
            done += 1
        results.put((done, time.process_time() - cpu))


def _store_writer(url: str, schema: str, seconds: float, session: str) -> tuple[int, float]:
    from events import SessionUpdated  # noqa: PLC0415
    from events.postgres import PostgresStore  # noqa: PLC0415

    done = 0
    with PostgresStore(url, schema=f"{schema}_store") as store:
        store.append(session, [SessionUpdated(at=1)])  # the pool's connection made, the store's format read
        cpu, end = time.process_time(), time.perf_counter() + seconds
        while time.perf_counter() < end:
            store.append(session, [SessionUpdated(at=done, messages=1)])
            done += 1
        return done, time.process_time() - cpu


def _run(url: str, schema: str, way: str, processes: int, seconds: float) -> tuple[float, float]:
    """Operations per second of ``processes`` writers appending ``way`` for ``seconds``, and their CPU (us) per op."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    writers = [context.Process(target=_writer, args=(url, schema, way, seconds, results, i)) for i in range(processes)]
    for writer in writers:
        writer.start()
    answers = [results.get(timeout=seconds + 60) for _ in writers]
    for writer in writers:
        writer.join()
    done = sum(count for count, _ in answers)
    return done / seconds, sum(cpu for _, cpu in answers) / max(done, 1) * 1e6


def measure(url: str, counts: list[int], rounds: int, seconds: float) -> dict[str, dict[int, dict[str, float]]]:
    """The best round of each way at each count of processes: ops/s, the ratio to one process, CPU us per op."""
    import psycopg  # noqa: PLC0415

    schema = f"bench_lock_{uuid.uuid4().hex[:6]}"
    best: dict[str, dict[int, tuple[float, float]]] = {way: {} for way in WAYS}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(
            f"CREATE TABLE {schema}.records (position bigint PRIMARY KEY, session text, data bytea, link bytea)"
        )
        conn.execute(f"INSERT INTO {schema}.records VALUES (0, '', '', %b)", (bytes(_LINK),))
        conn.execute(f"CREATE TABLE {schema}.raw (n bigserial PRIMARY KEY, session text, data bytea)")
        try:
            for round_ in range(rounds):
                for count in counts:
                    turn = (round_ + count) % len(WAYS)
                    for way in WAYS[turn:] + WAYS[:turn]:
                        measured = _run(url, schema, way, count, seconds)
                        best[way][count] = max(best[way].get(count, (0.0, 0.0)), measured)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
            conn.execute(f"DROP SCHEMA IF EXISTS {schema}_store CASCADE")
    return {
        way: {
            count: {"ops_per_s": rate, "vs_one": rate / by_count[counts[0]][0], "cpu_us_per_op": cpu}
            for count, (rate, cpu) in by_count.items()
        }
        for way, by_count in best.items()
    }


def main() -> None:
    parser = bench_parser(__doc__, postgres=True)
    parser.add_argument("--writers", default="1,2,4,8", help="counts of writer processes (the first is the unit)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    server = postgres_or_skip(args.url)
    if server is None:
        return
    figures = measure(server, [int(c) for c in args.writers.split(",")], args.rounds, args.seconds)
    for way, by_count in figures.items():
        cells = [
            f"{n}: {f['ops_per_s']:,.0f}/s ({f['vs_one']:.2f}x, {f['cpu_us_per_op']:.0f} us CPU/op)"
            for n, f in by_count.items()
        ]
        print(f"{way:<20} " + "  ".join(cells))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
