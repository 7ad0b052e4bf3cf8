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
and writes ``benchmarks/results/<name>-search.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from benchmarks.corpus import DEFAULT_SEED, QUERIES, Conversation, iter_corpus
from benchmarks.figures import interleave
from benchmarks.machine import CpuMeter, describe_machine
from events import SqliteStore
from events.content import content_ref, decode_body
from events.model import Message, Role, SessionCreated, SessionInfoChanged, SessionUpdated, TitleSource
from events.store import AppendRequest

__all__ = ["MODES", "SearchSettings", "build", "main", "measure", "raw_search", "write"]

RESULTS: Final = Path(__file__).parent / "results"
PAGE: Final = 20
_TOKENIZER: Final = "unicode61 remove_diacritics 2"
_BATCH: Final = 5_000


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


@dataclass
class Built:
    store: Path
    jsonl: Path | None
    sessions: int = 0
    messages: int = 0
    text_bytes: int = 0
    seconds: float = 0.0


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


def _url(path: Path) -> str:
    return f"sqlite://{path}"


# -- indexing -------------------------------------------------------------------------------------------------

_REBUILD_INDEX: Final = """
import json, sys, time
from events import SqliteStore
from registry.search.index import SqliteSearchIndex
with SqliteStore(sys.argv[1]) as store:
    index = SqliteSearchIndex(store, store.connect)
    started = time.perf_counter()
    count = index.rebuild()
    took = time.perf_counter() - started
    index.close()
print(json.dumps({"messages": count, "seconds": took}))
"""


def _child(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Run ``argv`` to its end: wall seconds, peak RSS in bytes (its ``ru_maxrss``), stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    # communicate() reaped it: the rusage of that one child is taken from the children's totals' growth instead.
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return wall, 0, out.decode()


def _child_rss(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """As ``_child``, with the child's own peak RSS (``os.wait4``)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[:4]} failed ({proc.returncode}): {err.read().decode()[-2000:]}")
        return wall, usage.ru_maxrss * 1024, out.read().decode()


def index_figures(built: Built, work: Path) -> dict[str, Any]:
    """Our index rebuilt in a child beside a raw FTS5 insert of the same text; ``acp-registry rebuild`` whole."""
    wall, rss, out = _child_rss([sys.executable, "-c", _REBUILD_INDEX, str(built.store)])
    ours = json.loads(out)
    raw_seconds = raw_insert(built.store, work / "raw-fts.db")
    figures: dict[str, Any] = {
        "index_messages": ours["messages"],
        "index_seconds": ours["seconds"],
        "index_per_s": ours["messages"] / ours["seconds"],
        "index_process_seconds": wall,
        "index_peak_rss_bytes": rss,
        "raw_insert_seconds": raw_seconds,
        "raw_insert_per_s": ours["messages"] / raw_seconds,
        "index_vs_raw_insert": raw_seconds / ours["seconds"],
    }
    wall, rss, _ = _child_rss([*_cli(), "rebuild", "--store", _url(built.store)])
    figures["rebuild_process_seconds"] = wall
    figures["rebuild_peak_rss_bytes"] = rss
    return figures


def _texts(store: Path) -> Iterator[list[tuple[int, str]]]:
    """The kept messages' (row id, text) in batches, as the index numbers them."""
    db = sqlite3.connect(store)
    after = 0
    try:
        while True:
            rows = db.execute(
                "SELECT position, seq, body FROM messages WHERE position > ? AND position <= (SELECT max(position)"
                " FROM (SELECT position FROM messages WHERE position > ? ORDER BY position LIMIT ?))"
                " ORDER BY position, seq",
                (after, after, _BATCH),
            ).fetchall()
            if not rows:
                return
            yield [(p << 20 | q, decode_body(b)) for p, q, b in rows]
            after = rows[-1][0]
    finally:
        db.close()


def raw_insert(store: Path, raw: Path) -> float:
    """Seconds to insert every kept message's text into one contentless FTS5 table of a fresh file (WAL, a
    transaction a batch, the store's durability), the text read and decoded beforehand (not counted)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{raw}{suffix}").unlink(missing_ok=True)
    db = sqlite3.connect(raw, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(f"CREATE VIRTUAL TABLE raw USING fts5(body, content='', tokenize='{_TOKENIZER}')")
    seconds = 0.0
    for rows in _texts(store):
        started = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT INTO raw (rowid, body) VALUES (?, ?)", rows)
        db.execute("COMMIT")
        seconds += time.perf_counter() - started
    db.close()
    return seconds


def byte_figures(built: Built, raw: Path) -> dict[str, Any]:
    """The ``messages`` table (with its index) and the search tables, beside the raw text and beside the raw FTS5
    table of the same text (``raw_insert``'s)."""
    db = sqlite3.connect(built.store)
    try:
        content = db.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = 'messages')"
        ).fetchone()[0]
        index = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name GLOB 'search_[0-9]*'").fetchone()[0]
        rows = db.execute("SELECT count(*), sum(length(body)) FROM messages").fetchone()
    finally:
        db.close()
    db = sqlite3.connect(raw)
    try:
        raw_index = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name GLOB 'raw*'").fetchone()[0]
    finally:
        db.close()
    return {
        "text_bytes": built.text_bytes,
        "body_bytes": rows[1],
        "content_bytes": content,
        "index_bytes": index,
        "raw_fts_bytes": raw_index,
        "stored_vs_text": (content + index) / built.text_bytes,
        "index_vs_raw_fts": index / raw_index,
        "per_message_bytes": (content + index - built.text_bytes) / rows[0],
    }


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


def _quantiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1e3,
    }


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
                    **{name: _quantiles(values) for name, values in samples.items()},
                }
                for name, values in samples.items():
                    pooled[name] += values
    finally:
        store.close()
        db.close()
        raw_db.close()
    figures = {name: _quantiles(values) for name, values in pooled.items()}
    return {
        "warm": figures,
        "per_query": per_query,
        "shards": len(tables),
        "warm_vs_raw_p50": figures["ours"]["p50_ms"] / figures["raw"]["p50_ms"],
        "warm_vs_raw_p99": figures["ours"]["p99_ms"] / figures["raw"]["p99_ms"],
    }


