"""The speed figures CI holds, each a ratio of instructions counted by valgrind against a reference in the same run.

A time moves with whatever else the machine does (a shared CI host, eight busy loops beside the suite); the
instructions a process executes do not: valgrind's counter (``cachegrind``, no cache simulation) gives the same
count for the same interpreter, code and input whatever the load, within 0.3% here. So each figure is a count of
the registry's own work divided by a reference's count in the same run, and its bound can sit just above it: a
1.5x regression of any figure goes over, busy machine or not, which ``benchmarks/test_guard.py`` shows each run by
adding half as much work again to each figure's own.

* ``stream_1`` / ``stream_10``: the change stream's instructions per change (the follower's fold, the diff, the
  hand-off to each subscriber's thread; ``benchmarks/change_stream.py``'s path) with 1 and 10 subscribers, divided
  by one round of a fixed pure-Python loop (``benchmarks.guard_work.reference_loop``).
* ``list``: ``acp-registry list`` (the table, piped) as a whole process, divided by ``python -c pass``.
* ``show``: ``acp-registry show SESSION`` as a whole process, divided by ``show --json SESSION`` on the same
  store of ``SHOW_SESSIONS`` sessions (a session with three forks: ``show`` lists them, ``--json`` does not).
* ``search``: ``SessionRegistry.search``'s first pages of 20 hits in process, divided by the raw FTS5 queries of
  the same words on the same index tables (``benchmarks.search.raw_search``), over ``guard_work.SEARCH_QUERIES``, on
  a store of ``SEARCH_SESSIONS`` sessions of ``benchmarks.corpus``'s conversations.

A whole process is counted by cachegrind; a figure measured in process by callgrind, in a child that starts its
instrumentation only around that work (``benchmarks/guard_work.py``: its set-up runs uninstrumented, faster).
Children run with their bytecode cached (``PYTHONPYCACHEPREFIX``, warmed by a first run), as an installed wheel
has it, and ``PYTHONHASHSEED=0``; one child per core at a time (the counts do not care). Instructions are not time:
a regression that waits (a sleep, an fsync) is not seen here - that is ``benchmarks/``'s work, measured in seconds.

    python -m benchmarks.guard [--slow stream_1,list:1.25] [--json out.json]

prints the figures, and with ``--slow`` the named figures again with their own work made that many times larger
(2 when no factor is given).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from benchmarks.args import bench_parser
from benchmarks.store_throughput import print_results

__all__ = ["FIGURES", "SEARCH_SESSIONS", "SHOW_SESSIONS", "Guard", "Measured", "ValgrindMissing", "make_store"]

SHOW_SESSIONS: Final = 40_000
"""Sessions in the store ``list`` and ``show`` run on: enough for ``show``'s way of finding forks to show in its
figure (it decodes every session's state), few enough to write in seconds."""
SEARCH_SESSIONS: Final = 2_000
"""Sessions of the store ``search`` runs on (about 40k messages: one index table; written and indexed in seconds)."""
FIGURES: Final = ("stream_1", "stream_10", "list", "show", "search")

_STREAMS: Final = {"stream_1": (1, 2_000), "stream_10": (10, 600)}
"""Each stream figure's subscribers and the changes it folds."""
_REFERENCE_ROUNDS: Final = 5_000
_ROOT: Final = Path(__file__).resolve().parents[1]
_WHOLE: Final = ("valgrind", "-q", "--tool=cachegrind", "--cache-sim=no", "--branch-sim=no", "--cachegrind-out-file=")
_SECTION: Final = ("valgrind", "-q", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=")
_COUNTED: Final = {
    "cachegrind": re.compile(rb"^summary: (\d+)$", re.M),
    "callgrind": re.compile(rb"^totals: (\d+)$", re.M),
}
"""The line of the instruction count in each tool's file (callgrind's summary is 0 when a client request started
its instrumentation)."""
_MAIN: Final = "import sys; from registry.cli import main; code = main(); {pad}sys.exit(code)"  # as the script does
_PAD: Final = "from benchmarks.guard_work import pad; pad({rounds}); "


class ValgrindMissing(RuntimeError):
    """valgrind is not installed: the guard counts instructions with it."""


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


def _search_store(folder: Path) -> Path:
    """The corpus's ``SEARCH_SESSIONS`` sessions with their messages, the search index made (as a first search does)."""
    from benchmarks.search import build  # noqa: PLC0415
    from events import SqliteStore  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415

    path = folder / "guard-search.db"
    build(path, SEARCH_SESSIONS, seed=41)
    with SessionRegistry(SqliteStore(str(path)), follow=False) as registry:
        registry.search("error")
    return path


@dataclass(frozen=True)
class Measured:
    """The instruction counts of one run of every child, and the figures they make."""

    counts: Mapping[str, int]

    def figures(self, padded: Mapping[str, int] | None = None) -> dict[str, float]:
        """Each figure; ``padded`` replaces the counts of the named children (the slowed runs)."""
        count = {**self.counts, **(padded or {})}
        figures = {name: count[name] / changes / self.reference_round for name, (_, changes) in _STREAMS.items()}
        figures["list"] = count["list"] / count["pass"]
        figures["show"] = count["show"] / count["show --json"]
        figures["search"] = count["search"] / count["search raw"]
        return figures

    @property
    def reference_round(self) -> float:
        """The instructions of one round of the reference loop."""
        return self.counts["reference"] / _REFERENCE_ROUNDS


@dataclass(frozen=True)
class _Child:
    tool: str  # cachegrind: the whole process; callgrind: its section
    argv: list[str]

    def padded(self, rounds: int) -> _Child:
        """The same child with ``rounds`` more rounds of the reference loop in what is counted."""
        if self.tool == "cachegrind":  # an acp-registry process: [python, -c, _MAIN, *args]
            return _Child(self.tool, _cli(self.argv[3:], rounds))
        return _Child(self.tool, [*self.argv[:3], "--pad", str(rounds), *self.argv[3:]])


def _cli(args: Sequence[str], pad: int = 0) -> list[str]:
    return [sys.executable, "-c", _MAIN.format(pad=_PAD.format(rounds=pad) if pad else ""), *args]


class Guard:
    """The child processes that measure the figures, counted by valgrind at most ``workers`` at a time, and the
    stores they run on (made in ``folder``)."""

    def __init__(self, folder: Path, workers: int | None = None) -> None:
        if shutil.which("valgrind") is None:
            raise ValgrindMissing("the speed guard counts instructions with valgrind: apt install valgrind")
        self.folder = folder
        self.slots = threading.Semaphore(workers or max(1, len(os.sched_getaffinity(0))))
        self.env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        self.env.update(PYTHONPYCACHEPREFIX=str(folder / "bytecode"), PYTHONHASHSEED="0", COLUMNS="120")
        work = [sys.executable, "-m", "benchmarks.guard_work"]
        self.children: dict[str, _Child] = {
            "reference": _Child("callgrind", [*work, "reference", str(_REFERENCE_ROUNDS)])
        }
        for name, (subscribers, changes) in _STREAMS.items():
            self.children[name] = _Child("callgrind", [*work, "stream", str(subscribers), str(changes)])
        self._work = work

    def run(self, factors: Mapping[str, float] | None = None) -> tuple[Measured, dict[str, float]]:
        """Every figure counted once, and (``factors``) each named figure again with its own work made ``factor``
        times larger: its child runs as many more reference-loop rounds as that work's instructions times
        ``factor - 1``. The children that need no store are counted while the stores are made; a slowed child as
        soon as its figure's count is in."""
        with ThreadPoolExecutor(max_workers=32) as pool:  # threads that wait; ``slots`` bounds the processes
            counted = {name: pool.submit(self._count, child) for name, child in self.children.items()}
            url, session = make_store(self.folder)
            search = str(_search_store(self.folder))
            later = {
                "pass": _Child("cachegrind", [sys.executable, "-c", "pass"]),
                "list": _Child("cachegrind", _cli(["--store", url, "list"])),
                "show": _Child("cachegrind", _cli(["--store", url, "show", session])),
                "show --json": _Child("cachegrind", _cli(["--store", url, "show", "--json", session])),
                "search": _Child("callgrind", [*self._work, "search", search, "ours"]),
                "search raw": _Child("callgrind", [*self._work, "search", search, "raw"]),
            }
            for warm in (later["list"].padded(1), later["show"]):  # every module a counted process imports, compiled
                subprocess.run(warm.argv, env=self.env, cwd=_ROOT, stdout=subprocess.DEVNULL, check=True, timeout=600)
            self.children.update(later)
            counted.update({name: pool.submit(self._count, child) for name, child in later.items()})
            slowed = {
                figure: pool.submit(self._count_slowed, figure, factor, counted)
                for figure, factor in (factors or {}).items()
            }
            measured = Measured({name: future.result() for name, future in counted.items()})
            return measured, measured.figures({name: future.result() for name, future in slowed.items()})

    def _count_slowed(self, figure: str, factor: float, counted: Mapping[str, Future[int]]) -> int:
        rounds = counted[figure].result() * (factor - 1) / counted["reference"].result() * _REFERENCE_ROUNDS
        return self._count(self.children[figure].padded(round(rounds)))

    def _count(self, child: _Child) -> int:
        """The instructions one child executes (its section's, or the whole process's), counted by valgrind."""
        with self.slots, tempfile.NamedTemporaryFile(dir=self.folder, suffix=f".{child.tool}") as out:
            tool = _WHOLE if child.tool == "cachegrind" else _SECTION
            done = subprocess.run(
                [*tool[:-1], tool[-1] + out.name, *child.argv],
                env=self.env,
                cwd=_ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=1200,
                check=False,
            )
            command = " ".join(child.argv)
            if done.returncode != 0:
                raise RuntimeError(f"{command} under valgrind exited {done.returncode}: {done.stderr.decode()}")
            found = _COUNTED[child.tool].search(Path(out.name).read_bytes())
        if found is None or int(found.group(1)) == 0:
            raise RuntimeError(f"valgrind counted no instruction of {command}")
        return int(found.group(1))


def _factors(text: str) -> dict[str, float]:
    """``stream_1,show:1.5`` -> {"stream_1": 2.0, "show": 1.5}."""
    named = (part.partition(":") for part in text.split(",") if part)
    factors = {name: float(factor) if factor else 2.0 for name, _, factor in named}
    unknown = set(factors) - set(FIGURES)
    if unknown:
        raise SystemExit(f"--slow: no figure {', '.join(sorted(unknown))} (the figures: {', '.join(FIGURES)})")
    return factors


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--slow", default="", help="figures to measure again slowed, e.g. stream_1,list:1.25")
    args = parser.parse_args()
    factors = _factors(args.slow)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as scratch:
        measured, slowed = Guard(Path(scratch)).run(factors)
        results = measured.figures()
        results.update({f"{name} slowed {factors[name]}x": slowed[name] for name in factors})
    print_results(results, args.json)


if __name__ == "__main__":
    main()
