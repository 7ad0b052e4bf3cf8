"""Opening a store's read model, and a read model that never answers from tables it cannot trust, and never fails a
command for derived data.

``open_read_model(backend)`` opens the read model a store's backend keeps (tables, or the log folded in memory) and
wraps tables in ``GuardedReadModel``. The tables' schema is
checked when they open (``tables.prepare_tables``); while serving, a fault of the tables - a row or blob that does
not decode, a table, column, index or ``rm_meta`` row that is gone, tables that can no longer be written (a full
disk, a file made read-only) - is met the same way everywhere:

1. one warning line naming the store and the fault;
2. the tables are rebuilt from the log and the call answered from them;
3. where that fails too (the tables cannot be written), the log is folded in memory and serves, read-only as far
   as the tables go, for the rest of the process (one more line says so);
4. only if the log cannot be folded either does the call fail, with one ``ReadModelFault`` naming
   ``acp-registry rebuild`` (and the store's own error, when the log itself is the problem).

Errors that are not the tables' (the store closed, a server gone, the log's own records corrupt) pass through
untouched: rebuilding would not help and must not hide them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final, TypeVar

from events.errors import CorruptEventError, StoreClosedError, StoreError
from events.logger import Logger
from registry.backend import Backend
from registry.filters import ListFilter
from registry.model import SessionState
from registry.readmodel import DEFAULT_WINDOW, Page, PastWindow, ReadModel, ReadModelFault, StoredTables
from registry.readmodel.tables import LogShorter, record_log_shorter

if TYPE_CHECKING:
    from registry.readmodel.usage_tables import UsageGroup, UsageQuery

__all__ = ["GuardedReadModel", "as_they_are", "fault_of", "open_read_model"]

log = Logger("registry.readmodel")

_T = TypeVar("_T")

_MISSING_OBJECT: Final = (
    "no such table",
    "no such column",
    "no such index",
    "has no column named",
    "Could not decode to UTF-8",  # a blob column edited into text
)
# A full disk, a read-only file, and a constraint the tables' own writes break: no row the fold writes breaks one
# of the declared constraints, so what does is an object added to the tables (a trigger that refuses writes).
_SQLITE_CANNOT_WRITE: Final = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_CONSTRAINT,
}
_PG_MISSING_OBJECT: Final = {"42P01", "42703", "42704"}  # undefined table, column, object
# Disk full, read-only transaction, insufficient privilege, an exception raised by a trigger or rule (P0001), an
# integrity constraint broken (class 23).
_PG_CANNOT_WRITE: Final = {"53100", "25006", "42501", "P0001"}


def fault_of(exc: BaseException) -> str | None:
    """Why ``exc`` is a fault of the read model's tables (one short phrase), or None when it is not theirs."""
    if isinstance(exc, ReadModelFault):
        return str(exc)
    if isinstance(exc, StoreClosedError | CorruptEventError) or not isinstance(exc, StoreError):
        return None
    cause: BaseException | None = exc.__cause__
    while cause is not None:
        if isinstance(cause, sqlite3.Error):
            text = str(cause)
            if any(phrase in text for phrase in _MISSING_OBJECT):
                return f"its tables are damaged ({text})"
            if getattr(cause, "sqlite_errorcode", 0) & 0xFF in _SQLITE_CANNOT_WRITE:
                return f"its tables cannot be written ({text})"
            return None
        state = getattr(cause, "sqlstate", None)
        if isinstance(state, str):
            if state in _PG_MISSING_OBJECT:
                return f"its tables are damaged ({' '.join(str(cause).split())})"
            if state in _PG_CANNOT_WRITE or state.startswith("23"):
                return f"its tables cannot be written ({' '.join(str(cause).split())})"
            return None
        cause = cause.__cause__
    return None


def _as_asked(page: Page, where: ListFilter) -> Page:
    """``page`` if each of its states is one the query asked for: else a row's columns were edited apart from it."""
    state = where.outside(page.states)
    if state is not None:
        raise ReadModelFault(
            f"the read model's row of {state.session_id!r} does not match its state (edited or damaged)"
        )
    return page


