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
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from itertools import islice
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from events.errors import StoreClosedError, StoreError, StoreFormatError
from registry.model import SessionState, sort_key
from registry.projection import Entry, fold
from registry.snapshot import EVERY, SnapshotError, kept_positions

if TYPE_CHECKING:
    from events.store import EventStore

log = logging.getLogger(__name__)

__all__ = [
    "INITIAL_META",
    "READ_MODEL_VERSION",
    "CurrentRow",
    "Fold",
    "PastRow",
    "SnapshotPlan",
    "anchor_value",
    "decode_state",
    "encode_state",
    "fold_stretch",
    "merge_pages",
    "prepare_tables",
]

READ_MODEL_VERSION: Final = 4
"""Bumped whenever the tables or the fold's meaning change: an older version is rebuilt from the log on open,
a newer one is refused untouched."""

CHUNK: Final = 50_000
"""Events folded per transaction when a read model catches up a long stretch (memory stays bounded)."""

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(SessionState)
encode_state = _encoder.encode
decode_state = _decoder.decode


class CurrentRow(NamedTuple):
    session_id: str
    cwd: str
    rank: int
    live: bool
    valid_from: int
    state: bytes
    archived: bool
    agent: str | None


class PastRow(NamedTuple):
    session_id: str
    cwd: str
    rank: int
    live: bool
    valid_from: int
    valid_to: int
    state: bytes
    archived: bool
    agent: str | None


class Fold(NamedTuple):
    """What one stretch of the log does to the tables."""

    current: list[CurrentRow]
    past: list[PastRow]
    live_delta: int
    position: int
    """The last position folded (the new checkpoint)."""


def fold_stretch(
    entries: Iterable[Entry],
    load: Callable[[list[str]], dict[str, SessionState]],
    *,
    checkpoint: int,
    keep_past_after: int,
) -> Fold:
    """Fold ``entries`` (the log after ``checkpoint``, in order) into the rows to write.

    ``load`` returns the rows' current states for session ids not seen yet in this stretch (a bulk look-up);
    a past row is kept only when it is valid after ``keep_past_after`` (older ones would be pruned at once).
    """
    before: dict[str, SessionState | None] = {}
    now: dict[str, SessionState | None] = {}
    past: list[PastRow] = []
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
                past.append(
                    PastRow(
                        session_id,
                        old.cwd,
                        sort_key(old)[0],
                        not old.deleted,
                        old.position,
                        entry.position,
                        encode_state(old),
                        old.archived,
                        old.agent,
                    )
                )
        pending.clear()

    for entry in entries:
        position = entry.position
        pending.append(entry)
        if len(pending) >= 5_000:
            flush()
    flush()

    current: list[CurrentRow] = []
    live_delta = 0
    for session_id, new in now.items():
        old = before[session_id]
        if new is old:
            continue
        assert new is not None
        current.append(
            CurrentRow(
                session_id,
                new.cwd,
                sort_key(new)[0],
                not new.deleted,
                new.position,
                encode_state(new),
                new.archived,
                new.agent,
            )
        )
        live_delta += (not new.deleted) - (old is not None and not old.deleted)
    return Fold(current, past, live_delta, position)


INITIAL_META: Final = (("version", READ_MODEL_VERSION), ("checkpoint", 0), ("floor", 0), ("live", 0), ("anchor", 0))
"""``rm_meta`` of new, empty tables."""


def prepare_tables(
    location: str,
    *,
    version: Callable[[], int | None],
    matches_log: Callable[[], bool],
    exclusively: Callable[[], AbstractContextManager[object]],
    create: Callable[[], None],
    repair: bool,
) -> None:
    """Make the tables usable, the same way on every backend: create them when missing, rebuild an older
    version's and (``repair``) tables whose checkpoint does not match the log, refuse a newer version untouched.
    The decision is taken again ``exclusively`` (under the backend's lock), as another process may have just made
    them."""
    found = version()
    if found == READ_MODEL_VERSION:
        if not repair or matches_log():
            return
        log.warning(
            "%s: the read model's checkpoint does not match the log (a log cut short or replaced?); rebuilding it "
            "from the log",
            location,
        )
    if found is not None and found > READ_MODEL_VERSION:
        raise StoreFormatError(
            location,
            f"its read model has version {found}; this version of acp-session-registry knows up to "
            f"{READ_MODEL_VERSION}. Upgrade it; the store was left untouched",
        )
    with exclusively():
        if version() != READ_MODEL_VERSION or (repair and not matches_log()):
            create()


def anchor_value(chain: bytes | None) -> int:
    """The log's chain link at the checkpoint, as the signed 64-bit integer the tables keep (0: no chain): at
    open, a checkpoint whose link is not the log's (a log cut short, replaced or edited) rebuilds the tables."""
    return 0 if not chain else int.from_bytes(chain[:8], "big", signed=True)


Keyed = tuple[int, str, bytes]
"""A page row: rank, session id, encoded state."""


def merge_pages(current: Iterable[Keyed], past: Iterable[Keyed], limit: int) -> tuple[list[SessionState], bool]:
    """The first ``limit`` states of two row streams in sort-key order, and whether more follow."""
    rows = list(islice(heapq.merge(current, past, key=lambda row: (row[0], row[1])), limit + 1))
    more = len(rows) > limit
    return [decode_state(row[2]) for row in rows[:limit]], more


def chunks(entries: Iterator[Entry], size: int = CHUNK) -> Iterator[list[Entry]]:
    """The log in lists of ``size`` entries (a long catch-up commits once per chunk)."""
    while True:
        chunk = list(islice(entries, size))
        if not chunk:
            return
        yield chunk


class SnapshotPlan:
    """Kept snapshots a catch-up leaves behind, dumped straight from the tables' rows (which hold exactly the
    states at the checkpoint, already encoded): time travel then starts near any position.

    A long catch-up (a build from the whole log, a large import) dumps at the chunk boundaries that pass the
    positions thinning will keep; a short one dumps when it passes a multiple of ``EVERY``, on a thread of its
    own so that the writer it runs in does not wait (a process that exits first leaves a temporary file, which
    the next snapshot's writer removes). Errors only cost the snapshot, with a warning.
    """

    def __init__(self, store: EventStore, start: int, head: int, dump: Callable[[int], object]) -> None:
        self._dump = dump
        self._background = head - start < EVERY
        if getattr(store, "read_only", False) or head // EVERY == start // EVERY:
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
            threading.Thread(target=self._run, args=(checkpoint,), name="acp-registry snapshot", daemon=True).start()
        else:
            self._run(checkpoint)

    def _run(self, checkpoint: int) -> None:
        try:
            self._dump(checkpoint)
        except StoreClosedError:  # the process closed the store meanwhile: the next writer keeps one instead
            log.debug("no snapshot at position %s: the store was closed first", checkpoint)
        except (OSError, SnapshotError, StoreError) as exc:
            log.warning("could not keep a snapshot at position %s: %s", checkpoint, exc)
