"""What the table read models share: the fold of a stretch of the log into rows, and pages cut from rows.

Two tables, in the store's own database:

* ``rm_sessions`` - one row per session as it is at the checkpoint (deleted ones too, ``live`` false), with
  ``valid_from``, the position from which this version has been current, the list filters' columns
  (``archived``, ``agent``) and the sort key (``rank``, ``session_id``) that three partial indexes over live
  rows keep in list order: ``(archived, rank, ...)``, ``(cwd, archived, rank, ...)`` and ``(agent, archived,
  rank, ...)``. A filtered page is then one range of one index (``include`` merges the two ``archived`` ranges);
  a cwd together with an agent reads the agent's range and checks the cwd;
* ``rm_past`` - the versions that later events replaced, each valid from ``valid_from`` to ``valid_to``
  (exclusive), kept for the last ``window`` positions.

The list as of P is then the current rows valid since P or earlier, plus the past rows valid at P: two indexed
queries merged by sort key, exact for any P at or after the window's floor. Before the floor, the walk goes on
in the current list without the sessions changed since P (the same rule as the in-memory fold).

Every version is kept, even one that lived only inside one catch-up: a walk's position is always a checkpoint,
but the change stream may start from any position (``state_at``), and the rows then answer it exactly.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, Final

import msgspec

from events.errors import StoreClosedError, StoreError
from events.logger import Logger
from events.model import SessionUpdated
from registry.backend import Backend
from registry.evidence import log_shorter
from registry.filters import FILTERS
from registry.fold import Entry, fold
from registry.model import STATE_VERSION, SessionState, sort_key
from registry.readmodel import ReadModelFault
from registry.readmodel.keys import Keyed, Seal, checked_states
from registry.usage import UsageKey, fold_usage

log = Logger(__name__)

__all__ = [
    "COUNTED",
    "CURRENT_COLUMNS",
    "CURRENT_ROW",
    "FILTER_COLUMNS",
    "PAST_COLUMNS",
    "PAST_ROW",
    "PAST_STATE",
    "READ_MODEL_VERSION",
    "STATE",
    "VALID_TO",
    "Fold",
    "LogShorter",
    "Row",
    "SnapshotPlan",
    "anchor_value",
    "checked_meta",
    "checked_positions",
    "counted",
    "current_row",
    "fold_chunk",
    "fold_stretch",
    "initial_meta",
    "matches_log",
    "merge_pages",
    "past_row",
    "record_log_shorter",
]

_TABLES_REVISION: Final = 9
"""Bumped whenever the tables or the fold's meaning change (the states' shape is ``STATE_VERSION``'s); 3: each
row's state blob sealed by a digest, 4: by its CRC-32 (one call to check), 5: a fork's parent in a column of its
own (indexed: ``show`` finds a session's forks by it), 6: the seal keyed (``Seal``), 7: the seal first and the
position last, outside it (so that the server can write it), 8: ``rm_meta`` counts the live sessions archived
(``archived``), as it counts the live ones, 9: the daily usage totals (``rm_usage``)."""
READ_MODEL_VERSION: Final = _TABLES_REVISION + STATE_VERSION
"""The tables' version: an older version is rebuilt from the log on open, a newer one is refused untouched. A sum
of two numbers that only grow, so it grows whenever either does."""

COUNTED: Final = ("checkpoint", "floor", "live", "archived")
"""The integers every ``rm_meta`` holds beside its version, anchor and seal: positions and counts."""
CHUNK: Final = 50_000
"""Events folded per transaction when a read model catches up a long stretch (memory stays bounded)."""


def checked_meta(rows: Iterable[tuple[str, object]]) -> dict[str, int]:
    """``rm_meta``'s rows, each of ``checkpoint``, ``floor``, ``live`` and ``archived`` an integer, else a
    ``ReadModelFault``."""
    meta = {key: value for key, value in rows if type(value) is int}
    for key in COUNTED:
        if key not in meta:
            raise ReadModelFault(f"the read model's rm_meta has no {key} row")
    return meta


def checked_positions(row: tuple[object, object, object] | None) -> tuple[int, int, int]:
    """(checkpoint, floor, head) as one query read them, else a ``ReadModelFault``."""
    checkpoint, floor, head = row or (None, None, None)
    if type(checkpoint) is not int or type(floor) is not int:
        raise ReadModelFault("the read model's rm_meta has no checkpoint or floor row")
    head = head if type(head) is int else 0
    if head < checkpoint:
        raise LogShorter(checkpoint, head)
    return checkpoint, floor, head


CURRENT_ROW: Final[tuple[tuple[str, object], ...]] = (
    ("session_id", str),
    ("cwd", str),
    ("rank", int),
    ("live", bool),
    ("valid_from", int),
    ("state", bytes),
    ("archived", bool),
    ("agent", str | None),
    ("parent", str | None),  # the session a fork was made from (its state's ``parent.session_id``)
)
"""The rows' own columns of ``rm_sessions``, in every dialect (``schema.TABLES``): each one's name and type (``X |
None``: nullable); the list filters' columns follow them (``FILTER_COLUMNS``). Declared as data, not as a row
class: no row is ever made of a class (a row is a plain tuple, ``Row``)."""
_AFTER_VALID_FROM: Final = [name for name, _ in CURRENT_ROW].index("valid_from") + 1
PAST_ROW: Final = (*CURRENT_ROW[:_AFTER_VALID_FROM], ("valid_to", int), *CURRENT_ROW[_AFTER_VALID_FROM:])
"""The rows' own columns of ``rm_past``: a current row's, with ``valid_to`` after ``valid_from``."""


FILTER_COLUMNS: Final = tuple(f.column for f in FILTERS if f.column is not None)
"""The columns list filters read that the rows lack (``registry.filters.Filter.column``): after the rows' own."""
CURRENT_COLUMNS: Final = (*(name for name, _ in CURRENT_ROW), *(column.name for column in FILTER_COLUMNS))
"""``rm_sessions``'s columns, in the order of a row's values."""
PAST_COLUMNS: Final = (*(name for name, _ in PAST_ROW), *(column.name for column in FILTER_COLUMNS))
"""``rm_past``'s columns, in the order of a row's values."""
Row = tuple[Any, ...]
"""A row's values, in its table's columns (``CURRENT_COLUMNS``, ``PAST_COLUMNS``)."""
STATE: Final = CURRENT_COLUMNS.index("state")
"""Where a current row holds its state blob (a past row: ``PAST_STATE``)."""
PAST_STATE: Final = PAST_COLUMNS.index("state")
VALID_TO: Final = PAST_COLUMNS.index("valid_to")
_FILTERED: Final = tuple(column.value for column in FILTER_COLUMNS)


def current_row(state: SessionState, seal: Seal, *, placed: bool = True) -> Row:
    """The ``rm_sessions`` row of a session's current version: what the fold writes and ``verify`` expects
    (``placed=False``: its blob without the position, ``Seal.unplaced``)."""
    return _row(state, seal.seal(state) if placed else seal.unplaced(state))


def _row(state: SessionState, blob: bytes) -> Row:
    parent = None if state.parent is None else state.parent.session_id
    rank = sort_key(state)[0]
    row = (
        state.session_id,
        state.cwd,
        rank,
        not state.deleted,
        state.position,
        blob,
        state.archived,
        state.agent,
        parent,
    )
    return (*row, *(value(state) for value in _FILTERED)) if _FILTERED else row


def past_row(old: SessionState, valid_to: int, seal: Seal, blob: bytes | None = None) -> Row:
    """The ``rm_past`` row of a version replaced at ``valid_to``: what the fold writes and ``verify`` expects
    (``blob``: the state's, sealed already)."""
    row = _row(old, seal.seal(old) if blob is None else blob)
    return (*row[:VALID_TO], valid_to, *row[VALID_TO:])  # the row it was, closed at valid_to


class Fold(msgspec.Struct, frozen=True):
    """What one stretch of the log does to the tables."""

    current: list[Row]
    past: list[Row]
    live_delta: int
    archived_delta: int
    """How many more live sessions are archived (``counted``)."""
    position: int
    """The last position folded (the new checkpoint)."""
    usage: dict[UsageKey, list[int]]
    """What the stretch's turns add to ``rm_usage`` (``registry.usage.fold_usage``)."""


def fold_stretch(
    entries: Iterable[Entry],
    load: Callable[[list[str]], dict[str, SessionState]],
    *,
    checkpoint: int,
    keep_past_after: int,
    seal: Seal,
) -> Fold:
    """Fold ``entries`` (the log after ``checkpoint``, in order) into the rows to write.

    ``load`` returns the rows' current states for session ids not seen yet in this stretch (a bulk look-up);
    a past row is kept only when it is valid after ``keep_past_after`` (older ones would be pruned at once).
    """
    before: dict[str, SessionState | None] = {}
    now: dict[str, SessionState | None] = {}
    past: list[Row] = []
    usage: dict[UsageKey, list[int]] = {}
    position = checkpoint
    pending: list[Entry] = []

    def flush() -> None:
        missing = list({e.session_id for e in pending if e.session_id not in now})
        if missing:
            found = load(missing)
            for session_id in missing:
                before[session_id] = now[session_id] = found.get(session_id)
        for entry in pending:
            session_id = entry.session_id
            old = now[session_id]
            new = fold(old, entry)
            if new is None:
                continue
            now[session_id] = new
            if old is not None and entry.position > keep_past_after:
                past.append(past_row(old, entry.position, seal))
            event = entry.event
            if type(event) is SessionUpdated and event.usage is not None:
                fold_usage(usage, event.at, new.agent, new.cwd, event.usage)
        pending.clear()

    for entry in entries:
        position = entry.position
        pending.append(entry)
        if len(pending) >= 5_000:
            flush()
    flush()

    current: list[Row] = []
    live_delta = archived_delta = 0
    for session_id, new in now.items():
        old = before[session_id]
        if new is old:
            continue
        assert new is not None
        current.append(current_row(new, seal))
        live, archived = counted(old, new)
        live_delta += live
        archived_delta += archived
    return Fold(current, past, live_delta, archived_delta, position, usage)


def counted(old: SessionState | None, new: SessionState) -> tuple[int, int]:
    """What a session's change from ``old`` (None: none) to ``new`` adds to ``rm_meta``'s ``live`` and ``archived``
    counts (-1, 0 or 1 each): a live session is not deleted; an archived one is live and archived."""
    was_live = old is not None and not old.deleted
    live = not new.deleted
    return live - was_live, (live and new.archived) - (was_live and old is not None and old.archived)


def initial_meta(seal: Seal) -> list[tuple[str, int]]:
    """``rm_meta`` of new, empty tables sealed by ``seal``."""
    zero = [("checkpoint", 0), ("floor", 0), ("live", 0), ("archived", 0), ("anchor", 0)]
    return [("version", READ_MODEL_VERSION), *zero, ("seal", seal.key_id)]


def record_log_shorter(backend: Backend, meta: Mapping[str, int], head: int) -> None:
    """The tables had seen the log reach their checkpoint (with its chain link there), and it does not: keep the
    evidence in the store (``registry.evidence``) before they are rebuilt."""
    anchor = meta.get("anchor", 0)
    chain = f"{anchor & 0xFFFF_FFFF_FFFF_FFFF:016x}" if anchor else ""
    backend.record(log_shorter("read model", meta.get("checkpoint", 0), head, chain))


class LogShorter(ReadModelFault):
    """The log's head is below the read model's checkpoint: records were removed from the log's end."""

    def __init__(self, checkpoint: int, head: int) -> None:
        super().__init__(
            f"the log's head ({head}) is below the read model's checkpoint ({checkpoint}): records were removed"
            " from the log's end"
        )
        self.checkpoint = checkpoint
        self.head = head


def anchor_value(chain: bytes | None) -> int:
    """The log's chain link at the checkpoint, as the signed 64-bit integer the tables keep (0: no chain): at
    open, a checkpoint whose link is not the log's (a log cut short, replaced or edited) rebuilds the tables."""
    return 0 if not chain else int.from_bytes(chain[:8], "big", signed=True)


def matches_log(meta: Mapping[str, object], chain_at: Callable[[int], tuple[Any, ...] | None]) -> bool:
    """Whether the tables' checkpoint (``meta``: ``rm_meta``'s rows as stored, an older version's too) is a position
    of this log with the chain link they recorded there; ``chain_at`` reads the log's chain link at a position (its
    row, None when the log has no such position)."""
    checkpoint = meta.get("checkpoint")
    if type(checkpoint) is not int:
        raise ReadModelFault("the read model's rm_meta has no checkpoint row")
    if checkpoint == 0:
        return True
    row = chain_at(checkpoint)
    return row is not None and anchor_value(None if row[0] is None else bytes(row[0])) == meta.get("anchor", 0)


def merge_pages(
    current: Iterable[Keyed], past: Iterable[Keyed], limit: int, seal: Seal
) -> tuple[list[SessionState], bool]:
    """The first ``limit`` states of two row streams in sort-key order, and whether more follow."""
    if isinstance(current, list) and isinstance(past, list) and not past:
        rows = current[: limit + 1]  # a first page, or a walk with no past version in it: nothing to merge
    else:
        rows = list(islice(heapq.merge(current, past, key=lambda row: (row[0], row[1])), limit + 1))
    return checked_states(rows[:limit], seal), len(rows) > limit


def fold_chunk(
    entries: Iterator[Entry],
    load: Callable[[list[str]], dict[str, SessionState]],
    *,
    checkpoint: int,
    head: int,
    floor_at: Callable[[int], int],
    seal: Seal,
) -> tuple[Fold, int] | None:
    """A catch-up's next transaction, on every backend: the next ``CHUNK`` entries of ``entries`` (the log after
    ``checkpoint``) folded, with the window's floor after them - ``floor_at`` the chunk's last position, or the head
    for a new read model (nothing before this build can be asked for); None when no entry is left. One chunk per
    transaction: memory stays bounded, and other writers get their turn."""
    chunk = list(islice(entries, CHUNK))
    if not chunk:
        return None
    new_floor = head if checkpoint == 0 else floor_at(chunk[-1].position)
    return fold_stretch(chunk, load, checkpoint=checkpoint, keep_past_after=new_floor, seal=seal), new_floor


class SnapshotPlan:
    """Kept snapshots a catch-up leaves behind, dumped straight from the tables' rows (which hold exactly the
    states at the checkpoint, already encoded): time travel then starts near any position.

    A long catch-up (a build from the whole log, a large import) dumps at the chunk boundaries that pass the
    positions thinning will keep; a short one dumps when it passes a multiple of ``EVERY``, on a thread of its
    own so that the writer it runs in does not wait (a process that exits first leaves a temporary file, which
    the next snapshot's writer removes; the backend joins the thread when the read model closes). Errors only cost
    the snapshot, with a warning.
    """

    def __init__(self, backend: Backend, start: int, head: int, dump: Callable[[int], object]) -> None:
        from registry.snapshot import EVERY, kept_positions  # noqa: PLC0415 - a catch-up's, not a read's

        self._dump = dump
        self._backend = backend
        self._background = head - start < EVERY
        if backend.store.read_only or head // EVERY == start // EVERY:
            self._targets: list[int] = []
        elif self._background:
            self._targets = [head - head % EVERY]
        else:
            self._targets = sorted(t for t in kept_positions(head) if t > start)

    def passed(self, checkpoint: int) -> None:
        """The catch-up committed ``checkpoint``: keep a snapshot there if it passed a wanted position."""
        if not self._targets or self._targets[0] > checkpoint:
            return
        self._targets = [t for t in self._targets if t > checkpoint]
        if self._background:
            self._backend.in_background(lambda: self._run(checkpoint), "acp-registry snapshot")
        else:
            self._run(checkpoint)

    def _run(self, checkpoint: int) -> None:
        from registry.snapshot import SnapshotError  # noqa: PLC0415

        try:
            self._dump(checkpoint)
        except StoreClosedError:  # the process closed the store meanwhile: the next writer keeps one instead
            log.debug("no snapshot at position %s: the store was closed first", checkpoint)
        except (OSError, SnapshotError, StoreError) as exc:
            log.warning("could not keep a snapshot at position %s: %s", checkpoint, exc)
