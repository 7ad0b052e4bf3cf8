"""``tail``: the change stream, live, one line per item, until Ctrl-C (which is a normal way to stop: exit 0).

Items come from ``SessionRegistry.list_changes(after=...)``: everything after the start position, then live,
including changes other processes make on the same store (the registry's follower polls for them). Lines are
written by the main thread only, so Ctrl-C never lands inside the registry's threads.

``tail`` may start before its SQLite store exists (a proxy or ``serve`` not started yet): it says so in one line
and waits for the file, then follows it from its first event.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import sys
import threading
import time

from events.errors import RegistryError
from events.factory import sqlite_file
from registry.cli.errors import InputError, ProblemFound
from registry.cli.options import position
from registry.cli.stores import check_url, open_registry
from registry.cli.terminal import write_json_line
from registry.cli.views import change_json, change_text
from registry.cli.where import StoreLocation, locate
from registry.diffs import ListChange
from registry.service import SessionRegistry

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="start", type=position, metavar="POSITION", help="replay changes after it first")


def run(args: argparse.Namespace) -> int:
    try:
        return _follow(args)
    except KeyboardInterrupt:
        return 0


_LOOK_EVERY = 0.2
"""Seconds between looks for a store that is not there yet."""
_SETTLING = 30.0
"""Seconds a store that has just appeared may take to open (its creator is still writing its tables); generous,
since a busy machine can stall the creator: past it the error is the store's own."""


def _follow(args: argparse.Namespace) -> int:
    location = locate(args.store)
    waited = _wait_for(location)
    registry = _open(location, settling=waited)
    try:
        head = registry.sync()
        start = (0 if waited else head) if args.start is None else args.start
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


def _wait_for(location: StoreLocation) -> bool:
    """Wait until the SQLite file ``location`` names is there and not empty; True when it was not there at first
    (an empty file that is there is refused as every command refuses it)."""
    path = sqlite_file(location.url)
    if path is None or os.path.lexists(path):
        return False
    check_url(location)  # a mistyped option is said at once, not waited on
    print(f"acp-registry: no store at {path} yet: waiting for one (Ctrl-C stops)", file=sys.stderr, flush=True)
    while not _there(path):
        time.sleep(_LOOK_EVERY)
    return True


def _there(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def _open(location: StoreLocation, *, settling: bool) -> SessionRegistry:
    """The registry on the store; one that has just appeared gets a while to be opened (its tables being made)."""
    deadline = time.monotonic() + _SETTLING
    while True:
        try:
            return open_registry(location, SessionRegistry, create=False)
        except (InputError, RegistryError, OSError):
            if not settling or time.monotonic() > deadline:
                raise
            time.sleep(_LOOK_EVERY)
