"""``rebuild``: throw the read model away and fold it again from the whole log.

The read model is derived data, so this never loses anything (whatever state its tables are in - missing,
partial, garbage, another version - as long as the log reads), and it says what it replaced; it is what to run
when ``verify`` reports that the tables disagree with the log (a bug, or a hand edit). Other processes may keep
serving meanwhile: the rebuild is one transaction per chunk, and a reader that finds the tables behind the log
catches them up.
"""

from __future__ import annotations

import argparse
import time

import msgspec

from events.errors import RegistryError
from registry.backends import backend_for
from registry.cli.stores import open_log
from registry.cli.terminal import stdout_console, write_json
from registry.cli.where import locate
from registry.readmodel import ReadModel
from registry.readmodel.guard import open_read_model

__all__ = ["RebuildResult", "add_arguments", "run"]


class RebuildResult(msgspec.Struct, rename="camel"):
    kind: str
    checkpoint: int
    sessions_live: int
    seconds: float
    replaced: str
    """What was thrown away: the tables' checkpoint and how their schema departed from this version's."""
    indexed: int | None = None
    """Messages the search index holds after it was made anew (None: it could not be, the store is read-only)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options of its own (``--store``, ``--json``)."""


def _what_is_there(read_model: ReadModel) -> str:
    """The read model about to be thrown away, for people: its checkpoint and what was wrong with its schema."""
    tables = read_model.tables
    if tables is None:
        return "nothing kept (the log is folded in memory)"
    problems = tables.schema_problems()
    try:
        checkpoint = tables.stored_meta().get("checkpoint")
    except RegistryError:
        checkpoint = None
    at = "an unknown checkpoint" if checkpoint is None else f"checkpoint {checkpoint}"
    if not problems:
        return f"tables at {at}"
    shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
    return f"tables at {at} whose schema was not this version's ({shown})"


def run(args: argparse.Namespace) -> int:
    with open_log(locate(args.store), create=False) as store:
        started = time.perf_counter()
        read_model = open_read_model(backend_for(store), catch_up=False)
        try:
            replaced = _what_is_there(read_model)
            checkpoint = read_model.rebuild()
            index = backend_for(store).search_index()
            try:
                indexed: int | None = None if store.read_only else index.rebuild()
            finally:
                index.close()
            result = RebuildResult(
                read_model.kind, checkpoint, read_model.count(), time.perf_counter() - started, replaced, indexed
            )
        finally:
            read_model.close()
    if args.json:
        write_json(result)
    else:
        stdout_console().print(
            f"rebuilt the read model ({result.kind}) from the log: position {result.checkpoint}, "
            f"{result.sessions_live} live sessions, in {result.seconds:.2f} s; it replaced {result.replaced}"
            + ("" if result.indexed is None else f"; the search index was made anew: {result.indexed} messages"),
            markup=False,
        )
    return 0
