"""The speed figures CI holds, each a ratio against a reference measured in the same run, on the CPU clock.

A machine's speed changes from run to run (a shared CI host, a laptop on battery), so no figure here is a time:
each is what the registry costs divided by what a fixed reference costs in the same process run, the two measured
in turn, several times, the least of each kept (the run the rest of the machine disturbed least).

* ``stream_1`` / ``stream_10``: the change stream's CPU per change (the follower's fold, the diff, the hand-off
  to each subscriber's thread; ``benchmarks/change_stream.py``'s diffs/s) with 1 and 10 subscribers, divided by
  the CPU of one round of a fixed pure-Python loop (``reference_loop``).
* ``list``: ``acp-registry list`` (the table, piped) as a whole process, divided by ``python -c pass``.
* ``show``: ``acp-registry show SESSION`` as a whole process, divided by ``show --json SESSION`` on the same
  store of ``SHOW_SESSIONS`` sessions (a session with three forks: ``show`` lists them, ``--json`` does not).
* ``search``: ``SessionRegistry.search``'s first page of 20 hits in process, divided by the raw FTS5 query of the
  same words on the same index tables (``benchmarks.search.raw_search``), summed over ``SEARCH_QUERIES``, on a store
  of ``SEARCH_SESSIONS`` sessions of ``benchmarks.corpus``'s conversations.

Child processes run with their bytecode cached (``PYTHONPYCACHEPREFIX`` in a scratch folder, warmed first), as an
installed wheel has it: ``PYTHONDONTWRITEBYTECODE`` would recompile every module in every process.

    python -m benchmarks.guard [--rounds 15] [--json out.json]

prints the ratios; ``benchmarks/test_guard.py`` holds them to the bounds CI checks (``make guard``).
``ACP_REGISTRY_GUARD_SLOWDOWN=stream,list,show,search`` doubles the CPU the named figures measure (their own work spends
as much again), to see the bounds catch a 2x regression; ``stream:1.5,show:1.5`` multiplies them by 1.5.

Steadiness: each figure is the least of many short rounds (the stream's 25, each process's 15), on the CPU clock (what
the process itself spent: another process's load moves it far less than the wall clock, and the least of many
is the round it moved least), so that a bound can sit above the noise and below 1.5x the lowest figure.
"""

from __future__ import annotations

import functools
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from benchmarks.args import bench_parser
from benchmarks.figures import interleave
from benchmarks.store_throughput import print_results

__all__ = [
    "SEARCH_QUERIES",
    "SEARCH_SESSIONS",
    "SHOW_SESSIONS",
    "SLOWDOWN",
    "cli_ratios",
    "make_store",
    "measure",
    "reference_loop",
    "search_ratio",
    "stream_ratio",
]

SHOW_SESSIONS: Final = 40_000
"""Sessions in the store ``list`` and ``show`` run on: enough for ``show``'s way of finding forks to show in its
figure (today it decodes every session's state: ~1.6 ms a thousand sessions), few enough to write in seconds."""

SEARCH_SESSIONS: Final = 2_000
"""Sessions of the store ``search`` runs on (about 40k messages: one index table; written and indexed in seconds)."""
SEARCH_QUERIES: Final = ("error", "migrat*", "Handler", "config timeout", '"most recent call"')
"""What ``search`` searches for: words found in hundreds of messages, a prefix, a CamelCase part, two words, a
phrase (a page then has its 20 sessions to fetch and show)."""

SLOWDOWN: Final = "ACP_REGISTRY_GUARD_SLOWDOWN"
"""Figures named here (comma-separated: stream, list, show, search; ``NAME:FACTOR`` for another factor than 2) spend
their measured CPU that many times: a regression of that factor."""


def _slowdowns(text: str) -> dict[str, float]:
    """``stream,show:1.5`` -> {"stream": 2.0, "show": 1.5}."""
    named = (part.partition(":") for part in text.split(",") if part)
    return {name: float(factor) if factor else 2.0 for name, _, factor in named}


_SLOWED: Final = _slowdowns(os.environ.get(SLOWDOWN, ""))

_REFERENCE_ROUNDS: Final = 20_000
_ROOT: Final = Path(__file__).resolve().parents[1]  # a slowed child imports benchmarks.guard from the checkout


def reference_loop(rounds: int = _REFERENCE_ROUNDS) -> int:
    """A fixed pure-Python workload of the kinds the stream does (calls, attribute and dict look-ups, small tuples
    and strings made and dropped): how fast this interpreter runs Python on this machine now."""
    table: dict[tuple[int, str], int] = {}
    total = 0
    for n in range(rounds):
        key = (n & 1023, "key")
        table[key] = table.get(key, 0) + len(str(n))
        total += _step(n)
    return total + len(table)


