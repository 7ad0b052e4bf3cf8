"""The search benchmark's indexing and bytes: the search index rebuilt in a child process beside a raw FTS5 insert of
the same text, ``acp-registry rebuild`` whole, and what the kept messages and their index take on disk
(``benchmarks.search`` runs them)."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from benchmarks.search_children import cli, run_child_rss, store_url
from events.content import decode_body

if TYPE_CHECKING:
    from benchmarks.search_children import Built

__all__ = ["TOKENIZER", "byte_figures", "index_figures", "raw_insert"]

TOKENIZER: Final = "unicode61 remove_diacritics 2"
_BATCH: Final = 5_000


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


def index_figures(built: Built, work: Path) -> dict[str, Any]:
    """Our index rebuilt in a child beside a raw FTS5 insert of the same text; ``acp-registry rebuild`` whole."""
    wall, rss, out = run_child_rss([sys.executable, "-c", _REBUILD_INDEX, str(built.store)])
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
    wall, rss, _ = run_child_rss([*cli(), "rebuild", "--store", store_url(built.store)])
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
    db.execute(f"CREATE VIRTUAL TABLE raw USING fts5(body, content='', tokenize='{TOKENIZER}')")
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
