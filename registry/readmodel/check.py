"""Checking what is derived from a log against the log: the read model and the kept snapshots (``verify``).

One pass folds the log from its start into a fresh ``Projection`` (the reference fold, trusting nothing derived).
On the way it compares each kept snapshot at its position (a snapshot that cannot be read is a mismatch too), and
collects the versions the read model's ``rm_past`` must hold (those replaced after its floor). At the read model's
checkpoint it then compares everything derived, as stored:

* the schema (tables, columns, indexes, ``rm_meta``'s rows, the version) and what the database finds wrong with
  the tables and their indexes;
* the checkpoint (within the log, with the log's chain link there), the floor, the live count and how many of
  those are archived;
* every column of every ``rm_sessions`` row and every ``rm_past`` row with its position range
  (``tables.current_row`` / ``past_row``: the rows the fold writes), and every daily usage total in ``rm_usage``;
* the list as ``session/list`` reads it, page by page, as of the checkpoint and of earlier positions within the
  window, for every cwd and for none.

Each disagreement is a ``Mismatch`` naming the position, the session and, in its text, the table and the field.
A read model that cannot even be read is a mismatch, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from events.errors import CorruptEventError, StoreClosedError, StoreError
from events.model import SessionUpdated
from registry.backend import Backend
from registry.filters import ListFilter
from registry.model import SessionState
from registry.projection import Projection, paused_gc
from registry.readmodel import ReadModel, ReadModelFault, StoredTables
from registry.readmodel.keys import Seal
from registry.readmodel.tables import CURRENT_COLUMNS, PAST_COLUMNS, VALID_TO, Row, current_row, past_row
from registry.readmodel.usage_tables import COLUMNS as USAGE_COLUMNS
from registry.readmodel.usage_tables import DAYS_KEY, day_rows, usage_rows
from registry.readmodel.usage_tables import KEY as USAGE_KEY
from registry.snapshot import SnapshotError, oddities, read_snapshot, snapshots
from registry.usage import UsageKey, fold_usage

if TYPE_CHECKING:
    from events.store import EventStore

__all__ = ["Mismatch", "ReadModelCheck", "check_read_model"]

_WALKS = 3
"""Earlier positions within the window whose lists are walked too."""


class Mismatch(NamedTuple):
    position: int
    session_id: str | None
    problem: str


class ReadModelCheck(NamedTuple):
    kind: str
    checkpoint: int
    floor: int
    sessions: int
    snapshots: int
    """Kept snapshots compared."""
    mismatches: list[Mismatch]


class _Reference(NamedTuple):
    fold: Projection
    past: dict[tuple[str, int], Row]
    lists: dict[int, dict[str | None, list[str]]]
    """The list (all cwds: None; each cwd) at a few positions within the window."""
    usage: dict[UsageKey, list[int]]
    """The daily usage totals (``rm_usage``) at the checkpoint."""


def check_read_model(
    backend: Backend, read_model: ReadModel, *, report: Callable[[int], None] | None = None
) -> ReadModelCheck:
    """Compare ``read_model`` with the fold of the log of ``backend``'s store up to its checkpoint (without catching
    it up)."""
    store = backend.store
    head = store.head()
    problems: list[Mismatch] = []
    for position, snapshot_path in snapshots(backend):  # one that saw the log reach further: its tail was cut
        if position > head:
            problems.append(
                Mismatch(
                    position,
                    None,
                    f"kept snapshot {snapshot_path} reflects position {position}, beyond the log's head"
                    f" ({head}): records at the log's end were removed",
                )
            )
    problems += [Mismatch(0, None, f"kept snapshots: {oddity}") for oddity in oddities(backend)]
    stored = read_model.tables
    schema = [] if stored is None else stored.schema_problems()
    problems += [Mismatch(0, None, f"the read model's schema: {problem}") for problem in schema]
    tables = stored is not None
    meta = _read(problems, "rm_meta", stored.stored_meta) if stored is not None and not schema else {}
    checkpoint = meta.get("checkpoint", read_model.position) if meta is not None else read_model.position
    floor = (meta or {}).get("floor", 0) if tables else read_model.window_floor()
    if checkpoint > head:
        problems.append(
            Mismatch(
                checkpoint,
                None,
                f"rm_meta.checkpoint is beyond the log's head ({head}): records at the log's end were removed",
            )
        )
        return ReadModelCheck(read_model.kind, checkpoint, floor, 0, 0, problems)
    kept_snapshots = [(position, path) for position, path in snapshots(backend) if position <= checkpoint]
    for position, path in snapshots(backend):  # past the checkpoint (the tables lag): read, not compared
        if checkpoint < position <= head:
            try:
                read_snapshot(path, store)
            except SnapshotError as exc:
                problems.append(Mismatch(position, None, f"kept snapshot {path} {exc}"))
    seal = _seal(backend, problems) if tables and not schema and meta is not None else None
    reference = _fold(store, checkpoint, floor, kept_snapshots, problems, report, seal)
    expected = reference.fold.states()
    if stored is not None and seal is not None and meta is not None:
        counts = len(reference.fold), reference.fold.archived_count()
        problems += _check_meta(stored, meta, checkpoint, floor, counts)
        problems += [Mismatch(checkpoint, None, f"the database finds: {line}") for line in stored.storage_problems()]
        problems += _check_rows(stored, checkpoint, expected, reference.past, seal)
        problems += _check_usage(stored, checkpoint, reference.usage)
    elif not tables:
        problems += _check_states(read_model, checkpoint, expected)
    if not problems:  # the rows agree (or there are none): the answers must too, walked as a client walks them
        problems += _check_walks(read_model, checkpoint, reference)
    return ReadModelCheck(read_model.kind, checkpoint, floor, len(expected), len(kept_snapshots), problems)


def _read(problems: list[Mismatch], what: str, read: Callable[[], Any]) -> Any:
    """``read()``, or None with a mismatch saying why it could not be read."""
    try:
        return read()
    except (StoreClosedError, CorruptEventError):
        raise
    except (ReadModelFault, StoreError) as exc:
        problems.append(Mismatch(0, None, f"{what} cannot be read: {exc}"))
        return None


def _seal(backend: Backend, problems: list[Mismatch]) -> Seal | None:
    """The seal the tables' rows must carry, or None (and a mismatch) when its key cannot be had."""
    try:
        return Seal(backend.seal_key())
    except ReadModelFault as exc:
        problems.append(Mismatch(0, None, f"the rows cannot be checked: {exc}"))
        return None


