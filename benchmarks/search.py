"""What finding a conversation costs (issue 41), each figure beside its baseline measured in the same run:

* **search, warm**: ``SessionRegistry.search`` (first page of 20 hits) in a warm process, p50/p99 over every query
  of ``benchmarks.corpus.QUERIES`` repeated, beside the raw FTS5 query of the same words on the same tables (each
  shard's best 20 by ``bm25``, merged) - and beside one unsharded FTS5 table of the same text, for reference;
* **search, a process**: ``acp-registry search QUERY --json`` as a whole process, wall clock, beside
  ``python -c pass`` and ``acp-registry list --json`` (the same start, a page of the read model);
* **ripgrep**: ``rg -i -l -F WORD`` over the same messages written as the agents' JSONL files (one file a session,
  Claude Code's shape: what users do today), beside our search of the same word;
* **indexing**: the search index rebuilt from the kept messages in a child process (messages/s, its peak RSS as
  the child's ``ru_maxrss``), beside a raw FTS5 insert of the same text (the same tokenizer, contentless, the same
  batches and durability); ``acp-registry rebuild`` (read model and index) as a whole process, its wall and RSS;
* **bytes**: the ``messages`` table and the index (``dbstat``) beside the raw UTF-8 text, and the index beside the
  raw FTS5 table of the same text;
* **nothing else slower**: twin stores of ``twin_sessions`` sessions - the same events, one keeping the messages,
  one not - with the first ``session/list`` page in process, ``acp-registry rebuild`` and ``replay --at`` as
  processes, a durable recorded turn with its conversation beside one without, and the change stream of turns
  with and without content, taking turns.

    python -m benchmarks.search [--sessions 100000] [--twin-sessions 10000] [--rounds 30] [--json out.json]

The corpus is ``benchmarks.corpus``'s (seeded). ``python -m benchmarks.run --quick`` runs this at the quick size
and writes ``benchmarks/results/<name>-search.json`` and ``.md``. The indexing and byte figures are in
``search_index.py``, the twins' in ``search_twins.py``, the table in ``search_report.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from benchmarks.corpus import DEFAULT_SEED, QUERIES, Conversation, iter_corpus
from benchmarks.figures import interleave
from benchmarks.machine import CpuMeter, compile_bytecode, describe_machine
from benchmarks.search_children import Built, cli, quantiles, run_child, store_url
from benchmarks.search_index import byte_figures, index_figures
from benchmarks.search_report import write
from benchmarks.search_twins import twin_figures
from events import SqliteStore
from events.content import content_ref
from events.model import Message, Role, SessionCreated, SessionInfoChanged, SessionUpdated, TitleSource
from events.store import AppendRequest

__all__ = ["MODES", "SearchSettings", "build", "main", "measure", "raw_search", "write"]

RESULTS: Final = Path(__file__).parent / "results"
PAGE: Final = 20


@dataclass(frozen=True)
class SearchSettings:
    sessions: int = 100_000  # the corpus: about 20 messages a session
    twin_sessions: int = 10_000  # the with/without-content twins of "nothing else slower" (0: skipped)
    rounds: int = 30  # warm searches per query, each beside its raw query
    cli_rounds: int = 7  # acp-registry search processes per query
    rg_rounds: int = 3  # ripgrep runs per word
    turns: int = 200  # recorded turns per twin
    seed: int = DEFAULT_SEED


MODES: Final = {
    "quick": SearchSettings(),
    "full": SearchSettings(sessions=1_000_000, twin_sessions=100_000),
}


# -- the stores and files ---------------------------------------------------------------------------------


def _requests(conversation: Conversation, content: bool) -> AppendRequest:
    events: list[Any] = [SessionCreated(cwd=conversation.cwd, at=conversation.at, agent=conversation.agent)]
    kept: list[Sequence[Message] | None] = [None]
    events.append(SessionInfoChanged(title=conversation.title, title_source=TitleSource.AGENT))
    kept.append(None)
    for turn in conversation.turns:
        at = turn[-1].at or conversation.at
        said = sum(1 for m in turn if m.role in (Role.USER, Role.AGENT))
        events.append(SessionUpdated(at=at, messages=said, content=content_ref(turn) if content else None))
        kept.append(turn if content else None)
    return AppendRequest(conversation.session_id, events, content=kept if content else None)


def _jsonl_lines(conversation: Conversation) -> str:
    """The session as Claude Code writes it: a line a message."""
    lines = []
    for turn in conversation.turns:
        for m in turn:
            kind = "user" if m.role in (Role.USER, Role.TOOL) else "assistant"
            thought = m.role is Role.THOUGHT
            block = {"type": "thinking", "thinking": m.text} if thought else {"type": "text", "text": m.text}
            lines.append(
                json.dumps(
                    {
                        "type": kind,
                        "sessionId": conversation.session_id,
                        "cwd": conversation.cwd,
                        "timestamp": m.at,
                        "message": {"role": kind, "content": [block]},
                    },
                    separators=(",", ":"),
                )
            )
    return "\n".join(lines) + "\n"


def build(
    path: Path,
    sessions: int,
    seed: int,
    *,
    content: bool = True,
    jsonl: Path | None = None,
    twin: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Built:
    """A store of the corpus's ``sessions`` at ``path`` (its messages kept when ``content``), with, when asked, the
    same conversations as JSONL files under ``jsonl`` and a twin store without content at ``twin``."""
    built = Built(path, jsonl)
    started = time.perf_counter()
    store = SqliteStore(str(path), synchronous="off")
    other = None if twin is None else SqliteStore(str(twin), synchronous="off")
    batch: list[Conversation] = []

    def flush() -> None:
        store.append_batch([_requests(c, content) for c in batch])
        if other is not None:
            other.append_batch([_requests(c, False) for c in batch])
        if jsonl is not None:
            for c in batch:
                folder = jsonl / c.cwd.strip("/").replace("/", "-")
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{c.session_id}.jsonl").write_text(_jsonl_lines(c), encoding="utf-8")
        batch.clear()

    try:
        for conversation in iter_corpus(sessions, seed):
            batch.append(conversation)
            built.sessions += 1
            for turn in conversation.turns:
                built.messages += len(turn)
                built.text_bytes += sum(len(m.text.encode()) for m in turn)
            if len(batch) == 500:
                flush()
                if built.sessions % 10_000 == 0:
                    progress(f"corpus: {built.sessions:,} sessions, {built.messages:,} messages")
        if batch:
            flush()
    finally:
        store.close()
        if other is not None:
            other.close()
    built.seconds = time.perf_counter() - started
    return built


# -- searching ------------------------------------------------------------------------------------------------


def raw_search(db: sqlite3.Connection, tables: Sequence[str], expression: str, limit: int = PAGE) -> list[int]:
    """The raw FTS5 query: each table's best ``limit`` by ``bm25``, merged; their row ids."""
    found: list[tuple[float, int]] = []
    for table in tables:
        found += [
            (score, rowid)
            for rowid, score in db.execute(
                f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT ?",
                (expression, limit),
            )
        ]
    found.sort()
    return [rowid for _, rowid in found[:limit]]