@contextlib.contextmanager
def as_they_are() -> Iterator[None]:
    """Tables looked at as they are (``catch_up=False``): their faults are for ``verify`` to report, not to raise."""
    try:
        yield
    except Exception as exc:
        if fault_of(exc) is None:
            raise


class GuardedReadModel(ReadModel):
    """``model`` (tables), rebuilt from the log on a fault, else replaced by the fold of the log in memory."""

    def __init__(self, backend: Backend, model: ReadModel) -> None:
        self.window = model.window
        self._backend = backend
        self._model = model
        self._location = backend.location
        self._lock = threading.Lock()

    @property
    def inner(self) -> ReadModel:
        """The read model answering now (the tables, or the in-memory fold that replaced them)."""
        return self._model

    @property
    def position(self) -> int:
        return self._model.position

    def _serve(self, call: Callable[[ReadModel], _T]) -> _T:
        model = self._model
        try:
            return call(model)
        except Exception as exc:
            why = fault_of(exc)
            if why is None:
                raise
            if isinstance(exc, LogShorter):  # evidence first: the rebuild forgets how far the log reached
                record_log_shorter(self._backend, model.tables.stored_meta() if model.tables else {}, exc.head)
        self._recover(model, why)
        try:
            return call(self._model)
        except Exception as exc:
            again = fault_of(exc)
            if again is None:
                raise
            raise ReadModelFault(
                f"{self._location}: the read model cannot answer ({again}); run `acp-registry rebuild`"
            ) from None

    def _recover(self, model: ReadModel, why: str) -> None:
        """Rebuild ``model`` from the log, or replace it by the fold of the log in memory (once per fault)."""
        with self._lock:
            if self._model is not model:
                return  # another thread recovered first
            if model.kind == "tables":
                if model.reseal():
                    log.warning(
                        "%s: the read model's seal key was made again by another process (the one read here was"
                        " lost); its tables are sealed with it and serve",
                        self._location,
                    )
                    return
                log.warning("%s: the read model cannot serve (%s); rebuilding it from the log", self._location, why)
                try:
                    model.rebuild()
                    return
                except Exception as exc:
                    if fault_of(exc) is None and not isinstance(exc, StoreError):
                        raise
                    why = fault_of(exc) or str(exc)
            log.warning(
                "%s: the read model's tables cannot be rebuilt (%s); answering from the log folded in memory,"
                " read-only (run `acp-registry rebuild` where the store can be written)",
                self._location,
                why,
            )
            from registry.readmodel.memory import MemoryReadModel  # noqa: PLC0415 - a fault's fallback only

            replacement = MemoryReadModel(self._backend, window=self.window)
            model.close()
            self._model = replacement

    def catch_up(self, to: int | None = None) -> int:
        return self._serve(lambda m: m.catch_up(to))

    def window_floor(self) -> int:
        return self._serve(lambda m: m.window_floor())

    def page(self, *, as_of: int, after: tuple[int, str] | None, where: ListFilter, limit: int) -> Page:
        def page(model: ReadModel) -> Page:
            return _as_asked(model.page(as_of=as_of, after=after, where=where, limit=limit), where)

        return self._serve(page)

    def first_page(self, *, where: ListFilter, limit: int) -> tuple[int, Page]:
        def first_page(model: ReadModel) -> tuple[int, Page]:
            as_of, found = model.first_page(where=where, limit=limit)
            return as_of, _as_asked(found, where)

        return self._serve(first_page)

    def get(self, session_id: str) -> SessionState | None:
        def get(model: ReadModel) -> SessionState | None:
            state = model.get(session_id)
            if state is not None and state.session_id != session_id:
                raise ReadModelFault(f"the read model's row of {session_id!r} holds another session's state")
            return state

        return self._serve(get)

    def last_seen(self, session_id: str) -> SessionState | None:
        state = self._serve(lambda model: model.last_seen(session_id))
        return state if state is None or state.session_id == session_id else self.get(session_id)

    def forks(self, session_id: str) -> list[SessionState]:
        def forks(model: ReadModel) -> list[SessionState]:
            found = model.forks(session_id)
            if any(state.parent is None or state.parent.session_id != session_id for state in found):
                raise ReadModelFault(f"the read model's parent column of a fork of {session_id!r} was edited")
            return found

        return self._serve(forks)

    def state_at(self, session_id: str, position: int) -> SessionState | PastWindow | None:
        return self._serve(lambda m: m.state_at(session_id, position))

    def count(self) -> int:
        return self._serve(lambda m: m.count())

    def cwd_counts(self) -> dict[str, int]:
        return self._serve(lambda m: m.cwd_counts())

    def archived_count(self, cwd: str | None = None) -> int:
        return self._serve(lambda m: m.archived_count(cwd))

    def usage(self, query: UsageQuery) -> list[UsageGroup]:
        return self._serve(lambda m: m.usage(query))

    def states(self) -> Iterator[SessionState]:
        return self._serve(lambda m: iter(list(m.states())))

    def rebuild(self) -> int:
        return self._serve(lambda m: m.rebuild())

    @property
    def tables(self) -> StoredTables | None:
        return self._model.tables  # ``verify`` looks at what is stored as it is: no rebuild here

    def close(self) -> None:
        """Release the tables (or the fold), once the snapshot being kept in the background is written."""
        self._backend.join_background()
        self._model.close()


