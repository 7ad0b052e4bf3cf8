"""``tail``: the change stream, live, one line per item, until Ctrl-C (which is a normal way to stop: exit 0).

Items come from ``SessionRegistry.list_changes(after=...)``: everything after the start position, then live,
including changes other processes make on the same store (the registry's follower polls for them). Lines are
written by the main thread only, so Ctrl-C never lands inside the registry's threads.
"""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import threading

from registry.cli.errors import InputError, ProblemFound
from registry.cli.options import position
from registry.cli.stores import locate, open_registry
from registry.cli.terminal import write_json_line
from registry.cli.views import change_json, change_text
from registry.diffs import ListChange

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="start", type=position, metavar="POSITION", help="replay changes after it first")


def run(args: argparse.Namespace) -> int:
    try:
        return _follow(args)
    except KeyboardInterrupt:
        return 0


def _follow(args: argparse.Namespace) -> int:
    location = locate(args.store)
    registry = open_registry(location, create=False)
    try:
        head = registry.sync()
        start = head if args.start is None else args.start
        if start > head:
            raise InputError(f"--from {start} is beyond the log's head ({head})")
        items: queue.SimpleQueue[ListChange | Exception] = queue.SimpleQueue()
        subscription = registry.list_changes(after=start).subscribe(on_next=items.put, on_error=items.put)
        if sys.stderr.isatty():
            print(f"following {location.url} after position {start} (Ctrl-C stops)", file=sys.stderr, flush=True)
        try:
            while True:
                try:
                    item = items.get(timeout=0.5)
                except queue.Empty:
                    continue
                if isinstance(item, Exception):
                    raise ProblemFound(f"the change stream ended: {item}")
                if args.json:
                    write_json_line(change_json(item))
                else:
                    print(change_text(item), flush=True)
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the cleanup
            subscription.dispose()
    finally:
        registry.close()