def search_figures(built: Built, work: Path, rounds: int) -> dict[str, Any]:
    """Our first page beside the raw FTS5 query of the same words on the same tables (and on one unsharded
    table of the same text, ``raw_insert``'s), per query and pooled."""
    from registry import SessionRegistry  # noqa: PLC0415
    from registry.search.query import parse  # noqa: PLC0415

    store = SqliteStore(str(built.store))
    raw_db = sqlite3.connect(work / "raw-fts.db")
    db = sqlite3.connect(built.store)
    tables = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE name GLOB 'search_[0-9]*'")]
    tables = [t for t in tables if "_" not in t.removeprefix("search_")]
    per_query: dict[str, Any] = {}
    pooled: dict[str, list[float]] = {"ours": [], "raw": [], "raw_one_table": []}
    try:
        with SessionRegistry(store, follow=False) as registry:
            for kind, text in QUERIES.items():
                expression = parse(text).fts5()
                hits = len(registry.search(text, limit=PAGE).hits)  # warm: the first call caught up the index

                def ours(_: int, text: str = text) -> float:
                    started = time.perf_counter()
                    registry.search(text, limit=PAGE)
                    return time.perf_counter() - started

                def raw(_: int, expression: str = expression) -> float:
                    started = time.perf_counter()
                    raw_search(db, tables, expression)
                    return time.perf_counter() - started

                def one(_: int, expression: str = expression) -> float:
                    started = time.perf_counter()
                    raw_search(raw_db, ["raw"], expression)
                    return time.perf_counter() - started

                samples = interleave({"ours": ours, "raw": raw, "raw_one_table": one}, range(rounds))
                per_query[kind] = {
                    "query": text,
                    "hits": hits,
                    "matches": sum(
                        raw_db.execute("SELECT count(*) FROM raw WHERE raw MATCH ?", (expression,)).fetchone()
                    ),
                    **{name: quantiles(values) for name, values in samples.items()},
                }
                for name, values in samples.items():
                    pooled[name] += values
    finally:
        store.close()
        db.close()
        raw_db.close()
    figures = {name: quantiles(values) for name, values in pooled.items()}
    return {
        "warm": figures,
        "per_query": per_query,
        "shards": len(tables),
        "warm_vs_raw_p50": figures["ours"]["p50_ms"] / figures["raw"]["p50_ms"],
        "warm_vs_raw_p99": figures["ours"]["p99_ms"] / figures["raw"]["p99_ms"],
    }


