"""What the speed guard's child processes run under valgrind (``benchmarks/guard.py``): each measures one section.

A child does its set-up uninstrumented (the imports, the store opened, the turns logged and the read model caught
up, the search warmed) and starts callgrind's instrumentation only around the work its figure measures, with the
client requests pytest-codspeed's hooks send (no-ops when the process does not run under valgrind): the count
callgrind writes is that section's alone. ``--pad N`` runs the reference loop ``N`` more rounds inside the section:
the guard's own test adds work that way, as much as the figure's own times a factor, to see it go over its bound.

    python -m benchmarks.guard_work [--pad N] reference ROUNDS
    python -m benchmarks.guard_work [--pad N] stream SUBSCRIBERS CHANGES
    python -m benchmarks.guard_work [--pad N] search STORE ours|raw
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

__all__ = ["SEARCH_QUERIES", "SEARCH_REPEATS", "pad", "reference_loop", "search", "section", "stream"]

SEARCH_QUERIES: Final = ("error", "migrat*", "Handler", "config timeout", '"most recent call"')
"""What ``search`` searches for: words found in hundreds of messages, a prefix, a CamelCase part, two words, a
phrase (a page then has its 20 sessions to fetch and show)."""
SEARCH_REPEATS: Final = 2
"""Pages of each query in the measured section (after one of each before it, which warms what a process does once:
the index opened, statements prepared)."""


def reference_loop(rounds: int) -> int:
    """A fixed pure-Python workload of the kinds the stream does (calls, attribute and dict look-ups, small tuples
    and strings made and dropped): what one round of the interpreter's ordinary work costs."""
    table: dict[tuple[int, str], int] = {}
    total = 0
    for n in range(rounds):
        key = (n & 1023, "key")
        table[key] = table.get(key, 0) + len(str(n))
        total += _step(n)
    return total + len(table)


def _step(n: int) -> int:
    return n % 7


def pad(rounds: int) -> None:
    """``rounds`` rounds of the reference loop with the collector off: a round then costs as many instructions in
    any process (with it on, a round's share of the collections depends on what else the process holds)."""
    was_on = gc.isenabled()
    gc.disable()
    reference_loop(rounds)
    if was_on:
        gc.enable()


@contextlib.contextmanager
def section(padding: int) -> Iterator[None]:
    """callgrind's instrumentation on for the block, then ``padding`` rounds of ``pad``, then off."""
    hooks = importlib.import_module("pytest_codspeed.instruments.hooks.dist_instrument_hooks")  # a C module
    hooks.callgrind_start_instrumentation()
    yield
    pad(padding)
    hooks.callgrind_stop_instrumentation()


def stream(subscribers: int, changes: int, padding: int = 0) -> None:
    """``benchmarks.change_stream``'s stream made ready (``ready_stream``: ``subscribers`` subscribers on threads of
    their own, ``changes`` turns in the log); the section: ``deliver`` - the follower folds the turns and every
    subscriber receives every change."""
    from benchmarks.change_stream import deliver, ready_stream  # noqa: PLC0415

    registry, receivers = ready_stream(subscribers, changes)
    # The interpreter lock passed on when a thread waits, not every 5 ms of the wall clock: how often a subscriber's
    # thread wakes then follows the instructions, not the time they take (under valgrind, under a load).
    sys.setswitchinterval(1000)
    with section(padding):
        deliver(registry, receivers)
    registry.close()


def search(path: Path, ours: bool, padding: int = 0) -> None:
    """The store's search index opened and each query searched once; the section: ``SEARCH_REPEATS`` first pages
    of 20 hits of each query through ``SessionRegistry.search`` (``ours``), or as many raw FTS5 queries of the same
    words on the same index tables (``benchmarks.search.raw_search``). Each opens only what its own way needs (the
    raw queries no registry): under valgrind a set-up costs time even uncounted."""
    from registry.search.query import parse  # noqa: PLC0415

    if ours:
        from events import SqliteStore  # noqa: PLC0415
        from registry import SessionRegistry  # noqa: PLC0415

        with SessionRegistry(SqliteStore(str(path)), follow=False) as registry:
            for text in SEARCH_QUERIES:
                registry.search(text, limit=20)
            with section(padding):
                for text in SEARCH_QUERIES:
                    for _ in range(SEARCH_REPEATS):
                        registry.search(text, limit=20)
        return
    from benchmarks.search import raw_search  # noqa: PLC0415

    db = sqlite3.connect(path)
    tables = [
        name
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE name GLOB 'search_[0-9]*'")
        if name.removeprefix("search_").isdigit()
    ]
    expressions = [parse(text).fts5() for text in SEARCH_QUERIES]
    for expression in expressions:
        raw_search(db, tables, expression)
    with section(padding):
        for expression in expressions:
            for _ in range(SEARCH_REPEATS):
                raw_search(db, tables, expression)
    db.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.guard_work", description=__doc__)
    parser.add_argument("--pad", type=int, default=0, help="reference-loop rounds added to the section (more work)")
    kinds = parser.add_subparsers(dest="kind", required=True)
    referenced = kinds.add_parser("reference", help="the section: the reference loop's rounds")
    referenced.add_argument("rounds", type=int)
    streamed = kinds.add_parser("stream")
    streamed.add_argument("subscribers", type=int)
    streamed.add_argument("changes", type=int)
    searched = kinds.add_parser("search")
    searched.add_argument("store", type=Path)
    searched.add_argument("variant", choices=("ours", "raw"))
    args = parser.parse_args(argv)
    if args.kind == "reference":
        with section(args.pad + args.rounds):
            pass
    elif args.kind == "stream":
        stream(args.subscribers, args.changes, args.pad)
    else:
        search(args.store, args.variant == "ours", args.pad)


if __name__ == "__main__":
    main()
