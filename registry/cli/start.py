"""The start of an ``acp-registry`` process, kept short: msgspec imported without typing_extensions, and the cyclic
collector paused while the command starts (``pause``) until its store is open (``started``). ``main`` (in the
package) pauses it; ``stores.open_log`` says when the start is over.

Importing this module imports msgspec so (``import_msgspec``): the package imports it before any module of its own
that imports msgspec at its head (``terminal``, ``stores``, the commands); ``tests/test_cli_start.py`` holds that."""

from __future__ import annotations

import gc
import sys

__all__ = ["import_msgspec", "pause", "started"]


def import_msgspec() -> None:
    """msgspec without typing_extensions, in a process that has neither yet. msgspec imports it for type hints this
    package never uses (Python's own ``typing`` has what it needs on 3.11+), and with it inspect, ast and dis: a
    large part of a command's start (docs/benchmarks.md). Only msgspec's import is spared it:
    whatever imports typing_extensions later (reactivex: ``tail``, ``serve``) gets it as usual."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment] # None: the import raises ImportError
    try:
        import msgspec  # noqa: F401, PLC0415
    finally:
        del sys.modules["typing_extensions"]


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


import_msgspec()  # before the package's modules that import msgspec at their heads (the module's docstring)
