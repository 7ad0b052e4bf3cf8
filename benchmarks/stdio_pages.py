"""``session/list`` from a warm ``acp-registry serve`` over its pipes, beside a plain Python stdio server that runs
the raw keyset query of the same rows - what a page costs a client, process hop and JSON-RPC framing included,
against the least a server that answers from those tables could do.

The raw server reads one JSON-RPC request a line and answers it from the read model's own table (``rm_sessions``)
with one keyset query - the registry's default list (live, not archived), the same 51 rows, their state blobs read
but not decoded - as ``{"sessions": [{"sessionId", "cwd"}...]}`` encoded by msgspec; a deep page is keyed by the
(rank, session id) the registry's cursor carries. Both servers run at once and take turns request by request
(``benchmarks.figures.interleave``), after a warm-up of each, so the machine's other load falls on both alike.
SQLite opens the store's file read-only; PostgreSQL connects with autocommit and statements prepared once.
"""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from benchmarks.figures import Figure, interleave, latency

if TYPE_CHECKING:
    from registry import SessionRegistry

__all__ = ["RAW_SERVER", "cases", "side_by_side", "walk"]

_ROOT = Path(__file__).resolve().parent.parent
_INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'

RAW_SERVER = r"""
import sys
import msgspec

where, store, page = sys.argv[1], sys.argv[2], 50
if store == "sqlite":
    import sqlite3
    db = sqlite3.connect(f"file:{where}?mode=ro", uri=True)
    table, mark, no = "rm_sessions", "?", "0"
else:
    import psycopg
    db = psycopg.connect(where, autocommit=True, prepare_threshold=0)
    table, mark, no = f'"{sys.argv[3]}".rm_sessions', "%s", "false"
first = (
    f"SELECT rank, session_id, cwd, state FROM {table} WHERE live AND archived = {no}"
    f" ORDER BY rank, session_id LIMIT {page + 1}"
)
after = (
    f"SELECT rank, session_id, cwd, state FROM {table} WHERE live AND archived = {no}"
    f" AND (rank, session_id) > ({mark}, {mark}) ORDER BY rank, session_id LIMIT {page + 1}"
)
decode, encode = msgspec.json.Decoder().decode, msgspec.json.Encoder().encode
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    request = decode(line)
    key = (request.get("params") or {}).get("after")
    rows = db.execute(first).fetchall() if key is None else db.execute(after, tuple(key)).fetchall()
    result = {"sessions": [{"sessionId": sid, "cwd": cwd} for _rank, sid, cwd, _state in rows[:page]]}
    if len(rows) > page:
        result["nextCursor"] = f"{rows[page - 1][0]}:{rows[page - 1][1]}"
    out.write(encode({"jsonrpc": "2.0", "id": request.get("id"), "result": result}) + b"\n")
    out.flush()
"""
"""The raw server: ``python -c RAW_SERVER PATH sqlite`` or ``python -c RAW_SERVER CONNINFO postgresql SCHEMA``."""


class _Server:
    """A server process on pipes, asked one request at a time."""

    def __init__(self, command: list[str]) -> None:
        self.child = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=_ROOT
        )
        self.next_id = 10
        self.ask(_INITIALIZE)

    def ask(self, request: bytes) -> bytes:
        """Send one request line, return its answer line."""
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write(request)
        self.child.stdin.flush()
        select.select([self.child.stdout], [], [])
        answer = self.child.stdout.readline()
        if not answer:
            raise RuntimeError(f"{self.child.args!r} ended before answering")
        return answer

    def timer(self, params: bytes) -> Callable[[object], float]:
        """A timer of one ``session/list`` with ``params`` (a JSON object), answer read whole."""
        import time  # noqa: PLC0415

        def run(_item: object) -> float:
            self.next_id += 1
            request = b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":%s}\n' % (self.next_id, params)
            start = time.perf_counter()
            answer = self.ask(request)
            seconds = time.perf_counter() - start
            if b'"sessions"' not in answer:
                raise RuntimeError(f"not a page: {answer[:200]!r}")
            return seconds

        return run

    def close(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait(60)


def side_by_side(
    serve: list[str], raw: list[str], cases: dict[str, tuple[str, bytes, bytes]], requests: int = 500
) -> dict[str, Figure]:
    """For each case (its serve figure's key: the raw figure's key, the serve's params, the raw's params), the
    two servers' round trips taking turns, ``requests`` each after 100 to warm up."""
    ours, theirs = _Server(serve), _Server([sys.executable, "-c", RAW_SERVER, *raw])
    figures: dict[str, Figure] = {}
    try:
        for key, (raw_key, ours_params, raw_params) in cases.items():
            timers = {key: ours.timer(ours_params), raw_key: theirs.timer(raw_params)}
            interleave(timers, range(100))
            samples = interleave(timers, range(requests))
            for name, measured in samples.items():
                figures[name] = latency(measured, note=f"{requests} requests after 100 to warm up, taking turns")
    finally:
        ours.close()
        theirs.close()
    return figures


def walk(registry: SessionRegistry, cwd: str | None, depth: float) -> tuple[str | None, tuple[int, str] | None]:
    """Page by page, as a client would, ``depth`` of the way through the default list (of ``cwd``): the cursor to
    the next page there, and the sort key (rank, session id) of the last session before it (None, None: the list
    is one page)."""
    from registry.model import sort_key  # noqa: PLC0415

    live = registry.read_model.count() if cwd is None else registry.read_model.cwd_counts().get(cwd, 0)
    cursor: str | None = None
    last: str | None = None
    for _ in range(max(1, int(live * depth) // registry.page_size)):
        page = registry.list(cwd=cwd, cursor=cursor)
        if not isinstance(page.next_cursor, str):
            break
        cursor, last = page.next_cursor, page.sessions[-1].session_id
    state = None if last is None else registry.state(last)
    return cursor, None if state is None else sort_key(state)


def cases(
    registry: SessionRegistry, ours: dict[str, str], raw: dict[str, str], depth: float = 0.8
) -> dict[str, tuple[str, bytes, bytes]]:
    """``side_by_side``'s cases for the first page and one ``depth`` of the way through the default list (the
    deep one left out when the list is one page), keyed as ``ours`` and ``raw`` name them by page."""
    encode = msgspec.json.encode
    cursor, after = walk(registry, None, depth)
    found = {"first": (raw["first"], b"{}", b"{}")}
    if cursor is not None and after is not None:
        found["deep"] = (raw["deep"], encode({"cursor": cursor}), encode({"after": list(after)}))
    return {ours[page]: case for page, case in found.items()}