def _cli() -> list[str]:
    return [sys.executable, "-m", "registry.cli"]


def cli_figures(built: Built, rounds: int) -> dict[str, Any]:
    """``acp-registry search`` as a whole process beside ``python -c pass``, taking turns."""
    words = ["error", "vilokaro", "parse_config"]
    command = [str(Path(sys.executable).with_name("acp-registry"))]
    if not Path(command[0]).exists():
        command = _cli()

    def search(n: int) -> float:
        return _child([*command, "search", words[n % len(words)], "--store", _url(built.store), "--json"])[0]

    def python(_: int) -> float:
        return _child([sys.executable, "-c", "pass"])[0]

    def listing(_: int) -> float:
        return _child([*command, "list", "--store", _url(built.store), "--json"])[0]

    timers = {"search": search, "python": python, "list": listing}
    timers["search"](0)  # bytecode cached, file in the page cache
    samples = interleave(timers, range(rounds * len(words)))
    figures = {name: _quantiles(values) for name, values in samples.items()}
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
        figure = _quantiles(samples)
        out[kind] = {**figure, "vs_ours_warm": figure["p50_ms"] / warm["per_query"][kind]["ours"]["p50_ms"]}
    return out


# -- nothing else slower ------------------------------------------------------------------------------------


def twin_figures(with_content: Path, without: Path, sessions: int, rounds: int, turns: int) -> dict[str, Any]:
    """The twins side by side: the first list page in process, ``rebuild`` and ``replay --at`` as processes, and
    a durable recorded turn, with content / without, taking turns."""
    from registry import SessionRegistry  # noqa: PLC0415

    figures: dict[str, Any] = {}
    stores = {"content": with_content, "plain": without}
    registries = {name: SessionRegistry(SqliteStore(str(path)), follow=False) for name, path in stores.items()}
    try:
        for registry in registries.values():
            registry.list()

        def page(name: str) -> Callable[[int], float]:
            def run(_: int) -> float:
                started = time.perf_counter()
                registries[name].list()
                return time.perf_counter() - started

            return run

        samples = interleave({name: page(name) for name in stores}, range(rounds * 10))
        figures["list_page"] = _pair(samples)
    finally:
        for registry in registries.values():
            registry.close()
    with SqliteStore(str(without)) as store:
        middle = store.head() // 2
    for figure, argv in {
        "rebuild": ["rebuild"],
        "replay_at": ["replay", "--at", str(middle), "--json"],
    }.items():
        timers = {
            name: (lambda _, path=path, argv=argv: _child([*_cli(), *argv, "--store", _url(path)])[0])
            for name, path in stores.items()
        }
        figures[figure] = _pair(interleave(timers, range(max(3, rounds // 6))))
    figures["recorded_turn"] = _turns(stores, turns)
    figures["change_stream"] = _stream(stores, changes=2_000, rounds=max(3, rounds // 2))
    return figures


def _stream(stores: dict[str, Path], changes: int, rounds: int) -> dict[str, Any]:
    """The change stream to one subscriber (``benchmarks.change_stream``'s path: the turns in the log and the read
    model already, timed from ``sync()`` until the subscriber has every change) - turns keeping a prompt and an
    answer on one twin, the same turns without them on the other - seconds per change, rounds taking turns."""
    import threading  # noqa: PLC0415

    from registry import SessionRegistry  # noqa: PLC0415

    said = [Message(role=Role.USER, text="why does the parser time out"), Message(role=Role.AGENT, text="a lock")]
    ref = content_ref(said)
    samples: dict[str, list[float]] = {name: [] for name in stores}
    opened = {name: SqliteStore(str(path), synchronous="off") for name, path in stores.items()}
    registries = {name: SessionRegistry(store, follow=False) for name, store in opened.items()}
    try:
        done = {name: threading.Event() for name in stores}
        seen = dict.fromkeys(stores, 0)
        target = dict.fromkeys(stores, 0)
        for name, registry in registries.items():
            registry.sync()

            def count(_item: object, name: str = name) -> None:
                seen[name] += 1
                if seen[name] >= target[name]:
                    done[name].set()

            registry.list_changes().subscribe(count)
        ids = {name: [s.session_id for s in r.list().sessions] for name, r in registries.items()}
        for n in range(rounds):
            for name in list(stores) if n % 2 == 0 else list(reversed(stores)):
                content = name == "content"
                at = 2_000_000_000_000_000_000 + n * changes
                opened[name].append_batch(
                    [
                        AppendRequest(
                            ids[name][k % len(ids[name])],
                            [SessionUpdated(at=at + k, messages=2, content=ref if content else None)],
                            content=[said] if content else None,
                        )
                        for k in range(changes)
                    ]
                )
                registries[name].read_model.catch_up()
                done[name].clear()
                target[name] = seen[name] + changes
                started = time.perf_counter()
                registries[name].sync()
                if not done[name].wait(300):
                    raise RuntimeError("the change stream did not deliver every change within 300 s")
                samples[name].append((time.perf_counter() - started) / changes)
    finally:
        for registry in registries.values():
            registry.close()
        for store in opened.values():
            store.close()
    return _pair(samples)


def _turns(stores: dict[str, Path], turns: int) -> dict[str, Any]:
    """A durable ``record_turn`` of a user's prompt and the agent's answer (the corpus's sizes), with the
    conversation kept / not, in blocks of 10 taking turns, on scratch copies of the twins."""
    from registry import SessionRegistry  # noqa: PLC0415

    said = [
        Message(role=Role.USER, text="make the parse_config timeout configurable"),
        Message(role=Role.AGENT, text="Done: src/config.py reads CONFIG_TIMEOUT, tests pass"),
    ]
    registries = {name: SessionRegistry(SqliteStore(str(path)), follow=False) for name, path in stores.items()}
    samples: dict[str, list[float]] = {name: [] for name in stores}
    try:
        ids = {name: r.list().sessions[0].session_id for name, r in registries.items()}
        for block in range(turns // 10):
            order = list(stores) if block % 2 == 0 else list(reversed(stores))
            for name in order:
                registry = registries[name]
                conversation = said if name == "content" else ()
                for _ in range(10):
                    started = time.perf_counter()
                    registry.record_turn(ids[name], messages=2, conversation=conversation)
                    samples[name].append(time.perf_counter() - started)
    finally:
        for registry in registries.values():
            registry.close()
    return _pair(samples)


def _pair(samples: dict[str, list[float]]) -> dict[str, Any]:
    figures = {name: _quantiles(values) for name, values in samples.items()}
    return {**figures, "content_vs_plain_p50": figures["content"]["p50_ms"] / figures["plain"]["p50_ms"]}


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


def write(result: dict[str, Any], stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md")]
    paths[0].write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(result), encoding="utf-8")
    return paths


def _ms(value: float) -> str:
    return f"{value * 1e3:.1f} us" if value < 0.1 else f"{value:.2f} ms"


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
        f"load before {m.get('load_before')}, after {m.get('load_after')}; other processes used "
        f"{m.get('others_cpu_cores')} cores on average. Wall {r['wall_seconds']:.0f} s.",
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
