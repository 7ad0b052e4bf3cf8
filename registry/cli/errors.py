"""What a command can fail with, and the exit code each one means.

    CommandError             a command stopped; its message is the one line printed on stderr
    ├── InputError     2     usage or input: a missing file, a bad URL or timestamp, an unknown session, an id
    │                        taken already (the library's InvalidParams, SessionNotFound, SessionExists too)
    └── ProblemFound   1     the store has a problem (a corrupt record, a store that failed)

``registry.cli.main`` maps these, and the library's own errors, to exit codes in one place.
"""

from __future__ import annotations

__all__ = ["EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE", "CommandError", "InputError", "ProblemFound"]

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""Ctrl-C stopped a command that does not run until stopped (128 + SIGINT, as a shell reports it)."""


class CommandError(Exception):
    """A command could not do its work; ``str(error)`` says why in one line."""

    exit_code = EXIT_USAGE


class InputError(CommandError):
    """What the user gave is wrong or missing (exit 2)."""

    exit_code = EXIT_USAGE


class ProblemFound(CommandError):
    """The store or its log has a problem (exit 1)."""

    exit_code = EXIT_PROBLEM
