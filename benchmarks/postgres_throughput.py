"""Event store throughput on PostgreSQL, next to SQLite in the same run: single and batched appends (from one
thread and from eight, and ``append_batch`` imports), full reads (``iter_events`` and ``scan``), and how soon
another process's append reaches a subscriber (NOTIFY on PostgreSQL, a 20 ms look at data_version on SQLite).

    python benchmarks/postgres_throughput.py [--url postgresql://postgres@127.0.0.1:5432/test] [--json out.json]

Both stores are durable (PostgreSQL ``synchronous_commit`` as the server has it, SQLite ``synchronous=FULL``);
put SQLite on the server's disk (``BENCH_DIR=...``) for a fair comparison. Baselines in the same run: one-row
commits on the server, and the raw fsync rate of SQLite's folder. The PostgreSQL run uses schemas of its own and
drops them at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from benchmarks.args import bench_parser, postgres_or_skip
from benchmarks.store_throughput import (
    batch_import,
    batched_appends,
    cross_process_latency,
    fsync_rate,
    full_read,
    percentile,
    print_results,
    scan_read,
    single_appends,
    threaded_appends,
)


def bare_commits(conninfo: str, schema: str, count: int) -> float:
    """Baseline: one-row INSERT + COMMIT transactions per second on the same server (what a store append costs
    at the least: a round trip or two and a WAL flush)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        table = sql.SQL("{}.baseline").format(sql.Identifier(schema))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE TABLE {} (n bigint PRIMARY KEY, data bytea)").format(table))
        insert = sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(table)
        start = time.perf_counter()
        for n in range(count):
            with conn.transaction():
                conn.execute(insert, (n, b"x" * 100))
        return count / (time.perf_counter() - start)


def measure(
    name: str, url: str, batched_url: str, import_url: str, args: argparse.Namespace, results: dict[str, float]
) -> None:
    results[f"{name}_append_single_per_s"] = single_appends(url, args.single)
    results[f"{name}_append_batched_per_s"] = batched_appends(batched_url, args.events, 1000)
    results[f"{name}_read_full_per_s"] = full_read(batched_url)
    results[f"{name}_scan_full_per_s"] = scan_read(batched_url)
    results[f"{name}_append_8_threads_per_s"] = threaded_appends(url, args.single, 8)
    results[f"{name}_append_batch_import_per_s"] = batch_import(import_url, args.events // 5)
    latencies = cross_process_latency(url, args.latency)
    results[f"{name}_cross_process_p50_ms"] = statistics.median(latencies)
    results[f"{name}_cross_process_p99_ms"] = percentile(latencies, 0.99)


def main() -> None:
    parser = bench_parser(__doc__, postgres=True)
    parser.add_argument("--events", type=int, default=100_000, help="events for the batched and read runs")
    parser.add_argument("--single", type=int, default=1000, help="single-event appends to time")
    parser.add_argument("--latency", type=int, default=200, help="cross-process appends to time")
    args = parser.parse_args()
    if postgres_or_skip(args.url) is None:
        return
    results: dict[str, float] = {}
    schemas = [f"bench_{uuid.uuid4().hex[:12]}" for _ in range(3)]
    sep = "&" if urllib.parse.urlsplit(args.url).query else "?"
    try:
        pg = [f"{args.url}{sep}schema={s}" for s in schemas]
        results["postgres_bare_commit_per_s"] = bare_commits(args.url, schemas[0] + "_baseline", args.single)
        measure("postgres", pg[0], pg[1], pg[2], args, results)
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            for s in [*schemas, schemas[0] + "_baseline"]:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(s)))
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        results["sqlite_fsync_per_s"] = fsync_rate(Path(tmp), args.single)
        sqlite = [f"sqlite://{tmp}/{name}.db" for name in ("single", "batched", "imported")]
        measure("sqlite", sqlite[0], sqlite[1], sqlite[2], args, results)
    results["postgres_single_vs_bare_commit"] = (
        results["postgres_append_single_per_s"] / results["postgres_bare_commit_per_s"]
    )
    results["postgres_scan_vs_sqlite_scan"] = results["postgres_scan_full_per_s"] / results["sqlite_scan_full_per_s"]
    results["sqlite_single_vs_fsync"] = results["sqlite_append_single_per_s"] / results["sqlite_fsync_per_s"]
    print_results(results, args.json)


if __name__ == "__main__":
    main()
