"""Baselines measured in the same run as the event log, so ratios mean something on a noisy machine.

Limits (how close the store is to what the disk and libraries allow): the disk's raw fsync rate, a bare
sqlite3 table of the same msgspec-encoded events, and the cost of encoding one ``session/list`` page alone.
What agents do today: list a directory of one JSONL file per session by reading every file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from benchmarks.figures import Latency, Stopwatch, Throughput, Timer, latency, repeat_rate, throughput
from benchmarks.generate import History, JsonlActivity, JsonlStart, last_activity, rfc3339
from events import Event, SessionCreated, SessionDeleted, SessionInfoChanged

__all__ = [
    "PAGE_SIZE",
    "RawSqliteLog",
    "SessionInfo",
    "disk_fsync",
    "encode_page",
    "extrapolate",
    "fsync_timer",
    "list_jsonl",
    "page_encode_latency",
    "raw_sqlite_baseline",
    "session_info",
    "time_jsonl_listing",
]

PAGE_SIZE = 50


@contextlib.contextmanager
def fsync_timer(folder: Path) -> Iterator[Timer[object]]:
    """Times one raw durable write (100 bytes written and fsynced, as a commit does) per call: the ceiling of
    any durable single-event append. The item passed in is ignored."""
    path = folder / "fsync.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    record = b"x" * 100

    def write(_: object) -> float:
        start = time.perf_counter()
        os.write(fd, record)
        os.fsync(fd)
        return time.perf_counter() - start

    try:
        yield write
    finally:
        os.close(fd)
        path.unlink()


def disk_fsync(folder: Path, count: int = 500) -> Throughput:
    """Raw durable writes per second on the disk holding ``folder``."""
    with fsync_timer(folder) as write:
        return throughput(count, sum(write(None) for _ in range(count)))


# -- a bare sqlite3 table ---------------------------------------------------------------------------------


class RawSqliteLog:
    """The same encoded events in a table with no index but the rowid, no envelope, no checks: the most
    SQLite and msgspec allow. Bulk inserts commit once per call and do not fsync (``synchronous=NORMAL``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS events (position INTEGER PRIMARY KEY, session_id TEXT NOT NULL, data BLOB)"
        )
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(Event)
        self.inserted = Stopwatch()

    def insert(self, histories: Sequence[History]) -> None:
        """Insert many sessions' events in one transaction (encoding included in the timed part)."""
        with self.inserted:
            encode = self._encoder.encode
            rows = [(sid, encode(event)) for sid, events in histories for event in events]
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO events (session_id, data) VALUES (?, ?)", rows)
            self._db.execute("COMMIT")
        self.inserted.count += len(rows)

    @contextlib.contextmanager
    def durable_inserts(self) -> Iterator[Timer[tuple[str, Event]]]:
        """Times one event per transaction with ``synchronous=FULL``: the least a durable append costs here."""
        db = self._db
        encode = self._encoder.encode

        def insert(item: tuple[str, Event]) -> float:
            start = time.perf_counter()
            db.execute("INSERT INTO events (session_id, data) VALUES (?, ?)", (item[0], encode(item[1])))
            return time.perf_counter() - start

        db.execute("PRAGMA synchronous=FULL")
        try:
            yield insert
        finally:
            db.execute("PRAGMA synchronous=NORMAL")

    def scan(self) -> int:
        """Read every event in position order and decode it; returns how many."""
        decode = self._decoder.decode
        count = 0
        for (data,) in self._db.execute("SELECT data FROM events ORDER BY position"):
            decode(data)
            count += 1
        return count

    def close(self) -> None:
        self._db.close()


def raw_sqlite_baseline(folder: Path, histories: Iterable[History], *, chunk: int = 1000) -> dict[str, Throughput]:
    """Insert ``histories`` into a bare table (``chunk`` sessions per transaction), then scan and decode them."""
    log = RawSqliteLog(folder / "raw.db")
    try:
        batch: list[History] = []
        for history in histories:
            batch.append(history)
            if len(batch) == chunk:
                log.insert(batch)
                batch = []
        if batch:
            log.insert(batch)
        return {"insert": log.inserted.rate(), "scan": repeat_rate(log.scan)}
    finally:
        log.close()


# -- one session/list page --------------------------------------------------------------------------------


class SessionInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """ACP's ``SessionInfo`` as ``session/list`` returns it; local to the benchmarks (the registry has its own)."""

    session_id: str = msgspec.field(name="sessionId")
    cwd: str
    title: str | None = None
    updated_at: str | None = msgspec.field(default=None, name="updatedAt")
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _ListAnswer(msgspec.Struct, kw_only=True, omit_defaults=True):
    sessions: list[SessionInfo]
    next_cursor: str | None = msgspec.field(default=None, name="nextCursor")


_answer_encoder = msgspec.json.Encoder()
# A signed cursor is about this long; the answer carries one whenever more pages follow.
_SAMPLE_CURSOR = "v1.MTcwNDA2NzIwMDAwMDAwMDAwMC4zMGNiYzk3ZC0wZmVm.4f1c2a9be07d13aa"


def session_info(session_id: str, events: Sequence[Event]) -> SessionInfo | None:
    """What ``session/list`` shows for one history (None once deleted): a fold, kept tiny on purpose."""
    cwd = ""
    title: str | None = None
    meta: dict[str, Any] | None = None
    for event in events:
        if isinstance(event, SessionCreated):
            cwd, title, meta = event.cwd, event.title, event.meta
        elif isinstance(event, SessionInfoChanged):
            if event.title is not UNSET:
                title = event.title
            if event.meta is not UNSET:
                meta = event.meta
        elif isinstance(event, SessionDeleted):
            return None
    return SessionInfo(
        session_id=session_id, cwd=cwd, title=title, updated_at=rfc3339(last_activity(list(events))), meta=meta
    )


def encode_page(page: list[SessionInfo], next_cursor: str | None = _SAMPLE_CURSOR) -> bytes:
    """The JSON result of one ``session/list`` call."""
    return _answer_encoder.encode(_ListAnswer(sessions=page, next_cursor=next_cursor))


def page_encode_latency(page: list[SessionInfo], calls: int = 5000) -> Latency:
    """Encoding one page alone: the floor under any ``session/list`` answer, however it is found."""
    samples: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        encode_page(page)
        samples.append(time.perf_counter() - start)
    return latency(samples)


# -- what agents do today ---------------------------------------------------------------------------------

_start_decoder = msgspec.json.Decoder(JsonlStart)
_last_decoder = msgspec.json.Decoder(JsonlActivity)
_TAIL = 4096  # more than any last line here; real transcripts hold far longer lines, so this flatters JSONL


def list_jsonl(folder: Path, limit: int = PAGE_SIZE) -> list[SessionInfo]:
    """List sessions the way agents do today: open every file, read its first line (id, cwd) and last line
    (activity, title), sort by modification time, newest first, and keep the first page.

    Decoding uses msgspec with typed lines, the fastest a Python agent could do: a conservative baseline.
    """
    found: list[tuple[int, SessionInfo]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if not entry.name.endswith(".jsonl"):
                continue
            stat = entry.stat()
            with open(entry.path, "rb") as file:
                first = file.readline()
                file.seek(max(0, stat.st_size - _TAIL))
                last = file.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
            start = _start_decoder.decode(first)
            activity = _last_decoder.decode(last)
            info = SessionInfo(
                session_id=start.session_id,
                cwd=start.cwd,
                title=activity.title,
                updated_at=activity.at,
                meta=start.meta,
            )
            found.append((stat.st_mtime_ns, info))
    found.sort(key=lambda item: item[0], reverse=True)
    return [info for _, info in found[:limit]]


def time_jsonl_listing(folder: Path, *, min_runs: int = 3, max_runs: int = 20, min_seconds: float = 2.0) -> Latency:
    """First page from a JSONL directory, JSON answer included, repeated for a median (warm page cache:
    dropping it needs root and would disturb others on a shared machine)."""
    samples: list[float] = []
    while len(samples) < min_runs or (sum(samples) < min_seconds and len(samples) < max_runs):
        start = time.perf_counter()
        encode_page(list_jsonl(folder))
        samples.append(time.perf_counter() - start)
    return latency(samples, note="warm page cache")


def extrapolate(measured: Latency, measured_files: int, files: int) -> Latency:
    """Scale a listing linearly in the number of files (it reads every one, so its cost per file is flat);
    marked as not measured, and as extrapolated when ``files`` lies beyond the measured size."""
    factor = files / measured_files
    return Latency(
        n=0,
        p50_us=measured.p50_us * factor,
        p99_us=measured.p99_us * factor,
        mean_us=measured.mean_us * factor,
        scaled_from=measured_files,
        extrapolated=files > measured_files,
    )