def _step(n: int) -> int:
    return n % 7


def _spend(seconds: float) -> None:
    """Spend ``seconds`` of this process's CPU (the injected slowdown)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        reference_loop(100)


# -- the change stream --------------------------------------------------------------------------------------


class _Counter:
    """A subscriber that counts what it receives and says when it has had ``target`` items."""

    def __init__(self) -> None:
        self.count = 0
        self.target = 0
        self.done = threading.Event()

    def expect(self, more: int) -> None:
        self.done.clear()
        self.target = self.count + more

    def __call__(self, _item: object) -> None:
        self.count += 1
        if self.count >= self.target:
            self.done.set()


class _Stream:
    """A registry on a memory store with ``subscribers`` subscribers of ``list_changes`` (each on its own thread,
    as by default), fed ``changes`` turns a round: ``benchmarks.change_stream.sync_seconds``'s path."""

    def __init__(self, subscribers: int, changes: int, sessions: int = 1000, slowdown: float | None = None) -> None:
        from events import ANY, AppendRequest, MemoryStore, SessionCreated, SessionUpdated  # noqa: PLC0415
        from registry import SessionRegistry  # noqa: PLC0415

        self.store = MemoryStore()
        self.registry = SessionRegistry(self.store, follow=False)
        self.store.append_batch(
            [AppendRequest(f"s{n}", [SessionCreated(cwd=f"/work/p{n % 50}", at=n)], ANY) for n in range(sessions)]
        )
        self.registry.sync()
        self.counters = [_Counter() for _ in range(subscribers)]
        for counter in self.counters:
            self.registry.list_changes().subscribe(counter)
        self.changes = changes
        self.slowdown = slowdown
        self.turns = [
            AppendRequest(f"s{n % sessions}", [SessionUpdated(at=10_000 + n, messages=1)], ANY) for n in range(changes)
        ]

    def cpu_per_change(self, _round: int = 0) -> float:
        """CPU seconds per change from the follower's fold of a round's logged turns until every subscriber has
        received every item (the log written and the read model caught up beforehand, off the clock)."""
        self.store.append_batch(self.turns)
        self.registry.read_model.catch_up()
        for counter in self.counters:
            counter.expect(self.changes)
        start = time.process_time()
        self.registry.sync()
        for counter in self.counters:
            if not counter.done.wait(300):
                raise RuntimeError("the change stream did not deliver every change within 300 s")
        spent = time.process_time() - start
        if self.slowdown is not None:
            extra = spent * (self.slowdown - 1)
            _spend(extra)
            spent += extra
        return spent / self.changes

    def close(self) -> None:
        self.registry.close()


def stream_ratio(subscribers: int, changes: int, rounds: int, slowdown: float | None = None) -> float:
    """The stream's least CPU per change ÷ the reference loop's least CPU per round, the two taken in turn, with
    every thread of the stream on one core: a subscriber's thread woken on the other core cost a process more CPU
    by chance (stream_1 8.0-10.5 in six processes in a row, idle; on one core 5.8-6.7)."""

    def reference(_round: int) -> float:
        start = time.process_time()
        reference_loop()
        return time.process_time() - start

    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})  # this thread, and the threads it starts from now on
    try:
        stream = _Stream(subscribers, changes, slowdown=slowdown)
        try:
            samples = interleave({"reference": reference, "stream": stream.cpu_per_change}, range(rounds))
        finally:
            stream.close()
    finally:
        os.sched_setaffinity(0, allowed)
    return min(samples["stream"]) / (min(samples["reference"]) / _REFERENCE_ROUNDS)


# -- whole processes --------------------------------------------------------------------------------------------

_MAIN = "import sys; from registry.cli import main; code = main(); {slow}sys.exit(code)"  # as the script calls it
_SLOW = "import time; from benchmarks.guard import _spend; _spend(time.process_time() * {extra}); "


def _command(args: Sequence[str], factor: float | None) -> list[str]:
    """The process running ``acp-registry ARGS``; with ``factor``, it spends that many times its CPU."""
    slow = "" if factor is None else _SLOW.format(extra=factor - 1)
    return [sys.executable, "-c", _MAIN.format(slow=slow), *args]


