"""How a command reaches the log: decide from a session's state, append with its version as expected, read your
own write. ``SessionRegistry`` (``registry.service``) runs every command through one ``CommandWriter``.

Rules kept here: an append names the version it decided from, so a decision made from a stale state is refused
(``ConcurrencyError``) and made again from a fresh read; nothing changes a deleted session; and the log decides
what was committed - once an append returned, the command succeeds even if the read model cannot follow it now
(it is stale, and caught up or rebuilt before the next answer).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from events.errors import ConcurrencyError, StoreClosedError
from events.model import Event
from events.store import EventStore
from registry.commands import check_session_id
from registry.errors import SessionDeletedError, SessionNotFound
from registry.follow import Follower
from registry.model import SessionInfo, SessionState, session_info
from registry.projection import fold
from registry.readmodel import ReadModel

__all__ = ["CommandWriter"]

_RETRIES: Final = 20

log = logging.getLogger(__name__)


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

    def write(self, session_id: str, make: Callable[[SessionState], list[Event]], *, missing_ok: bool = False) -> None:
        """Append what ``make`` decides from the current state, with that state's version as expected."""
        check_session_id(session_id)
        # The first try decides from the state this process last saw, without catching up (a round trip on a
        # shared store): the append's expected version refuses a stale state (ConcurrencyError), and whatever a
        # stale state would refuse or find nothing to do is decided again from a fresh read.
        state, fresh = self._read_model.get(session_id), False
        for _ in range(_RETRIES):
            if not fresh and (state is None or state.deleted):
                state, fresh = self.fresh_state(session_id), True
            if state is None or state.deleted:
                if missing_ok:
                    return
                raise SessionNotFound(session_id) if state is None else SessionDeletedError(session_id)
            events = make(state)
            if not events:
                if fresh:
                    return
                state, fresh = self.fresh_state(session_id), True
                continue
            try:
                positions = self._store.append(session_id, events, state.version)
            except ConcurrencyError:
                state, fresh = self.fresh_state(session_id), True  # another writer was first: read again, decide again
                continue
            self.applied(positions[-1])
            return
        raise ConcurrencyError(session_id, -1, -1)  # pragma: no cover - only under endless contention

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
        """The info of a session just written (the read model holds it: no catch-up first; a read model that
        cannot say folds the session's own events from the log instead)."""
        try:
            state = self._read_model.get(session_id)
        except Exception as exc:
            if isinstance(exc, StoreClosedError):
                raise
            state = None
            for recorded in self._store.read_stream(session_id):
                state = fold(state, recorded) or state
        if state is None or state.deleted:  # pragma: no cover - deleted or gone between the write and now
            state = self.fresh_state(session_id)
        return self.info(session_id, state)

    def info(self, session_id: str, state: SessionState | None) -> SessionInfo:
        """A live session's ACP info; ``SessionNotFound`` (or its subclass ``SessionDeletedError``) otherwise."""
        if state is None:
            raise SessionNotFound(session_id)
        if state.deleted:
            raise SessionDeletedError(session_id)
        return session_info(state, additional_directories=self._additional_directories)
