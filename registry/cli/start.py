"""The start of an ``acp-registry`` process, kept short: the cyclic collector paused while the command starts
(``pause``) until its store is open (``started``), msgspec imported without typing_extensions (``import_msgspec``),
and which commands run until stopped (``stopped_by_signal``). ``registry.cli.main`` pauses the collector and imports
msgspec so before it loads any module of the command line (``commands``, ``terminal``, ``stores``, the commands);
``stores.open_log`` says when the start is over; ``tests/test_cli_start.py`` holds that. This module imports
nothing but the standard library's ``gc``, ``os``, ``sys`` and ``_signal``: it runs before the rest."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, NoReturn

if TYPE_CHECKING:
    import signal
else:  # the C module behind ``signal``, loaded at Python's start (``signal`` adds its enums: a part of a start)
    import _signal as signal

__all__ = ["STOPPED_BY_SIGNAL", "end_now", "import_msgspec", "pause", "started", "stopped_by_signal"]

_HELD: Final = (signal.SIGINT, signal.SIGTERM)


def import_msgspec() -> None:
    """msgspec without typing_extensions, in a process that has neither yet. msgspec imports it for type hints this
    package never uses (Python's own ``typing`` has what it needs on 3.11+), and with it inspect, ast and dis: a
    large part of a command's start (docs/benchmarks.md). Only msgspec's import is spared it:
    whatever imports typing_extensions later (reactivex: ``tail``, ``serve``) gets it as usual.

    Ctrl-C and SIGTERM wait while it loads: msgspec's module set-up does not survive an exception raised inside it
    (a Ctrl-C there left it half made, and the process's next decoder crashed it with a segmentation fault); the
    signal comes as soon as it is loaded."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment] # None: the import raises ImportError
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        import msgspec  # noqa: F401, PLC0415
    finally:
        del sys.modules["typing_extensions"]
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def end_now(code: int) -> NoReturn:
    """End the process's own command with ``code`` now, its output flushed, after a Ctrl-C or SIGTERM that ended it
    as it should. CPython remembers a KeyboardInterrupt that passed through code run from a string (``exec`` of
    text: how a dataclass or a named tuple is made while modules load) even when it was caught, and at its exit then
    kills the process with SIGINT whatever ``main`` returned; ``os._exit`` ends it before that exit runs."""
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib is not this module's to load (it runs before the rest)
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said there
            pass
    os._exit(code)


class _Start:
    collector_paused = False
    """Whether the process's command is starting with the cyclic collector paused (``started`` ends it)."""


def started() -> None:
    """The command's start is over (``stores.open_log`` says so once the store is open). When ``main`` runs the
    process's own command it starts with the cyclic collector paused: the start - imports, the parser, the open -
    allocates tens of thousands of objects that live to the end (modules, classes, functions), which the collector
    walked some 30 times in a ``list`` and once more at exit. They are frozen out of its walks now (``gc.freeze``)
    and it runs again for the command's own work (what it saves: docs/benchmarks.md)."""
    if _Start.collector_paused:
        _Start.collector_paused = False
        gc.freeze()
        gc.enable()


def pause() -> None:
    """The process's own command starts: the collector paused until ``started`` (a caller whose collector is already
    off keeps it as it is)."""
    if gc.isenabled():
        gc.disable()
        _Start.collector_paused = True


STOPPED_BY_SIGNAL: Final = ("tail", "serve")
"""The commands that run until stopped, with ``import-agents --watch``: Ctrl-C or SIGTERM is how they end (0)."""


def stopped_by_signal(words: Sequence[str]) -> bool:
    """Whether the command line names a command that runs until Ctrl-C or SIGTERM stops it - read from the words
    before they are parsed, since a signal may come while they are (on a busy machine, for seconds)."""
    at = 0
    while at < len(words) and words[at].startswith("-"):
        at += 2 if words[at] == "--store" else 1
    if at >= len(words):
        return False
    command, rest = words[at], words[at + 1 :]
    return command in STOPPED_BY_SIGNAL or (command == "import-agents" and "--watch" in rest)
