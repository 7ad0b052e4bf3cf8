"""How a command reaches the log: decide from a session's state, append with its version as expected, read your
own write. ``SessionRegistry`` (``registry.service``) runs every command through one ``CommandWriter``; the one
retry loop (``retried``) is the importers' too.

Rules kept here: an append names the version it decided from, so a decision made from a stale state is refused
(``ConcurrencyError``) and made again from a fresh read, ``RETRIES`` times at most; nothing changes a deleted
session; and the log decides what was committed - once an append returned, the command answers success, whatever
fails after the commit (the read model that cannot follow it now is caught up or rebuilt before the next answer;
the answer is then folded from the session's own events).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from events.errors import ConcurrencyError, StoreClosedError
from events.logger import Logger
from events.model import Event, SessionCreated
from events.store import NO_STREAM, Content, EventStore
from registry.commands import check_session_id
from registry.errors import SessionDeletedError, SessionExists, SessionNotFound
from registry.fold import fold, restorable
from registry.follow import Follower
from registry.model import SessionInfo, SessionState, session_info
from registry.readmodel import ReadModel

__all__ = ["RETRIES", "CommandWriter", "retried"]

RETRIES: Final = 20
"""Tries of a write whose expected version another writer keeps beating (each try reads and decides again)."""

log = Logger(__name__)

_T = TypeVar("_T")


def retried(attempt: Callable[[], _T], conflicts: tuple[type[Exception], ...] = (ConcurrencyError,)) -> _T:
    """``attempt()``, tried again while another writer got there first (it raises one of ``conflicts``: the next
    try reads again and decides again), ``RETRIES`` times at most; then the last conflict is raised as it was,
    with the versions it knew."""
    for _ in range(RETRIES - 1):
        try:
            return attempt()
        except conflicts:
            continue
    return attempt()


class CommandWriter:
    """Appends what commands decide, and brings the read model (and the listeners) up to each append."""

    def __init__(
        self, store: EventStore, read_model: ReadModel, follower: Follower, *, additional_directories: bool
    ) -> None:
        self._store = store
        self._read_model = read_model
        self._follower = follower
        self._additional_directories = additional_directories

    def fresh_state(self, session_id: str) -> SessionState | None:
        """A session's state as the log has it now (the read model caught up first)."""
        self._read_model.catch_up()
        return self._read_model.get(session_id)

    def create(self, session_id: str, event: SessionCreated) -> SessionInfo:
        """Append a session's creation (its stream must not exist: ``SessionExists``) and answer its info."""
        try:
            positions = self._store.append(session_id, [event], NO_STREAM)
        except ConcurrencyError:
            raise SessionExists(session_id) from None
        self.applied(positions[-1])
        return self.written(session_id)

    def write(
        self,
        session_id: str,
        make: Callable[[SessionState], list[Event]],
        *,
        missing_ok: bool = False,
        content: Content | None = None,
    ) -> None:
        """Append what ``make`` decides from the current state, with that state's version as expected; ``content``:
        the messages its events refer to (``EventStore.append``), one entry per event ``make`` returns."""
        check_session_id(session_id)
        # The first try decides from the state this process last saw, without catching up (a round trip on a
        # shared store): the append's expected version refuses a stale state (ConcurrencyError), and whatever a
        # stale state would refuse or find nothing to do is decided again from a fresh read; every later try
        # (another writer was first) reads afresh.
        last_seen = [self._read_model.last_seen(session_id)]

        def attempt() -> None:
            state = last_seen.pop() if last_seen else None
            events = [] if state is None or state.deleted else make(state)
            if state is None or not events:
                state = self.fresh_state(session_id)
                if state is None or state.deleted:
                    if missing_ok:
                        return
                    raise SessionNotFound(session_id) if state is None else SessionDeletedError(session_id)
                events = make(state)
                if not events:
                    return
            positions = self._store.append(session_id, events, state.version, content=content)
            self.applied(positions[-1])

        retried(attempt)

    def restore(self, session_id: str, event: SessionCreated) -> bool:
        """Append ``event`` to a session a proxy retired as not kept (``registry.fold.restorable``), which the
        fold reads as its restoration; False when there was nothing to restore (live already: another writer was
        first). A user's deletion is never undone: ``SessionDeletedError``; no session: ``SessionNotFound``."""
        check_session_id(session_id)

        def attempt() -> bool:
            state = self.fresh_state(session_id)
            if state is None:
                raise SessionNotFound(session_id)
            if not state.deleted:
                return False
            if not restorable(state):
                raise SessionDeletedError(session_id)
            positions = self._store.append(session_id, [event], state.version)
            self.applied(positions[-1])
            return True

        return retried(attempt)

    def applied(self, position: int) -> None:
        """Read-your-writes: the read model (and, without a follower thread, the listeners) reach ``position``;
        a read model that cannot is left stale (logged), never turning a committed command into a failure."""
        try:
            self._read_model.catch_up(position)
        except Exception as exc:
            if isinstance(exc, StoreClosedError):
                raise
            log.warning("the read model is behind a committed write (%s); it catches up before the next answer", exc)
        self._follower.pump()

    def written(self, session_id: str) -> SessionInfo:
        """The info of a session just written: what the read model holds (no catch-up first), else - it cannot
        say, or has not followed the write - the fold of the session's own events from the log. Never a failure
        for derived data: the write committed."""
        try:
            state = self._read_model.get(session_id)
        except Exception as exc:
            if isinstance(exc, StoreClosedError):
                raise
            state = None
        if state is None or state.deleted:
            state = None
            for recorded in self._store.read_stream(session_id):
                state = fold(state, recorded) or state
        return self.info(session_id, state)

    def info(self, session_id: str, state: SessionState | None) -> SessionInfo:
        """A live session's ACP info; ``SessionNotFound`` (or its subclass ``SessionDeletedError``) otherwise."""
        if state is None:
            raise SessionNotFound(session_id)
        if state.deleted:
            raise SessionDeletedError(session_id)
        return session_info(state, additional_directories=self._additional_directories)