def _child_cpu(argv: Sequence[str], env: Mapping[str, str]) -> float:
    """User plus system CPU seconds of one child process (its output read and dropped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        argv, env=env, cwd=_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _timed_child(argv: Sequence[str], env: Mapping[str, str], _round: int) -> float:
    return _child_cpu(argv, env)


def make_store(folder: Path, sessions: int = SHOW_SESSIONS) -> tuple[str, str]:
    """A SQLite store of ``sessions`` one-event sessions, one of which has three forks; its URL and that session."""
    from events import NO_STREAM, AppendRequest, SessionCreated  # noqa: PLC0415
    from events.factory import open_store  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415

    path = folder / f"guard-{sessions}.db"
    store = open_store(f"sqlite://{path}?synchronous=off")
    at = 1_790_000_000_000_000_000
    try:
        for begin in range(0, sessions, 5000):
            store.append_batch(
                [
                    AppendRequest(
                        f"s{n:06d}",
                        [SessionCreated(cwd=f"/work/p{n % 50}", at=at + n * 10**9, title=f"the work on item {n}")],
                        NO_STREAM,
                    )
                    for n in range(begin, min(sessions, begin + 5000))
                ]
            )
    finally:
        store.close()
    url = f"sqlite://{path}"
    with SessionRegistry.open(url, follow=False) as registry:  # its read model built, as a used store has it
        for n in range(3):
            registry.fork("s000000", "/work/forks", session_id=f"fork-{n}")
    return url, "s000000"


def cli_ratios(
    url: str, session: str, rounds: int, scratch: Path, slowdowns: Mapping[str, float] = _SLOWED
) -> dict[str, float]:
    """``list`` ÷ ``python -c pass`` and ``show`` ÷ ``show --json``, whole processes taken in turn."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(scratch / "bytecode"), COLUMNS="120")
    commands = {
        "pass": [sys.executable, "-c", "pass"],
        "list": _command(["--store", url, "list"], slowdowns.get("list")),
        "show": _command(["--store", url, "show", session], slowdowns.get("show")),
        "show --json": _command(["--store", url, "show", "--json", session], None),
    }
    for argv in commands.values():  # compiles and caches the bytecode, warms the file's pages
        _child_cpu(argv, env)
    timers = {name: functools.partial(_timed_child, argv, env) for name, argv in commands.items()}
    least = {name: min(samples) for name, samples in interleave(timers, range(rounds)).items()}
    return {"list": least["list"] / least["pass"], "show": least["show"] / least["show --json"]}


# -- search -----------------------------------------------------------------------------------------------------


def search_ratio(folder: Path, rounds: int, slowdown: float | None = None) -> float:
    """The search's least CPU for a page of each query ÷ the raw FTS5 query's least, summed over the queries, the
    two taken in turn in this process; ``slowdown`` makes the search's own work spend that many times its CPU."""
    import sqlite3  # noqa: PLC0415

    from benchmarks.search import build, raw_search  # noqa: PLC0415
    from events import SqliteStore  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415
    from registry.search.query import parse  # noqa: PLC0415

    path = folder / "guard-search.db"
    build(path, SEARCH_SESSIONS, seed=41)
    db = sqlite3.connect(path)
    ours = raw = 0.0
    with SessionRegistry(SqliteStore(str(path)), follow=False) as registry:
        registry.search(SEARCH_QUERIES[0])  # the index made
        tables = [
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE name GLOB 'search_[0-9]*'")
            if name.removeprefix("search_").isdigit()
        ]
        for text in SEARCH_QUERIES:
            expression = parse(text).fts5()

            def page(_round: int, text: str = text) -> float:
                start = time.process_time()
                for _ in range(10):
                    registry.search(text, limit=20)
                spent = time.process_time() - start
                if slowdown is not None:
                    _spend(spent * (slowdown - 1))
                    spent *= slowdown
                return spent

            def fts(_round: int, expression: str = expression) -> float:
                start = time.process_time()
                for _ in range(10):
                    raw_search(db, tables, expression)
                return time.process_time() - start

            samples = interleave({"ours": page, "raw": fts}, range(rounds))
            ours += min(samples["ours"])
            raw += min(samples["raw"])
    db.close()
    return ours / raw


def measure(
    rounds: int = 15, folder: Path | None = None, slowdowns: Mapping[str, float] = _SLOWED, stream_rounds: int = 25
) -> dict[str, float]:
    """Every figure of the module docstring; ``slowdowns`` (default: ``$ACP_REGISTRY_GUARD_SLOWDOWN``) makes the
    named ones (stream, list, show, search) spend that many times their CPU."""
    stream = slowdowns.get("stream")
    figures = {
        "stream_1": stream_ratio(1, 2_000, rounds=stream_rounds, slowdown=stream),
        "stream_10": stream_ratio(10, 600, rounds=stream_rounds, slowdown=stream),
    }
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        url, session = make_store(Path(scratch))
        figures.update(cli_ratios(url, session, rounds, Path(scratch), slowdowns))
        figures["search"] = search_ratio(Path(scratch), rounds, slowdowns.get("search"))
    return figures


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="whole processes of each command (15)")
    args = parser.parse_args()
    print_results(measure(args.rounds), args.json)


if __name__ == "__main__":
    main()
