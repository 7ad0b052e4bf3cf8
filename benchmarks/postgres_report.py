"""The PostgreSQL benchmark's figures (``postgres_registry.py``) as markdown: each beside its raw baseline."""

from __future__ import annotations

from typing import Any

__all__ = ["markdown"]

_PAIRS = (
    ("durable append (1 event)", "write.append", "write.raw_insert_commit"),
    ("create", "write.create", "write.raw_insert_commit"),
    ("record_activity", "write.record_activity", "write.raw_insert_commit"),
    ("list first page", "list_all.first", "list_all.raw_first"),
    ("list deep page", "list_all.deep", "list_all.raw_deep"),
    ("list first page, cwd", "list_cwd.first", "list_cwd.raw_first"),
    ("list deep page, cwd", "list_cwd.deep", "list_cwd.raw_deep"),
)


def _us(value: float) -> str:
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.0f} µs"


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# The registry on PostgreSQL, beside raw psycopg",
        "",
        f"Run of {results['date']} (`python -m benchmarks.postgres_registry`), PostgreSQL on 127.0.0.1 of the same"
        " 2-core machine, **loaded by six other working sessions** at the time: ratios (same run, interleaved) are"
        " the figures to read; absolute times are noisy.",
        "",
    ]
    for size, stage in results["sizes"].items():
        fig = stage["figures"]
        lines += [
            f"## {int(size):,} sessions",
            "",
            "| operation | p50 | raw baseline p50 | speed vs raw (p50) | p99 |",
            "|---|---|---|---|---|",
        ]
        for label, mine, raw in _PAIRS:
            if mine not in fig or raw not in fig:
                continue
            ratio = fig[raw]["p50_us"] / fig[mine]["p50_us"]
            mine_p50, raw_p50, mine_p99 = (
                _us(fig[k][q]) for k, q in ((mine, "p50_us"), (raw, "p50_us"), (mine, "p99_us"))
            )
            lines.append(f"| {label} | {mine_p50} | {raw_p50} | {ratio:.2f}x | {mine_p99} |")
        lines += [
            "",
            f"- batch import (`append_batch`, 1,000 sessions a call): {stage['import_sessions_per_s']:,.0f} sessions/s;"
            f" raw `COPY` of the same number of rows: {stage['raw_copy_sessions_per_s']:,.0f} sessions/s"
            f" ({stage['import_sessions_per_s'] / stage['raw_copy_sessions_per_s']:.2f}x)",
            f"- read model built from the log by a fresh process: {stage['read_model_build_s']:.2f} s",
            f"- fresh `acp-registry serve` to its first page: {stage['serve_first_s'] * 1000:.0f} ms,"
            f" RSS {stage['serve_rss_mb']:.1f} MB",
            "",
        ]
        if "writers" in stage:
            writers = stage["writers"]
            counts = sorted({int(k.split(".")[1]) for k in writers})
            one = writers["registry.1"]["ops_per_s"]
            lines += [
                "### Writer processes (each: create, then 4 record_activity, on sessions of its own)",
                "",
                "| processes | ops/s | x of 1 | p50 | p99 | raw INSERT+COMMIT ops/s | raw x of 1 | CPU busy"
                " | lock waiters |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            raw_one = writers["raw.1"]["ops_per_s"]
            for count in counts:
                mine, raw = writers[f"registry.{count}"], writers[f"raw.{count}"]
                lines.append(
                    f"| {count} | {mine['ops_per_s']:,.0f} | {mine['ops_per_s'] / one:.2f}x | {_us(mine['p50_us'])} |"
                    f" {_us(mine['p99_us'])} | {raw['ops_per_s']:,.0f} | {raw['ops_per_s'] / raw_one:.2f}x |"
                    f" {mine['cpu_busy']:.0%} | {mine['lock_waiters_mean']:.2f} |"
                )
            lines.append("")
        if "notification" in stage:
            note = stage["notification"]
            lines += [
                f"- cross-host notification (another process's append to this process's subscription), {note['note']}:"
                f" p50 {_us(note['p50_us'])}, p99 {_us(note['p99_us'])} ({note['n']} pings)",
                "",
            ]
    return "\n".join(lines) + "\n"