def open_read_model(
    backend: Backend, *, window: int = DEFAULT_WINDOW, kind: str | None = None, catch_up: bool = True
) -> ReadModel:
    """The read model ``backend``'s store keeps: its tables (SQLite, PostgreSQL), the in-memory fold otherwise.

    ``kind="memory"`` forces the in-memory fold (a reference, or a comparison in benchmarks). Tables whose schema
    is not this version's are rebuilt from the log at open (one warning line); a read-only SQLite file whose tables
    are missing or behind its log, or tables that cannot be made at all (a full disk), are folded in memory, with
    a warning. The tables are then guarded while serving (``GuardedReadModel``). ``catch_up=False`` opens the
    tables as they are, unguarded and unrepaired (``verify`` looks at them before anything folds into them).
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be an int >= 0, got {window!r}")
    if kind not in (None, "memory", "tables"):
        raise ValueError(f"kind must be 'memory' or 'tables', got {kind!r}")
    if kind != "memory":
        if kind == "tables" and backend.name not in ("sqlite", "postgresql"):
            raise ValueError(f"{type(backend.store).__name__} keeps no read-model tables")
        try:
            tables = backend.tables(window=window, catch_up=catch_up)
        except Exception as exc:
            why = fault_of(exc)
            if why is None:
                raise
            if catch_up:
                tables = _rebuilt(backend, window, why)
            else:  # looked at as they are, and there are none to look at (they cannot even be made)
                log.warning(
                    "%s: the read model's tables cannot be made (%s); folding the log in memory", backend.location, why
                )
                tables = None
        if tables is not None:
            return GuardedReadModel(backend, tables) if catch_up else tables
    from registry.readmodel.memory import MemoryReadModel  # noqa: PLC0415 - not loaded by a store with tables

    return MemoryReadModel(backend, window=window)


def _rebuilt(backend: Backend, window: int, why: str) -> ReadModel | None:
    """Tables that failed while opening, rebuilt from the log; None (fold in memory) when they cannot be."""
    log.warning("%s: the read model cannot serve (%s); rebuilding it from the log", backend.location, why)
    tables = None
    try:
        tables = backend.tables(window=window, catch_up=False)
        if tables is not None:
            tables.rebuild()
        return tables
    except Exception as exc:
        if fault_of(exc) is None and not isinstance(exc, StoreError):
            raise
        if tables is not None:
            tables.close()
        log.warning(
            "%s: the read model's tables cannot be rebuilt (%s); answering from the log folded in memory, read-only"
            " (run `acp-registry rebuild` where the store can be written)",
            backend.location,
            fault_of(exc) or exc,
        )
        return None
