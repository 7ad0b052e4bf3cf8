"""``rebuild``: throw the read model away and fold it again from the whole log.

The read model is derived data, so this never loses anything; it is what to run when ``verify`` reports that
the tables disagree with the log (a bug, or a hand edit). Other processes may keep serving meanwhile: the
rebuild is one transaction per chunk, and a reader that finds the tables behind the log catches them up.
"""

from __future__ import annotations

import argparse
import time

import msgspec

from registry.cli.stores import locate, open_log
from registry.cli.terminal import stdout_console, write_json
from registry.readmodel import open_read_model

__all__ = ["RebuildResult", "add_arguments", "run"]


class RebuildResult(msgspec.Struct, rename="camel"):
    kind: str
    checkpoint: int
    sessions_live: int
    seconds: float


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options of its own (``--store``, ``--json``)."""


def run(args: argparse.Namespace) -> int:
    with open_log(locate(args.store), create=False) as store:
        started = time.perf_counter()
        read_model = open_read_model(store, catch_up=False)
        try:
            checkpoint = read_model.rebuild()
            result = RebuildResult(read_model.kind, checkpoint, read_model.count(), time.perf_counter() - started)
        finally:
            read_model.close()
    if args.json:
        write_json(result)
    else:
        stdout_console().print(
            f"rebuilt the read model ({result.kind}) from the log: position {result.checkpoint}, "
            f"{result.sessions_live} live sessions, in {result.seconds:.2f} s",
            markup=False,
        )
    return 0
