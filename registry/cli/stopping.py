"""The commands that run until stopped (``tail``, ``serve``, ``import-agents --watch``: ``start.stopped_by_signal``),
as the process's own command: Ctrl-C or SIGTERM is how they end, with 0, at any moment once ``run_until_stopped``
has set the handler - while the command line loads and the arguments are parsed (on a busy machine, for seconds),
while the store opens, while it works, while it closes. This module loads before the command line does and imports
none of it (``main`` hands it the command to run). (A signal while Python itself starts, before ``main`` runs, is
Python's own.) Only these load ``signal``: the other commands never set a handler."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from registry.cli.errors import EXIT_OK
from registry.cli.start import end_now, import_msgspec, started

__all__ = ["run_until_stopped"]


def _stop(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def run_until_stopped(command: Callable[[], int]) -> int:
    """Run the process's own ``command`` (what loads and answers it: ``main``'s), on its main thread, until it ends or
    Ctrl-C or SIGTERM stops it (then 0)."""
    stopped = False
    try:
        try:  # inside the try: a signal that comes as the handler is set is raised where this try catches it
            signal.signal(signal.SIGTERM, _stop)
            import_msgspec()  # with the handler set: a signal while it loads waits for it, then stops it
            return command()
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
            end_now(EXIT_OK)