def _fold(
    store: EventStore,
    checkpoint: int,
    floor: int,
    kept: list[tuple[int, Path]],
    problems: list[Mismatch],
    report: Callable[[int], None] | None,
    seal: Seal | None,
) -> _Reference:
    reference = Projection(window=0)
    past: dict[tuple[str, int], Row] = {}
    span = checkpoint - floor
    walk_at = sorted({checkpoint - span * k // _WALKS for k in range(1, _WALKS)} - {checkpoint}) if span > 1 else []
    lists: dict[int, dict[str | None, list[str]]] = {}
    usage: dict[UsageKey, list[int]] = {}
    with paused_gc():
        for stop, path in [*sorted(kept), (checkpoint, None)]:
            for count, entry in enumerate(store.scan(reference.position, until=stop)):
                while walk_at and entry.position > walk_at[0]:
                    lists[walk_at.pop(0)] = _lists(reference.sessions())
                change = reference.apply(entry)
                event = entry.event
                if change is not None and type(event) is SessionUpdated and event.usage is not None:
                    fold_usage(usage, event.at, change.after.agent, change.after.cwd, event.usage)
                if seal is not None and change is not None and change.before is not None and change.position > floor:
                    past[(entry.session_id, change.before.position)] = past_row(change.before, change.position, seal)
                if report is not None and count % 4096 == 0:
                    report(entry.position)
            if path is not None:
                problems.extend(_compare_snapshot(store, path, reference))
    for position in walk_at:
        lists[position] = _lists(reference.sessions())
    lists[checkpoint] = _lists(reference.sessions())
    return _Reference(reference, past, lists, usage)


def _lists(states: Iterable[SessionState]) -> dict[str | None, list[str]]:
    lists: dict[str | None, list[str]] = {None: []}
    for state in states:
        lists[None].append(state.session_id)
        lists.setdefault(state.cwd, []).append(state.session_id)
    return lists


def _check_meta(
    stored: StoredTables, meta: dict[str, int], checkpoint: int, floor: int, counts: tuple[int, int]
) -> list[Mismatch]:
    """``counts``: the log's live sessions and how many of them are archived, at the checkpoint."""
    problems = []
    for key, what, value in zip(("live", "archived"), ("live sessions", "archived live sessions"), counts, strict=True):
        if meta.get(key) != value:
            problems.append(Mismatch(checkpoint, None, f"rm_meta.{key} counts {meta.get(key)} {what}, the log {value}"))
    if floor > checkpoint:
        problems.append(Mismatch(checkpoint, None, f"rm_meta.floor ({floor}) is past the checkpoint ({checkpoint})"))
    if not stored.checkpoint_matches_log():
        problems.append(
            Mismatch(checkpoint, None, "rm_meta.anchor is not the log's chain link at the checkpoint: the log changed")
        )
    return problems


def _differences(table: str, kept: tuple[Any, ...], expected: Row, seal: Seal) -> list[str]:
    """The fields of a stored row that are not what the fold writes (the state blob compared opened)."""
    found = []
    names = CURRENT_COLUMNS if table == "rm_sessions" else PAST_COLUMNS
    for name, have, want in zip(names, kept, expected, strict=True):
        if name == "state":
            try:
                same = seal.open(bytes(have)) == seal.open(want)
            except (ReadModelFault, TypeError) as exc:
                found.append(f"{table}.state cannot be read: {exc}")
                continue
            if not same:
                found.append(f"{table}.state differs from the fold of the log")
        elif (bool(have) if isinstance(want, bool) else have) != want:
            found.append(f"{table}.{name} is {have!r}, the log says {want!r}")
    return found


def _check_rows(
    stored: StoredTables,
    checkpoint: int,
    expected: dict[str, SessionState],
    past: dict[tuple[str, int], Row],
    seal: Seal,
) -> list[Mismatch]:
    problems: list[Mismatch] = []
    seen: set[str] = set()
    for row in stored.stored("rm_sessions"):
        session_id = str(row[0])
        seen.add(session_id)
        state = expected.get(session_id)
        if state is None:
            problems.append(Mismatch(checkpoint, session_id, "rm_sessions holds a row for a session the log lacks"))
            continue
        want = current_row(state, seal)
        problems += [Mismatch(checkpoint, session_id, why) for why in _differences("rm_sessions", row, want, seal)]
    for session_id in sorted(expected.keys() - seen):
        problems.append(Mismatch(checkpoint, session_id, "rm_sessions lacks the session's row"))
    seen_past: set[tuple[str, int]] = set()
    for row in stored.stored("rm_past"):
        key = (str(row[0]), int(row[4]))
        seen_past.add(key)
        wanted = past.get(key)
        if wanted is None:
            problems.append(
                Mismatch(int(row[5]), key[0], f"rm_past holds a version valid from {key[1]} that the log lacks")
            )
            continue
        problems += [Mismatch(wanted[VALID_TO], key[0], why) for why in _differences("rm_past", row, wanted, seal)]
    for session_id, valid_from in sorted(past.keys() - seen_past):
        problems.append(
            Mismatch(
                past[(session_id, valid_from)][VALID_TO],
                session_id,
                f"rm_past lacks the version valid from {valid_from}",
            )
        )
    return problems


def _check_usage(stored: StoredTables, checkpoint: int, usage: dict[UsageKey, list[int]]) -> list[Mismatch]:
    """Every row of ``rm_usage`` and ``rm_usage_days`` against the daily totals folded from the log (a row the log
    does not make, one it makes that is missing, a sum that differs)."""
    problems: list[Mismatch] = []
    expected_rows: list[tuple[str, list[Any], tuple[str, ...]]] = [
        ("rm_usage", list(usage_rows(usage)), USAGE_KEY),
        ("rm_usage_days", list(day_rows(usage)), DAYS_KEY),
    ]
    for table, rows, key_names in expected_rows:
        fields = USAGE_COLUMNS[table]
        expected = {tuple(row[: len(key_names)]): row for row in rows}
        seen = set()
        for row in stored.stored(table):
            key = tuple(row[: len(key_names)])
            seen.add(key)
            want = expected.get(key)
            where = _usage_row(table, key_names, key)
            if want is None:
                problems.append(Mismatch(checkpoint, None, f"{where} holds totals of turns the log lacks"))
                continue
            for name, have, value in zip(fields, row, want, strict=True):
                if have != value:
                    problems.append(Mismatch(checkpoint, None, f"{where}: {name} is {have!r}, the log says {value!r}"))
        for key in sorted(expected.keys() - seen):
            problems.append(Mismatch(checkpoint, None, f"{table} lacks the {_usage_row(table, key_names, key)}"))
    return problems


def _usage_row(table: str, names: tuple[str, ...], key: tuple[Any, ...]) -> str:
    """A daily total's key for people: ``rm_usage row (cwd /w, model m, currency -, agent codex, day 2026-12-07)``."""
    import datetime as dt  # noqa: PLC0415

    shown = [
        f"{name} {(dt.date(1970, 1, 1) + dt.timedelta(days=int(value))).isoformat() if name == 'day' else value or '-'}"
        for name, value in zip(names, key, strict=True)
    ]
    return f"{table} row ({', '.join(shown)})"


def _check_states(read_model: ReadModel, checkpoint: int, expected: dict[str, SessionState]) -> list[Mismatch]:
    """A read model without tables: its sessions and live count."""
    problems = []
    found = {state.session_id: state for state in read_model.states()}
    for session_id in sorted(expected.keys() | found.keys()):
        if expected.get(session_id) != found.get(session_id):
            problems.append(Mismatch(checkpoint, session_id, "the session differs between the read model and the log"))
    return problems


def _check_walks(read_model: ReadModel, checkpoint: int, reference: _Reference) -> list[Mismatch]:
    """The list as ``session/list`` walks it, page by page, at each position, for every cwd and for none."""
    problems = []
    for position, lists in sorted(reference.lists.items()):
        cwds: list[str | None] = [None, *sorted(k for k in lists if k is not None)]
        for cwd in cwds:
            where = "the list" if cwd is None else f"the list of cwd {cwd}"
            try:
                walked = _walk(read_model, position, cwd)
            except (StoreClosedError, CorruptEventError):
                raise
            except (ReadModelFault, StoreError, ValueError) as exc:
                problems.append(Mismatch(position, None, f"{where} as of position {position} cannot be read: {exc}"))
                continue
            want = lists[cwd]
            if walked != want:
                first = next(
                    (i for i, (a, b) in enumerate(zip(walked, want, strict=False)) if a != b),
                    min(len(walked), len(want)),
                )
                session = next(iter(walked[first : first + 1] or want[first : first + 1]), None)
                problems.append(
                    Mismatch(
                        position, session, f"{where} as of position {position} departs from the log's at entry {first}"
                    )
                )
    return problems


def _walk(read_model: ReadModel, as_of: int, cwd: str | None) -> list[str]:
    pages = read_model.pages(as_of=as_of, where=ListFilter(cwd=cwd, archived="include"), limit=1000)
    return [s.session_id for page in pages for s in page.states]


def _compare_snapshot(store: EventStore, path: Path, reference: Projection) -> list[Mismatch]:
    position = reference.position
    try:
        snapshot = read_snapshot(path, store)
    except SnapshotError as exc:
        return [Mismatch(position, None, f"kept snapshot {path} {exc}")]
    kept = {state.session_id: state for state in snapshot.sessions}
    expected = reference.states()
    return [
        Mismatch(position, session_id, f"kept snapshot {path}: the session differs from the fold of the log")
        for session_id in sorted(expected.keys() | kept.keys())
        if expected.get(session_id) != kept.get(session_id)
    ]
