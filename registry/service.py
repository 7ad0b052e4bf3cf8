"""``SessionRegistry``: the facade a host embeds. Commands in, events to the log, answers from the projection.

Commands are validated, turned into events and appended with the session's expected version (a conflict
re-reads the log and tries again), so rules such as "nothing changes a deleted session" hold across threads
and processes. The projection is fed from the store only: by the registry's own appends (read back at once,
so a caller reads its own writes) and by a follower thread that tails the store, so sessions written by other
processes on the same store show up within the store's poll interval.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self

from msgspec import UNSET, UnsetType

from events.codec import now_ns
from events.errors import ConcurrencyError
from events.model import (
    Event,
    RecordedEvent,
    SessionDeleted,
    SessionUpdated,
    TitleSource,
)
from events.sqlite import SqliteStore
from events.store import NO_STREAM, Clock, EventStore
from events.urls import open_store
from registry.acp.methods import handle as handle_acp
from registry.commands import (
    check_messages,
    check_meta,
    check_payload,
    check_session_id,
    check_source,
    check_time,
    check_title,
    creation,
    info_change,
    json_type,
)
from registry.cursor import Cursor, CursorCodec
from registry.errors import (
    InvalidCursor,
    InvalidParams,
    SessionDeletedError,
    SessionExists,
    SessionNotFound,
)
from registry.limits import MAX_PAGE_SIZE
from registry.model import (
    META_CONSISTENCY,
    ListSessionsResult,
    SessionInfo,
    SessionState,
    session_info,
    sort_key,
)
from registry.paths import normalise_cwd
from registry.projection import Change, Projection, paused_gc
from registry.snapshot import Snapshot, load_snapshot, save_snapshot

if TYPE_CHECKING:  # reactivex (and asyncio under it) loads only when a change stream is asked for
    from reactivex import Observable

    from registry.changes import ListChange, SessionNotification

__all__ = ["SessionRegistry"]

log = logging.getLogger(__name__)

_RETRIES: Final = 20
_RENDERED_MAX: Final = 20_000  # SessionInfo objects kept for the pages most asked for (~10 MB at most)


class SessionRegistry:
    """Session history as an event log, answering ACP ``session/list`` from a projection.

    Thread-safe. ``page_size`` is how many sessions a ``session/list`` page holds (1 to 1000); ``window`` is
    how many recent events a walk may span and still be exact (see the README); ``snapshot_path`` is where
    the projection snapshot lives (None: no snapshot).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        page_size: int = 50,
        window: int = 100_000,
        resolve_symlinks: bool = False,
        additional_directories: bool = True,
        snapshot_path: str | os.PathLike[str] | None = None,
        snapshot_every: int = 100_000,
        follow: bool = True,
        clock: Clock | None = None,
        owns_store: bool = False,
    ) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be an int from 1 to {MAX_PAGE_SIZE}, got {page_size!r}")
        self.store = store
        self.page_size = page_size
        self.resolve_symlinks = resolve_symlinks
        self.additional_directories = additional_directories
        self.snapshot_path = None if snapshot_path is None else Path(snapshot_path)
        self.snapshot_every = snapshot_every
        self._clock: Clock = clock or now_ns
        self._owns_store = owns_store
        self._lock = threading.RLock()
        self._listeners: list[Callable[[Sequence[Change]], None]] = []
        self._rendered: dict[str, tuple[SessionState, SessionInfo]] = {}
        self._cursors = CursorCodec(store.identity)
        self._projection = Projection(window=window)
        self._snapshot_position = 0
        self.loaded_from_snapshot = False
        self._load()
        self._closed = False
        self._follower: threading.Thread | None = None
        if follow:
            self._subscription = store.subscribe(after=self._projection.position)
            self._follower = threading.Thread(target=self._follow, name="acp-registry-follower", daemon=True)
            self._follower.start()

    @classmethod
    def open(cls, url: str, **options: Any) -> SessionRegistry:
        """Open a registry on the store a URL names (it closes the store when it closes).

        A SQLite store keeps its projection snapshot beside the database (``<file>.snapshot``).
        """
        store = open_store(url, clock=options.pop("clock", None))
        if isinstance(store, SqliteStore) and "snapshot_path" not in options:
            options["snapshot_path"] = store.path + ".snapshot"
        try:
            return cls(store, owns_store=True, **options)
        except BaseException:
            store.close()
            raise

    # -- loading and following the log ----------------------------------------------------------------

    def _load(self) -> None:
        head = self.store.head()
        with paused_gc():
            if self.snapshot_path is not None:
                snapshot = load_snapshot(self.snapshot_path, self.store)
                if snapshot is not None:
                    self._projection.restore(snapshot.sessions, snapshot.position)
                    self._snapshot_position = snapshot.position
                    self.loaded_from_snapshot = True
            self._projection.load(self.store.iter_events(self._projection.position), head=head)

    def _follow(self) -> None:
        subscription = self._subscription
        while not subscription.closed:
            try:
                records = subscription.poll(timeout=1.0)
                if records:
                    self._apply(records)
                    self._maybe_snapshot()
            except Exception:
                if subscription.closed:
                    return
                log.exception("the registry's follower failed; retrying in a second")
                time.sleep(1.0)

    def _apply(self, records: Sequence[RecordedEvent]) -> None:
        with self._lock:
            changes = [c for c in map(self._projection.apply, records) if c is not None]
            if changes:
                for listener in self._listeners:
                    listener(changes)

    def sync(self) -> int:
        """Fold in everything the store holds now (other processes' appends included); returns the position."""
        with self._lock:
            self._apply(self.store.read(self._projection.position))
            return self._projection.position

    def _sync_to(self, position: int) -> None:
        with self._lock:
            while self._projection.position < position:
                self._apply(self.store.read(self._projection.position))

    @property
    def position(self) -> int:
        """The log position the registry's answers reflect."""
        return self._projection.position

    # -- commands -------------------------------------------------------------------------------------

    def create(
        self,
        cwd: str,
        *,
        session_id: str | None = None,
        additional_directories: Sequence[str] = (),
        title: str | None = None,
        title_source: TitleSource = TitleSource.USER,
        meta: Mapping[str, Any] | None = None,
        at: int | None = None,
    ) -> SessionInfo:
        """Start a session in ``cwd`` (absolute). Raises ``SessionExists`` if the id is taken."""
        if session_id is None:
            session_id = str(uuid.uuid4())
        check_session_id(session_id)
        event = creation(
            cwd,
            at=self._clock() if at is None else at,
            additional_directories=additional_directories,
            title=title,
            title_source=title_source,
            meta=meta,
            resolve_symlinks=self.resolve_symlinks,
        )
        try:
            positions = self.store.append(session_id, [event], NO_STREAM)
        except ConcurrencyError:
            raise SessionExists(session_id) from None
        self._sync_to(positions[-1])
        return self.get(session_id)

    def record_activity(
        self, session_id: str, *, messages: int = 0, payload: Any = None, at: int | None = None
    ) -> SessionInfo:
        """Activity in a session: moves ``updatedAt`` (to ``at``, default now) and adds ``messages``."""
        check_messages(messages)
        check_payload(payload)
        when = check_time(self._clock() if at is None else at, "at")
        self._write(session_id, lambda state: [SessionUpdated(at=when, messages=messages, payload=payload)])
        return self.get(session_id)

    def change_info(
        self,
        session_id: str,
        *,
        title: str | UnsetType | None = UNSET,
        title_source: TitleSource = TitleSource.USER,
        updated_at: Any = UNSET,
        meta: Mapping[str, Any] | UnsetType | None = UNSET,
    ) -> SessionInfo:
        """Set (a value), clear (None) or keep (UNSET) the title, ``updatedAt`` and ``_meta``.

        A generated title (``title_source`` AGENT or PROMPT) never replaces one the user set: it is dropped.
        Nothing is written when nothing would change.
        """
        if title is not None and title is not UNSET:
            check_title(title)
        source = check_source(title_source)
        stamp: int | UnsetType | None = (
            updated_at if updated_at is UNSET or updated_at is None else check_time(updated_at)
        )
        new_meta = meta if meta is UNSET else check_meta(meta)

        def events(state: SessionState) -> list[Event]:
            change = info_change(state, title=title, title_source=source, updated_at=stamp, meta=new_meta)
            return [] if change is None else [change]

        self._write(session_id, events)
        return self.get(session_id)

    def delete(self, session_id: str, *, reason: str | None = None) -> None:
        """Delete a session for good (a tombstone stays in the log). Unknown or deleted sessions: no-op."""
        check_session_id(session_id)
        if reason is not None:
            check_title(reason, "reason")  # a short text, like a title: anything else would poison the log
        for _ in range(_RETRIES):
            state = self._state(session_id)
            if state is None or state.deleted:
                return
            try:
                positions = self.store.append(session_id, [SessionDeleted(reason=reason)], state.version)
            except ConcurrencyError:
                self.sync()
                continue
            self._sync_to(positions[-1])
            return
        raise ConcurrencyError(session_id, -1, -1)  # pragma: no cover - only under endless contention

    def _write(self, session_id: str, make: Callable[[SessionState], list[Event]]) -> None:
        """Append what ``make`` decides from the current state, with that state's version as expected."""
        check_session_id(session_id)
        for _ in range(_RETRIES):
            state = self._state(session_id)
            if state is None:
                raise SessionNotFound(session_id)
            if state.deleted:
                raise SessionDeletedError(session_id)
            events = make(state)
            if not events:
                return
            try:
                positions = self.store.append(session_id, events, state.version)
            except ConcurrencyError:
                self.sync()
                continue
            self._sync_to(positions[-1])
            return
        raise ConcurrencyError(session_id, -1, -1)  # pragma: no cover - only under endless contention

    def _state(self, session_id: str) -> SessionState | None:
        state = self._projection.get(check_session_id(session_id))
        if state is None:
            self.sync()  # perhaps created by another process a moment ago
            state = self._projection.get(session_id)
        return state

    def _path(self, value: object, field: str) -> str:
        return normalise_cwd(value, field=field, resolve_symlinks=self.resolve_symlinks)

    # -- queries --------------------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionInfo:
        """A session's ACP info. ``SessionNotFound`` (or its subclass ``SessionDeletedError``) otherwise."""
        state = self._state(session_id)
        if state is None:
            raise SessionNotFound(session_id)
        if state.deleted:
            raise SessionDeletedError(session_id)
        return session_info(state, additional_directories=self.additional_directories)

    def state(self, session_id: str) -> SessionState | None:
        """Everything the registry knows of a session, deleted ones included."""
        return self._state(session_id)

    def list(self, cwd: str | None = None, cursor: str | None = None) -> ListSessionsResult:
        """One ``session/list`` page: most recent activity first; ``nextCursor`` only when more follow."""
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidParams(f"cursor must be a string, not {json_type(cursor)}")
        scope = None if cwd is None else self._path(cwd, "cwd")
        with self._lock:
            projection = self._projection
            if cursor is None:
                as_of, after = projection.position, None
            else:
                walk = self._cursors.decode(cursor, scope)
                if walk.position > projection.position:
                    self.sync()
                    if walk.position > projection.position:
                        raise InvalidCursor("foreign", "the cursor is ahead of this store's log")
                as_of, after = walk.position, (walk.rank, walk.session_id)
            page = projection.page(as_of=as_of, after=after, cwd=scope, limit=self.page_size)
            infos = [self._info(s) for s in page.states]
        result = ListSessionsResult(infos)
        if page.more:
            rank, last = sort_key(page.states[-1])
            result.next_cursor = self._cursors.encode(Cursor(as_of, rank, last), scope)
        if not page.consistent:
            result.meta = {
                META_CONSISTENCY: "current",
                f"{META_CONSISTENCY}Note": "this walk started before the consistency window: it goes on in the "
                "current order and leaves out sessions changed since it began",
            }
        return result

    def _info(self, state: SessionState) -> SessionInfo:
        """The ACP view of a state, rendered once per state: states are immutable, so identity is freshness."""
        cached = self._rendered.get(state.session_id)
        if cached is not None and cached[0] is state:
            return cached[1]
        info = session_info(state, additional_directories=self.additional_directories)
        if len(self._rendered) >= _RENDERED_MAX:
            self._rendered.clear()
        self._rendered[state.session_id] = (state, info)
        return info

    def __len__(self) -> int:
        """Live sessions."""
        return len(self._projection)

    # -- ACP methods as JSON-RPC ------------------------------------------------------------------------

    def handle(self, method: str, params: Any = None) -> dict[str, Any]:
        """Answer an ACP request (``session/list``, ``session/delete``): the exact result object, or an error
        carrying its JSON-RPC code (``registry.errors.rpc_error`` maps it). ``params`` absent or null is ``{}``;
        unknown keys are ignored. The method table and its params live in ``registry.acp.methods``.
        """
        return handle_acp(self, method, params)

    # -- change listeners, snapshots, closing ---------------------------------------------------------

    def list_changes(self, after: int | None = None, **options: Any) -> Observable[ListChange]:
        """``Added`` / ``Updated`` / ``Removed`` after log position ``after`` (default: now), then live.

        Options: ``coalesce`` (seconds), ``scheduler``, ``loop`` (asyncio delivery), ``max_pending``; see
        ``registry.changes.list_changes``.
        """
        from registry.changes import list_changes  # noqa: PLC0415 - keeps `import registry` light

        return list_changes(self, after, **options)

    def changes(self, after: int | None = None, **options: Any) -> Observable[SessionNotification]:
        """The ACP ``session/update`` notifications (minimal ``session_info_update`` diffs, explicit nulls)."""
        from registry.changes import notifications  # noqa: PLC0415 - keeps `import registry` light

        return notifications(self, after, **options)

    def add_listener(self, listener: Callable[[Sequence[Change]], None]) -> Callable[[], None]:
        """Call ``listener`` with each batch of changes, in log order, under the registry's lock.

        Returns a function that removes it. Listeners must be quick and must not raise (the change stream
        in ``registry.changes`` isolates its subscribers this way).
        """
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def save_snapshot(self) -> int | None:
        """Write the projection snapshot now; returns its position (None without a snapshot path)."""
        if self.snapshot_path is None:
            return None
        with self._lock:
            position = self._projection.position
            states = list(self._projection.states().values())
        event_id = None
        if position > 0:
            event_id = self.store.read(position - 1, 1)[0].event_id
        save_snapshot(
            self.snapshot_path, Snapshot(self.store.identity.store_id, position, event_id, self._clock(), states)
        )
        self._snapshot_position = position
        return position

    def _maybe_snapshot(self) -> None:
        if (
            self.snapshot_path is not None
            and self._projection.position - self._snapshot_position >= self.snapshot_every
        ):
            try:
                self.save_snapshot()
            except OSError as exc:
                log.warning("could not write the snapshot %s: %s", self.snapshot_path, exc)

    def close(self) -> None:
        """Stop following the log, save a snapshot if the log moved on, close an owned store."""
        if self._closed:
            return
        self._closed = True
        if self._follower is not None:
            self._subscription.close()
            self._follower.join(10)
        try:
            if self.snapshot_path is not None and self._projection.position != self._snapshot_position:
                self.save_snapshot()
        except OSError as exc:
            log.warning("could not write the snapshot %s: %s", self.snapshot_path, exc)
        finally:
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