def cli_figures(built: Built, rounds: int) -> dict[str, Any]:
    """``acp-registry search`` as a whole process beside ``python -c pass``, taking turns."""
    words = ["error", "vilokaro", "parse_config"]
    command = [str(Path(sys.executable).with_name("acp-registry"))]
    if not Path(command[0]).exists():
        command = cli()

    def search(n: int) -> float:
        return run_child([*command, "search", words[n % len(words)], "--store", store_url(built.store), "--json"])

    def python(_: int) -> float:
        return run_child([sys.executable, "-c", "pass"])

    def listing(_: int) -> float:
        return run_child([*command, "list", "--store", store_url(built.store), "--json"])

    timers = {"search": search, "python": python, "list": listing}
    compile_bytecode()
    timers["search"](0)  # the file in the page cache
    samples = interleave(timers, range(rounds * len(words)))
    figures = {name: quantiles(values) for name, values in samples.items()}
    return {
        **figures,
        "search_vs_python": figures["search"]["p50_ms"] / figures["python"]["p50_ms"],
        "search_vs_list": figures["search"]["p50_ms"] / figures["list"]["p50_ms"],
    }


def ripgrep_figures(built: Built, warm: dict[str, Any], rounds: int) -> dict[str, Any] | None:
    """``rg -i -l -F WORD`` over the JSONL files, warm cache, beside our warm search of the same word."""
    rg = shutil.which("rg") or str(Path(sys.executable).with_name("rg"))
    if built.jsonl is None or not Path(rg).exists():
        return None
    out: dict[str, Any] = {"binary": rg, "files": built.sessions}
    for kind in ("common word", "rare word"):
        word = QUERIES[kind]
        argv = [rg, "-i", "-l", "-F", word, str(built.jsonl)]
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)  # the files in the page cache
        samples = []
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)
            samples.append(time.perf_counter() - started)
        figure = quantiles(samples)
        out[kind] = {**figure, "vs_ours_warm": figure["p50_ms"] / warm["per_query"][kind]["ours"]["p50_ms"]}
    return out


# -- the run --------------------------------------------------------------------------------------------------


def measure(settings: SearchSettings, work: Path, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every figure above, in ``work``; returned as plain data with the machine and its load."""
    meter = CpuMeter()
    started = time.perf_counter()
    machine = describe_machine()
    progress(f"corpus: {settings.sessions:,} sessions")
    built = build(work / "search.db", settings.sessions, settings.seed, jsonl=work / "jsonl", progress=progress)
    result: dict[str, Any] = {
        "settings": msgspec.to_builtins(settings.__dict__),
        "corpus": {
            "sessions": built.sessions,
            "messages": built.messages,
            "text_bytes": built.text_bytes,
            "build_seconds": built.seconds,
        },
    }
    progress("indexing")
    result["indexing"] = index_figures(built, work)
    result["bytes"] = byte_figures(built, work / "raw-fts.db")
    progress("searching")
    result["search"] = search_figures(built, work, settings.rounds)
    progress("acp-registry search")
    result["cli"] = cli_figures(built, settings.cli_rounds)
    progress("ripgrep")
    result["ripgrep"] = ripgrep_figures(built, result["search"], settings.rg_rounds)
    shutil.rmtree(work / "jsonl", ignore_errors=True)
    if settings.twin_sessions:
        progress(f"twins: {settings.twin_sessions:,} sessions")
        twin = build(work / "twin-content.db", settings.twin_sessions, settings.seed + 1, twin=work / "twin-plain.db")
        result["twins"] = {
            "sessions": twin.sessions,
            "messages": twin.messages,
            **twin_figures(work / "twin-content.db", work / "twin-plain.db", twin.sessions, 6, settings.turns),
        }
    wall = time.perf_counter() - started
    result["wall_seconds"] = wall
    result["machine"] = msgspec.to_builtins(
        msgspec.structs.replace(machine, load_after=os.getloadavg(), others_cpu_cores=round(meter.others(wall), 3))
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = SearchSettings()
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    parser.add_argument("--twin-sessions", type=int, default=defaults.twin_sessions)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--name", default="search", help="results file stem in --out (default: search)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    settings = SearchSettings(
        sessions=args.sessions, twin_sessions=args.twin_sessions, rounds=args.rounds, seed=args.seed
    )
    scratch = Path(os.environ.get("BENCH_DIR") or Path(__file__).parent / ".work")
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        result = measure(settings, Path(tmp), progress=lambda text: print(text, file=sys.stderr, flush=True))
    for path in write(result, args.out / args.name):
        print(path)


if __name__ == "__main__":
    main()
