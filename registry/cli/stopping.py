"""The commands that run until stopped (``tail``, ``serve``, ``import-agents --watch``: ``start.stopped_by_signal``),
as the process's own command: Ctrl-C or SIGTERM is how they end, with 0, at any moment once ``run_until_stopped``
has set the handler - while the arguments are parsed (on a busy machine, for seconds), while the store opens, while
it works, while it closes. (A signal while Python itself starts, before this runs, is Python's own.) Only these load
``signal``: the other commands never set a handler."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any, NoReturn

from registry.cli.commands import answer
from registry.cli.errors import EXIT_OK
from registry.cli.start import started

__all__ = ["run_until_stopped"]


def _stop(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def run_until_stopped(words: list[str]) -> int:
    """Run the process's own command ``words`` name, on its main thread, until it ends or Ctrl-C or SIGTERM stops
    it (then 0)."""
    stopped = False
    try:
        try:  # inside the try: a signal that comes as the handler is set is raised where this try catches it
            signal.signal(signal.SIGTERM, _stop)
            return answer(words)
        except KeyboardInterrupt:
            stopped = True
            return EXIT_OK
        finally:
            # Stopping already: a second Ctrl-C or SIGTERM must not interrupt what is left (closing, the exit).
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            started()
    except KeyboardInterrupt:  # one more came while the handlers were being put aside
        stopped = True
        return EXIT_OK
    finally:
        if stopped:
            _end_stopped()


def _end_stopped() -> NoReturn:
    """End a command stopped as it should be (Ctrl-C or SIGTERM), its own clean-up done, with exit 0 - now.
    CPython remembers a KeyboardInterrupt that passed through code run from a string (``exec``/``eval`` of text:
    how a dataclass or a named tuple is made while modules load) even when it was caught, and at its exit then
    kills the process with SIGINT whatever ``main`` returned; ``os._exit`` ends it before that exit runs."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more can be said there
            stream.flush()
    os._exit(EXIT_OK)
