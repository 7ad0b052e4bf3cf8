"""What ``stats`` and ``verify`` say about what is derived from the log: the read model and the kept snapshots.

Both are only read here, never repaired (``acp-registry rebuild`` refolds the read model; a bad kept snapshot
is ignored by time travel and replaced by the next one written). ``verify`` looks at the tables as they are,
before anything folds into them: a read model behind the log is normal (the next reader catches it up); one that
disagrees with the fold of the log is a problem.
"""

from __future__ import annotations

import msgspec

from events.errors import CorruptEventError
from registry.backend import Backend
from registry.cli.terminal import progress
from registry.readmodel.check import check_read_model
from registry.readmodel.guard import open_read_model
from registry.snapshot import snapshots

__all__ = ["Problem", "ReadModelInfo", "check_derived", "describe_derived"]


class Problem(msgspec.Struct, rename="camel"):
    position: int
    session_id: str | None
    problem: str


class ReadModelInfo(msgspec.Struct, rename="camel"):
    kind: str
    """``tables`` (in the store) or ``memory`` (folded at open)."""
    checkpoint: int
    floor: int
    """Walks that started at or after it are exact."""
    behind_head: int
    kept_snapshots: list[int]
    """Positions of the kept snapshots (time travel starts from the nearest)."""


def describe_derived(backend: Backend, head: int) -> ReadModelInfo:
    """``stats``: the read model's kind, checkpoint and floor, and where the kept snapshots are."""
    read_model = open_read_model(backend, catch_up=False)
    try:
        return ReadModelInfo(
            read_model.kind,
            read_model.position,
            read_model.window_floor(),
            head - read_model.position,
            [position for position, _path in snapshots(backend)],
        )
    finally:
        read_model.close()


def check_derived(backend: Backend) -> tuple[str, list[Problem]]:
    """``verify``: a note on the read model and the kept snapshots, and their problems."""
    read_model = open_read_model(backend, catch_up=False)
    try:
        with progress("comparing the read model with the log", read_model.position) as report:
            checked = check_read_model(backend, read_model, report=report)
    except CorruptEventError as exc:
        return f"not compared with the log: the record at position {exc.position} is corrupt", []
    finally:
        read_model.close()
    problems = [Problem(m.position, m.session_id, m.problem) for m in checked.mismatches]
    verdict = "agrees" if not problems else "disagrees"
    note = (
        f"{checked.kind} at position {checked.checkpoint} ({checked.sessions} sessions) and {checked.snapshots} kept "
        f"snapshot{'s' if checked.snapshots != 1 else ''}: {verdict} with the fold of the log"
    )
    index = backend.search_index()
    try:
        searched = [Problem(0, None, f"{problem} (acp-registry rebuild makes it anew)") for problem in index.problems()]
    finally:
        index.close()
    note += "; the search index " + ("holds every kept message" if not searched else "disagrees with them")
    return note, problems + searched
