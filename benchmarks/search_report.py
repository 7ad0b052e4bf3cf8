"""The search benchmark's results: the JSON as measured, and a table of each figure beside its baseline and target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.machine import DISTURBED_CORES

__all__ = ["markdown", "write"]


def write(result: dict[str, Any], stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md")]
    paths[0].write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(result), encoding="utf-8")
    return paths


def _ms(value: float) -> str:
    return f"{value * 1e3:.1f} us" if value < 0.1 else f"{value:.2f} ms"


def _loads(values: Any) -> str:
    return " / ".join(f"{v:.1f}" for v in values or ())


def markdown(r: dict[str, Any]) -> str:
    """The figures as a table, each beside its baseline and its target."""
    corpus, ix, search, cli = r["corpus"], r["indexing"], r["search"], r["cli"]
    warm = search["warm"]
    rows = [
        ("search, warm, p50 / p99", f"{warm['ours']['p50_ms']:.2f} / {warm['ours']['p99_ms']:.2f} ms",
         f"raw FTS5, same tables: {warm['raw']['p50_ms']:.2f} / {warm['raw']['p99_ms']:.2f} ms",
         f"{search['warm_vs_raw_p50']:.2f}x / {search['warm_vs_raw_p99']:.2f}x", "<= 2x; p99 <= 50 ms"),
        ("", "", f"raw FTS5, one table: {warm['raw_one_table']['p50_ms']:.2f} / "
         f"{warm['raw_one_table']['p99_ms']:.2f} ms", "", ""),
        ("acp-registry search, p50 / p99", f"{cli['search']['p50_ms']:.0f} / {cli['search']['p99_ms']:.0f} ms",
         f"python -c pass: {cli['python']['p50_ms']:.0f} ms", f"{cli['search_vs_python']:.1f}x", "<= 150 ms"),
        ("", "", f"acp-registry list: {cli['list']['p50_ms']:.0f} ms", f"{cli['search_vs_list']:.2f}x", ""),
    ]  # fmt: skip
    rg = r.get("ripgrep")
    if rg:
        for kind in ("common word", "rare word"):
            rows.append((f"ripgrep, {kind}, p50", f"{rg[kind]['p50_ms']:.0f} ms",
                         f"our warm search: {search['per_query'][kind]['ours']['p50_ms']:.2f} ms",
                         f"{rg[kind]['vs_ours_warm']:.0f}x slower", ">= 100x"))  # fmt: skip
    rows += [
        ("indexing", f"{ix['index_per_s']:,.0f} messages/s", f"raw FTS5 insert: {ix['raw_insert_per_s']:,.0f}/s",
         f"{ix['index_vs_raw_insert']:.2f}x", ">= 50k/s; >= 0.5x"),
        ("index rebuild, peak RSS", f"{ix['index_peak_rss_bytes'] / 2**20:,.0f} MiB", "", "", "<= 1 GiB"),
        ("acp-registry rebuild, wall / peak RSS",
         f"{ix['rebuild_process_seconds']:.1f} s / {ix['rebuild_peak_rss_bytes'] / 2**20:,.0f} MiB", "", "", ""),
        ("content + index bytes", f"{(r['bytes']['content_bytes'] + r['bytes']['index_bytes']) / 1e6:,.1f} MB",
         f"raw text: {r['bytes']['text_bytes'] / 1e6:,.1f} MB", f"{r['bytes']['stored_vs_text']:.2f}x", "<= 1.5x"),
        ("index bytes", f"{r['bytes']['index_bytes'] / 1e6:,.1f} MB",
         f"raw FTS5 table: {r['bytes']['raw_fts_bytes'] / 1e6:,.1f} MB", f"{r['bytes']['index_vs_raw_fts']:.2f}x", ""),
    ]  # fmt: skip
    for name, label in (
        ("list_page", "list page, in process"),
        ("rebuild", "acp-registry rebuild"),
        ("replay_at", "acp-registry replay --at"),
        ("recorded_turn", "recorded turn, durable"),
        ("change_stream", "change stream, a change to 1 subscriber"),
    ):
        twin = r.get("twins", {}).get(name)
        if twin:
            rows.append((f"{label}, p50", f"with content {_ms(twin['content']['p50_ms'])}",
                         f"without: {_ms(twin['plain']['p50_ms'])}", f"{twin['content_vs_plain_p50']:.2f}x",
                         "<= 1.2x"))  # fmt: skip
    m = r["machine"]
    lines = [
        f"# Search ({corpus['sessions']:,} sessions, {corpus['messages']:,} messages, "
        f"{corpus['text_bytes'] / 1e6:,.0f} MB of text; {search['shards']} index tables)",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, Python {m.get('python')}, SQLite {m.get('sqlite')}; "
        f"load average before {_loads(m.get('load_before'))}, after {_loads(m.get('load_after'))};"
        " other processes used "
        f"{m.get('others_cpu_cores')} cores on average. Wall {r['wall_seconds']:.0f} s."
        + (
            " Other processes used more than"
            f" {DISTURBED_CORES} of the cores: the absolute times are disturbed; the ratios, taken in turn, less so."
            if (m.get("others_cpu_cores") or 0) > DISTURBED_CORES
            else ""
        ),
        "",
        "| figure | ours | baseline (same run) | ratio | target |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {' | '.join(row)} |" for row in rows),
        "",
        "| query | matching messages | ours p50 / p99 ms | raw p50 / p99 ms |",
        "| --- | --- | --- | --- |",
    ]
    for kind, q in search["per_query"].items():
        lines.append(
            f"| {kind}: `{q['query']}` | {q['matches']:,} | {q['ours']['p50_ms']:.2f} / {q['ours']['p99_ms']:.2f} |"
            f" {q['raw']['p50_ms']:.2f} / {q['raw']['p99_ms']:.2f} |"
        )
    if "twins" in r:
        lines += ["", f"Twins: {r['twins']['sessions']:,} sessions, {r['twins']['messages']:,} messages."]
    return "\n".join(lines) + "\n"
