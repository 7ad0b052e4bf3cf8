"""What usage costs, and how fast its totals are, each beside what it is compared with in the same run:

* ``acp-registry usage --by day`` (and ``--by month``, ``--by model``, ``--json``) as whole processes beside
  ``acp-registry list`` on the same store (``--sessions``, default 1,000,000), taking turns, wall clock (the
  target: ``usage --by day`` <= 200 ms);
* the ``session/list`` page with usage in ``_meta`` beside the same page without it: two twin stores of
  ``--page-sessions`` sessions (the benchmark history with agents; one twin's turns report usage, the other's
  do not), the first page in process as ``registry_bench`` times it (repeated: each version rendered once), the
  page's ``SessionInfo`` built anew from its states and encoded (what a version not seen before costs), and
  ``acp-registry list`` as a whole process (target: within 1.1x);
* a recorded turn (``SessionRegistry.record_turn``, durable) with usage beside one without, on SQLite and, where a
  server answers, PostgreSQL, taking turns in blocks (target: within 1.1x).

The history is ``benchmarks.generate``'s, each session given an agent and each activity a turn's usage (agents'
models, token counts drawn per turn, opencode's costs reported, the others' estimated). Stores are built once in
``--work`` and reused by later runs of the same size.

    python -m benchmarks.usage [--sessions 1000000] [--page-sessions 100000] [--rounds 15] [--work DIR]
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import msgspec

from benchmarks.args import DEFAULT_POSTGRES, bench_parser, postgres_unreachable
from benchmarks.figures import interleave
from benchmarks.generate import HISTORY_SPAN_NS, HISTORY_START_NS, History, iter_histories
from benchmarks.machine import compile_bytecode
from benchmarks.stdio_pages import _Server
from events import Event, SessionCreated, SessionUpdated, SqliteStore
from events.model import Usage
from events.store import NO_STREAM, AppendRequest
from registry import SessionRegistry
from registry.filters import ListFilter
from registry.model import session_info

__all__ = ["AGENTS", "build", "main", "with_agents"]

AGENTS: Final = (
    ("claude-code", ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805")),
    ("codex", ("gpt-5-codex",)),
    ("gemini", ("gemini-2.5-pro", "gemini-2.5-flash")),
    ("opencode", ("anthropic/claude-sonnet-4-5",)),
)
_ROOT: Final = Path(__file__).resolve().parent.parent
_DAYS_AGO: Final = time.strftime("%Y-%m-%d", time.gmtime((HISTORY_START_NS + HISTORY_SPAN_NS) / 1e9 - 90 * 86_400))
"""90 days before the history's end: a narrowed report's --since."""


def with_agents(histories: Iterator[History], seed: int, *, usage: bool) -> Iterator[History]:
    """``histories`` with an agent per session and, with ``usage``, a turn's usage on each activity (the same
    draws either way, so the twins differ by usage alone)."""
    rng = random.Random(seed + 43)
    for session_id, events in histories:
        agent, models = AGENTS[rng.randrange(len(AGENTS))]
        changed: list[Event] = []
        for original in events:
            event = original
            if isinstance(event, SessionCreated):
                event = msgspec.structs.replace(event, agent=agent)
            elif isinstance(event, SessionUpdated):
                drawn = Usage(
                    input_tokens=rng.randrange(200, 40_000),
                    output_tokens=rng.randrange(50, 6_000),
                    cached_read_tokens=rng.randrange(0, 400_000),
                    cached_write_tokens=rng.randrange(0, 20_000),
                    model=models[rng.randrange(len(models))],
                    cost_nanos=rng.randrange(1_000_000, 900_000_000) if agent == "opencode" else None,
                    currency="USD" if agent == "opencode" else None,
                    context_used=rng.randrange(1_000, 200_000),
                    context_size=200_000,
                )
                if usage:
                    event = msgspec.structs.replace(event, usage=drawn)
            changed.append(event)
        yield session_id, changed


def build(path: Path, sessions: int, *, usage: bool, seed: int = 7) -> Path:
    """A store of the benchmark history at ``path`` with its read model built (kept: a later run reuses it)."""
    done = path.with_name(path.name + ".built")
    if done.exists() and path.exists():
        return path
    for stale in (path, done, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    histories = with_agents(iter_histories(sessions, seed), seed, usage=usage)
    with SqliteStore(path, synchronous="off") as store:
        while chunk := list(itertools.islice(histories, 2_000)):
            store.append_batch([AppendRequest(sid, events, NO_STREAM) for sid, events in chunk])
    with SessionRegistry(SqliteStore(path), follow=False, owns_store=True):
        pass  # the read model's tables, built from the log
    done.touch()
    return path


def _process(argv: list[str], cpu: list[float] | None = None) -> Callable[[int], float]:
    """A timer of ``acp-registry ARGV`` as a whole process, output to a pipe: its wall time (and, into ``cpu``, the
    CPU time it used, user and system, which other load on the machine moves far less)."""
    command = str(Path(sys.executable).with_name("acp-registry"))
    env = {**os.environ, "COLUMNS": "120"}

    def run(_: int) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([command, *argv], check=True, stdout=subprocess.DEVNULL, env=env, cwd=_ROOT)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cpu is not None:
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return wall

    return run


def _processes(commands: dict[str, list[str]], rounds: int) -> dict[str, list[float]]:
    """Each command as whole processes taking turns: wall times, and CPU times under ``<name> (CPU)``."""
    cpu: dict[str, list[float]] = {f"{name} (CPU)": [] for name in commands}
    timers = {name: _process(argv, cpu[f"{name} (CPU)"]) for name, argv in commands.items()}
    compile_bytecode()
    _taking_turns(timers, 2)  # the page cache warmed
    for samples in cpu.values():
        samples.clear()
    return _taking_turns(timers, rounds) | cpu


def _taking_turns(timers: dict[str, Callable[[int], float]], rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    for n in range(rounds):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            samples[name].append(timers[name](n))
    return samples


def _row(name: str, samples: list[float], against: list[float] | None) -> str:
    ratio = "" if against is None else f"  {statistics.median(samples) / statistics.median(against):.3f}x"
    return f"  {name:<44} median {statistics.median(samples) * 1e3:8.2f} ms  min {min(samples) * 1e3:8.2f} ms{ratio}"


def cli_figures(path: Path, rounds: int) -> dict[str, list[float]]:
    url = f"sqlite://{path}"
    commands = {
        "acp-registry list": ["--store", url, "list"],
        "acp-registry usage --by day": ["--store", url, "usage", "--by", "day"],
        "acp-registry usage --by month": ["--store", url, "usage", "--by", "month"],
        "acp-registry usage --by model": ["--store", url, "usage", "--by", "model"],
        "acp-registry usage --by cwd --since (90 days)": ["--store", url, "usage", "--by", "cwd", "--since", _DAYS_AGO],
        "acp-registry usage --by day --json": ["--store", url, "usage", "--by", "day", "--json"],
    }
    return _processes(commands, rounds)


def page_figures(with_usage: Path, without: Path, rounds: int) -> dict[str, list[float]]:
    encode = msgspec.json.Encoder().encode
    samples: dict[str, list[float]] = {}
    with (
        SessionRegistry(SqliteStore(with_usage), follow=False, owns_store=True) as ours,
        SessionRegistry(SqliteStore(without), follow=False, owns_store=True) as theirs,
    ):
        registries = {"with usage": ours, "without": theirs}
        pages = {name: registry.list() for name, registry in registries.items()}
        assert all("acp-session-registry/usage" in (s.meta or {}) for s in pages["with usage"].sessions)
        assert not any("acp-session-registry/usage" in (s.meta or {}) for s in pages["without"].sessions)

        def repeated(registry: SessionRegistry) -> Callable[[int], float]:
            def run(_: int) -> float:
                start = time.perf_counter()
                for _ in range(200):
                    encode(registry.list())
                return (time.perf_counter() - start) / 200

            return run

        def anew(registry: SessionRegistry) -> Callable[[int], float]:
            states = registry.read_model.first_page(where=ListFilter(), limit=registry.page_size)[1].states

            def run(_: int) -> float:
                start = time.perf_counter()
                for _ in range(200):
                    encode([session_info(state) for state in states])
                return (time.perf_counter() - start) / 200

            return run

        timers: dict[str, Callable[[int], float]] = {}
        for name, registry in registries.items():
            timers[f"page in process, {name}"] = repeated(registry)
            timers[f"page's SessionInfo built anew, {name}"] = anew(registry)
        samples.update(_taking_turns(timers, rounds * 4))
    servers = {"with usage": _Server(_serve(with_usage)), "without": _Server(_serve(without))}
    try:
        stdio = {f"page over serve's stdio, {name}": server.timer(b"{}") for name, server in servers.items()}
        interleave(stdio, range(100))
        samples |= interleave(stdio, range(rounds * 40))
    finally:
        for server in servers.values():
            server.close()
    cli = {
        "acp-registry list, with usage": ["--store", f"sqlite://{with_usage}", "list"],
        "acp-registry list, without": ["--store", f"sqlite://{without}", "list"],
    }
    return samples | _processes(cli, rounds)


def _serve(path: Path) -> list[str]:
    return [str(Path(sys.executable).with_name("acp-registry")), "--store", f"sqlite://{path}", "serve"]


def turn_figures(url: str, rounds: int, label: str) -> dict[str, list[float]]:
    """``record_turn`` with usage and without, in blocks of 200 turns taking turns: wall time a turn, and (``(CPU)``)
    this process's CPU time a turn (a durable commit's wait for the disk left out)."""
    usage = Usage(input_tokens=1_200, output_tokens=300, cached_read_tokens=40_000, model="claude-sonnet-4-5")
    cpu: dict[str, list[float]] = {}
    with SessionRegistry.open(url, follow=False) as registry:
        for n in range(200):
            registry.create("/work/bench", session_id=f"t{n}", agent="claude-code")
        counts = dict.fromkeys(range(200), 0)

        def turns(name: str, reported: Usage | None) -> Callable[[int], float]:
            spent = cpu.setdefault(f"{name} (CPU)", [])

            def run(_: int) -> float:
                start, used = time.perf_counter(), time.process_time()
                for n in range(200):
                    registry.record_turn(f"t{n}", messages=2, usage=reported)
                    counts[n] += 2
                spent.append((time.process_time() - used) / 200)
                return (time.perf_counter() - start) / 200

            return run

        with_usage, without = f"{label}: a turn with usage", f"{label}: a turn without"
        timers = {with_usage: turns(with_usage, usage), without: turns(without, None)}
        _taking_turns(timers, 2)
        for samples in cpu.values():
            samples.clear()
        return _taking_turns(timers, rounds) | cpu


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--page-sessions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--work", type=Path, help="where the stores are kept (default: a temporary folder)")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="a PostgreSQL server for the turns' figure")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="usage-bench-")))
        work.mkdir(parents=True, exist_ok=True)
        figures: dict[str, list[float]] = {}
        big = build(work / f"usage-{args.sessions}.db", args.sessions, usage=True)
        figures |= cli_figures(big, args.rounds)
        ours = build(work / f"usage-{args.page_sessions}.db", args.page_sessions, usage=True)
        theirs = build(work / f"plain-{args.page_sessions}.db", args.page_sessions, usage=False)
        figures |= page_figures(ours, theirs, args.rounds)
        turns = work / "turns.db"  # a new one each run
        for stale in (turns, *(turns.with_name(f"turns.db{end}") for end in ("-wal", "-shm", ".seal-key"))):
            stale.unlink(missing_ok=True)
        figures |= turn_figures(f"sqlite://{turns}", args.rounds, "SQLite")
        why = postgres_unreachable(args.postgres)
        if why is None:
            import uuid  # noqa: PLC0415

            schema = f"usage_bench_{uuid.uuid4().hex[:8]}"
            try:
                figures |= turn_figures(f"{args.postgres}?schema={schema}", args.rounds, "PostgreSQL")
            finally:
                import psycopg  # noqa: PLC0415

                with psycopg.connect(args.postgres, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        else:
            print(f"PostgreSQL turns skipped: {why}")
    against = {
        "acp-registry usage --by day --json (CPU)": "acp-registry list (CPU)",
        "acp-registry usage --by day (CPU)": "acp-registry list (CPU)",
        "acp-registry usage --by month (CPU)": "acp-registry list (CPU)",
        "acp-registry usage --by model (CPU)": "acp-registry list (CPU)",
        "acp-registry usage --by cwd --since (90 days) (CPU)": "acp-registry list (CPU)",
        "acp-registry usage": "acp-registry list",
        "page in process, with usage": "page in process, without",
        "page over serve's stdio, with usage": "page over serve's stdio, without",
        "acp-registry list, with usage (CPU)": "acp-registry list, without (CPU)",
        "page's SessionInfo built anew, with usage": "page's SessionInfo built anew, without",
        "acp-registry list, with usage": "acp-registry list, without",
        "SQLite: a turn with usage (CPU)": "SQLite: a turn without (CPU)",
        "SQLite: a turn with usage": "SQLite: a turn without",
        "PostgreSQL: a turn with usage (CPU)": "PostgreSQL: a turn without (CPU)",
        "PostgreSQL: a turn with usage": "PostgreSQL: a turn without",
    }
    print(f"{args.sessions:,} sessions for the totals, {args.page_sessions:,} for the pages; {args.rounds} rounds")
    for name, samples in figures.items():
        base = next((figures.get(b) for a, b in against.items() if name.startswith(a)), None)
        print(_row(name, samples, None if base is samples else base))
    if args.json:
        args.json.write_bytes(msgspec.json.encode(figures))


if __name__ == "__main__":
    main()
