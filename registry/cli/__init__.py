"""``acp-registry``: look into the session log without writing code.

One module per command, named after it (``list_sessions`` for ``list`` and ``import_log`` for ``import``, whose
names Python keeps for itself), each with ``add_arguments(parser)`` and ``run(args) -> int``, and one line in the
command table (``commands.COMMANDS``, where the parser is built and errors become exit codes). A command's module
is imported only when that command is parsed, so ``import registry.cli`` and ``acp-registry --help`` stay fast.
Shared pieces: ``where`` (which store), ``stores`` (opening it), ``ids`` (which session), ``start`` (a short start),
``stopping`` (the commands that run until stopped), ``terminal`` (output), ``tables`` and ``session_tables``
(tables), ``views`` (what they say), ``options`` (argument types), ``timetravel`` (the fold behind ``replay``,
``stats`` and ``verify``) and ``errors``.

This module is the process's entry alone (``main``): it sets the start - the collector paused, msgspec imported
without typing_extensions (``start``) - before it loads the command line, whose modules are most of a start.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial

from registry.cli.errors import EXIT_INTERRUPTED
from registry.cli.start import end_now, import_msgspec, pause, stopped_by_signal

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (0 ok, 1 problem found, 2 usage or input error, 130 after Ctrl-C).
    Without ``argv`` it runs the process's own command (``sys.argv``: the ``acp-registry`` script, ``python -m
    registry.cli``), its start with the collector paused (``start.started`` ends that); a caller that passes
    ``argv`` keeps its collector as it is.

    A command that runs until stopped (``tail``, ``serve``, ``import-agents --watch``) ends with 0 on Ctrl-C or
    SIGTERM at any moment from here on: its handlers are set before the command line loads
    (``registry.cli.stopping``); any other command ends with 130 on Ctrl-C from here on, without a traceback."""
    words = sys.argv[1:] if argv is None else list(argv)
    if argv is not None:
        import_msgspec()
        return _run(words)
    pause()
    if stopped_by_signal(words):
        # Only signal handling loads first: msgspec and the command line load once Ctrl-C and SIGTERM stop it with 0.
        from registry.cli.stopping import run_until_stopped  # noqa: PLC0415

        return run_until_stopped(partial(_answer, words))
    try:
        import_msgspec()
        return _run(words)
    except KeyboardInterrupt:  # a Ctrl-C while the command line loaded, before its command could say it
        end_now(EXIT_INTERRUPTED)


def _run(words: list[str]) -> int:
    # The command line loads here, after the start is set: the commands' runners are the only modules this one
    # loads, each the runner of the commands it starts.
    from registry.cli.commands import run  # noqa: PLC0415

    return run(words)


def _answer(words: list[str]) -> int:
    """The command ``words`` name, run as ``run_until_stopped`` runs it: its Ctrl-C is the caller's to say."""
    from registry.cli.commands import answer  # noqa: PLC0415

    return answer(words)
