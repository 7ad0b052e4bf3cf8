"""A deterministic, seeded history of agent sessions: the same input for every system a benchmark compares.

``iter_histories(sessions, seed)`` yields ``(session_id, [events])`` one session at a time, so memory stays flat
at any size. Sessions are spread over ~2 years and 50 working directories; each has ~5 events: created, 2-6
activities, usually a title, sometimes a retitle, a title clear, new ``_meta``, and ~5% end deleted; every tenth
session is archived at its end (decided by its index, not drawn: the other draws stay those of earlier runs).
``write_jsonl`` writes the same history the way agents keep it today: one JSONL file per session.

    python -m benchmarks.generate --sessions 100000 [--jsonl DIR] [--seed 7]
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from benchmarks.args import bench_parser
from events import (
    Event,
    SessionArchived,
    SessionCreated,
    SessionDeleted,
    SessionInfoChanged,
    SessionUpdated,
    TitleSource,
)

__all__ = [
    "CWD_COUNT",
    "DEFAULT_SEED",
    "History",
    "JsonlActivity",
    "JsonlStart",
    "iter_histories",
    "last_activity",
    "rfc3339",
    "working_directories",
    "write_jsonl",
]

DEFAULT_SEED = 7
CWD_COUNT = 50
HISTORY_START_NS = 1_704_067_200_000_000_000  # 2024-01-01T00:00:00Z
HISTORY_SPAN_NS = 2 * 365 * 86_400 * 1_000_000_000

History = tuple[str, list[Event]]
"""One session: its id and its events in order (an append batch)."""

_WORDS = [
    "add",
    "api",
    "async",
    "auth",
    "bug",
    "build",
    "cache",
    "cli",
    "config",
    "crash",
    "cursor",
    "db",
    "debug",
    "deploy",
    "docs",
    "error",
    "event",
    "fix",
    "flaky",
    "handler",
    "index",
    "lint",
    "list",
    "log",
    "login",
    "memory",
    "migrate",
    "mock",
    "model",
    "page",
    "parser",
    "perf",
    "port",
    "query",
    "race",
    "refactor",
    "release",
    "retry",
    "route",
    "schema",
    "server",
    "session",
    "sort",
    "sqlite",
    "stream",
    "sync",
    "test",
    "timeout",
    "token",
    "type",
    "update",
    "upgrade",
    "validate",
    "worker",
    "wrong",
    "zed",
    "agent",
    "editor",
    "title",
    "delete",
    "notify",
    "replay",
    "snapshot",
    "import",
    "export",
    "rename",
    "split",
    "merge",
    "branch",
    "review",
    "diff",
    "patch",
    "panic",
    "leak",
    "slow",
    "fast",
    "retry",
    "window",
    "layout",
    "theme",
    "keymap",
    "plugin",
    "terminal",
]
_PROJECTS = [
    "api",
    "gateway",
    "web",
    "app",
    "cli",
    "tools",
    "infra",
    "docs",
    "site",
    "mobile",
    "sdk",
    "core",
    "engine",
    "billing",
    "search",
    "auth",
    "admin",
    "shop",
    "pipeline",
    "notebook",
    "game",
    "compiler",
    "editor",
    "registry",
]
_MODELS = ("claude-sonnet-4", "gpt-5", "gemini-2.5-pro", "qwen3-coder", "local-llama")
_ACTIVITY_COUNTS = (2, 3, 4, 5, 6)
_ACTIVITY_WEIGHTS = (0.50, 0.30, 0.11, 0.06, 0.03)  # mean ~2.8 activities: ~5 events per session
_TITLE_SOURCES = (TitleSource.AGENT, TitleSource.PROMPT, TitleSource.USER)
_TITLE_SOURCE_WEIGHTS = (0.7, 0.2, 0.1)
_MINUTE_NS = 60 * 1_000_000_000
_DAY_NS = 1440 * _MINUTE_NS


def working_directories(seed: int = DEFAULT_SEED) -> list[str]:
    """The 50 ``cwd`` values a history with this seed uses (they are its generator's first draws)."""
    return _cwds(random.Random(seed))


def _cwds(rng: random.Random) -> list[str]:
    """50 distinct project folders, some nested under an organisation as real checkouts are."""
    cwds: list[str] = []
    while len(cwds) < CWD_COUNT:
        name = f"{rng.choice(_PROJECTS)}-{rng.choice(_WORDS)}"
        cwd = f"/home/dev/src/{name}" if rng.random() < 0.6 else f"/home/dev/work/{rng.choice(_PROJECTS)}/{name}"
        if cwd not in cwds:
            cwds.append(cwd)
    return cwds


def _title(rng: random.Random) -> str:
    """20-80 characters of plausible words; the target length is drawn first so lengths spread evenly."""
    length = rng.randint(21, 80)
    words: list[str] = []
    size = -1
    while size < length:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    text = " ".join(words)[:length].rstrip()  # cutting mid-word may leave one space: length stays >= 20
    return text[0].upper() + text[1:]


def _meta(rng: random.Random) -> dict[str, Any]:
    return {"model": rng.choice(_MODELS), "branch": f"feature/{rng.choice(_WORDS)}-{rng.randint(1, 999)}"}


def iter_histories(sessions: int, seed: int = DEFAULT_SEED) -> Iterator[History]:
    """``sessions`` session histories, deterministic for a given ``(sessions, seed)``.

    Creation times increase across the ~2 years (session ``i`` starts in the ``i``-th slot of the span);
    activity follows minutes apart, and ~10% of sessions are resumed days later, so the order by last
    activity differs from the order of creation, as it does in real histories.
    """
    if sessions < 0:
        raise ValueError(f"sessions must be >= 0, got {sessions}")
    rng = random.Random(seed)
    cwds = _cwds(rng)
    slot = HISTORY_SPAN_NS // max(sessions, 1)
    for i in range(sessions):
        # Real agents name sessions with random UUIDv4s; drawn from the seeded generator to stay repeatable.
        session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        at = HISTORY_START_NS + i * slot + int(rng.random() * slot)
        created = SessionCreated(
            cwd=cwds[int(rng.random() * CWD_COUNT)], at=at, meta=_meta(rng) if rng.random() < 0.1 else None
        )
        activities = rng.choices(_ACTIVITY_COUNTS, _ACTIVITY_WEIGHTS)[0]
        # Info changes land between activities, never after the last one: an agent's file ends on activity.
        infos: list[tuple[int, SessionInfoChanged]] = []
        titled = rng.random() < 0.9
        if titled:
            source = rng.choices(_TITLE_SOURCES, _TITLE_SOURCE_WEIGHTS)[0]
            infos.append((1, SessionInfoChanged(title=_title(rng), title_source=source)))
            if rng.random() < 0.15:
                infos.append((activities - 1, SessionInfoChanged(title=_title(rng), title_source=TitleSource.AGENT)))
            if rng.random() < 0.05:
                infos.append((activities - 1, SessionInfoChanged(title=None)))
        if rng.random() < 0.1:
            infos.append((rng.randint(1, activities - 1), SessionInfoChanged(meta=_meta(rng))))
        infos.sort(key=lambda item: item[0])
        events: list[Event] = [created]
        pending = 0
        resumed = rng.randint(2, activities) if rng.random() < 0.1 else 0
        for n in range(1, activities + 1):
            gap = rng.expovariate(1 / (7 * _DAY_NS)) if n == resumed else rng.expovariate(1 / (4 * _MINUTE_NS))
            at += int(gap) + 1  # + 1: strictly increasing even when the draw rounds to zero
            events.append(SessionUpdated(at=at, messages=rng.randint(1, 12)))
            while pending < len(infos) and infos[pending][0] == n:
                events.append(infos[pending][1])
                pending += 1
        if i % 10 == 9:
            events.append(SessionArchived())
        if rng.random() < 0.05:
            events.append(SessionDeleted(reason="deleted by the user" if rng.random() < 0.5 else None))
        yield session_id, events


def last_activity(events: list[Event]) -> int:
    """When a session was last active (epoch ns): the ``updatedAt`` a listing orders by."""
    for event in reversed(events):
        if isinstance(event, SessionUpdated):
            return event.at
        if isinstance(event, SessionCreated):
            return event.at
    raise ValueError("a history starts with SessionCreated")


def rfc3339(ns: int) -> str:
    """Epoch nanoseconds as RFC 3339 UTC with milliseconds, the form ACP's ``updatedAt`` takes."""
    moment = dt.datetime.fromtimestamp(ns // 1_000_000 / 1000, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- what agents write today ----------------------------------------------------------------------------


class JsonlStart(msgspec.Struct, kw_only=True, tag="session", omit_defaults=True):
    """First line of a session file: who, where and when it began."""

    session_id: str = msgspec.field(name="sessionId")
    cwd: str
    created_at: str = msgspec.field(name="createdAt")
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class JsonlActivity(msgspec.Struct, kw_only=True, tag="activity"):
    """An activity line. It repeats the current title so that a lister needs only the first and last
    lines of a file: the cheapest listing an agent can do without an index."""

    at: str
    messages: int
    title: str | None


class _JsonlTitle(msgspec.Struct, kw_only=True, tag="title"):
    title: str | None
    source: str | None


class _JsonlMeta(msgspec.Struct, kw_only=True, tag="meta"):
    meta: dict[str, Any] | None = msgspec.field(name="_meta")


_line_encoder = msgspec.json.Encoder()


def _jsonl_lines(session_id: str, events: list[Event]) -> list[bytes]:
    lines: list[bytes] = []
    title: str | None = None
    for event in events:
        line: msgspec.Struct
        if isinstance(event, SessionCreated):
            line = JsonlStart(session_id=session_id, cwd=event.cwd, created_at=rfc3339(event.at), meta=event.meta)
        elif isinstance(event, SessionUpdated):
            line = JsonlActivity(at=rfc3339(event.at), messages=event.messages, title=title)
        elif isinstance(event, SessionInfoChanged):
            if event.title is not UNSET:
                title = event.title
                source = None if event.title_source is UNSET else event.title_source.value
                line = _JsonlTitle(title=title, source=source)
            elif event.meta is not UNSET:
                line = _JsonlMeta(meta=event.meta)
            else:
                continue
        else:
            continue
        lines.append(_line_encoder.encode(line))
    return lines


def write_jsonl(folder: Path, histories: Iterator[History], files: int) -> int:
    """Write session files into ``folder`` until it holds ``files`` of them; returns how many were written.

    Deleted sessions get no file (agents delete it). Each file's modification time is the session's last
    activity, as if the agent had appended that line then: listings sort by it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    while written < files:  # test before pulling: a shared iterator must not lose the next session
        history = next(histories, None)
        if history is None:
            break
        session_id, events = history
        if isinstance(events[-1], SessionDeleted):
            continue
        path = folder / f"{session_id}.jsonl"
        path.write_bytes(b"\n".join(_jsonl_lines(session_id, events)) + b"\n")
        mtime = last_activity(events)
        os.utime(path, ns=(mtime, mtime))
        written += 1
    return written


def main() -> None:
    parser = bench_parser(__doc__, json=False)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--jsonl", type=Path, help="also write one JSONL file per live session here")
    args = parser.parse_args()
    start = time.perf_counter()
    events = deleted = 0
    for _, history in iter_histories(args.sessions, args.seed):
        events += len(history)
        deleted += isinstance(history[-1], SessionDeleted)
    took = time.perf_counter() - start
    print(
        f"{args.sessions:,} sessions, {events:,} events ({events / max(args.sessions, 1):.2f} per session), "
        f"{deleted:,} deleted; generated in {took:.1f} s ({events / took:,.0f} events/s)"
    )
    if args.jsonl:
        start = time.perf_counter()
        written = write_jsonl(args.jsonl, iter_histories(args.sessions, args.seed), args.sessions)
        print(f"{written:,} JSONL files in {args.jsonl} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
