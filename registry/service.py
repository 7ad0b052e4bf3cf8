"""``SessionRegistry``: the facade a host embeds. Commands in, events to the log, answers from the read model.

A command is checked (``registry.commands``), turned into events and appended with the session's expected version
(a conflict reads again and retries), so rules such as "nothing changes a deleted session" hold across threads,
processes and hosts. After an append the read model is caught up to it before the call returns (a caller reads
its own writes), and every query catches it up to the log's head first (so it sees every process's writes).
Changes reach listeners through the follower (``registry.follow``), which runs only while someone listens.

Where the rest lives: ``reading.py`` (the pages: ``SessionPages``, the facade's base), ``model.py`` (the session's
shape), ``commands.py`` (checks and decisions), ``writing.py`` (appending a command's events, retries,
read-your-writes), ``forks.py`` (a fork's parent and history), ``readmodel/`` (the tables, or the in-memory fold),
``pages.py`` (``session/list`` pages and cursors), ``follow.py`` (changes for listeners), ``changes.py`` (the
reactivex stream), ``acp/`` (JSON-RPC); what a turn writes (``turns.py``); the reads of what sessions said and spent
(``said_and_spent.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from msgspec import UNSET, UnsetType

from events.codec import now_ns
from events.factory import open_store
from events.model import Event, ForkRef, Message, SessionCreated, SessionUpdated, TitleSource, Usage
from events.store import Clock, EventStore
from registry import forks
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
)
from registry.conversation import counted
from registry.filters import Filters
from registry.follow import Follower, Following, Listener
from registry.model import ListSessionsResult, SessionInfo, SessionState
from registry.reading import PageOptions, SessionPages, check_cursor
from registry.said_and_spent import SaidAndSpent
from registry.search.on_demand import IndexOnDemand
from registry.session_commands import Events, SessionCommands
from registry.turns import kept_messages, messages_update, turn_update
from registry.usage import check_usage
from registry.writing import CommandWriter

if TYPE_CHECKING:  # reactivex (and asyncio under it) loads only when a change stream is asked for
    from reactivex import Observable

    from registry.changes import StreamOptions
    from registry.diffs import ListChange, SessionNotification
    from registry.search.hits import Searcher

__all__ = ["RegistryOptions", "SessionRegistry"]


class RegistryOptions(PageOptions, total=False):
    """The keywords a ``SessionRegistry`` is made with, as ``open`` passes them on (defaults: ``__init__``, and
    ``SessionPages.__init__`` for the pages' own)."""

    follow: bool
    clock: Clock | None
    keep_secrets: bool


class SessionRegistry(SessionPages, SessionCommands, SaidAndSpent):
    """Session history as an event log, answering ACP ``session/list`` from a read model.

    Its session commands (``set_title``, ``rename``, ``archive``, ``unarchive``, ``delete``) are
    ``registry.session_commands``'.

    Thread-safe. ``page_size`` is how many sessions a ``session/list`` page holds (1 to 1000); ``window`` is how
    many log positions a walk may span and still be exact (see the README); ``read_model`` forces ``"memory"``
    (the in-memory fold) or ``"tables"``; ``follow=False`` delivers changes to listeners only on this registry's
    own writes and ``sync()`` (no thread: deterministic tests).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        follow: bool = True,
        clock: Clock | None = None,
        owns_store: bool = False,
        keep_secrets: bool = False,
        **pages: Unpack[PageOptions],
    ) -> None:
        super().__init__(store, owns_store=owns_store, **pages)
        self._clock: Clock = clock or now_ns
        self._follower = Follower(store, self._read_model, live=follow)
        self._writer = CommandWriter(
            store, self._read_model, self._follower, additional_directories=self.additional_directories
        )
        self.keep_secrets = keep_secrets
        self._search = IndexOnDemand(self._backend.search_index)
        self._unhook = store.add_erase_hook(self._search)  # a user's delete takes the words out of it too
        self._searcher: Searcher | None = None

    @classmethod
    def open(cls, url: str, *, create: bool = True, **options: Unpack[RegistryOptions]) -> SessionRegistry:
        """Open a registry on the store a URL names (``memory://``, ``sqlite:///abs/path.db``,
        ``postgresql://...``); it closes the store when it closes. ``create=False`` refuses to make a new store
        (a missing file or schema, an empty file: ``StoreError`` / ``StoreFormatError``)."""
        store = open_store(url, clock=options.get("clock"), create=create)
        try:
            return cls(store, owns_store=True, **options)
        except BaseException:
            store.close()
            raise

    def sync(self) -> int:
        """Fold in everything the store holds now (other processes' appends included): the read model, and every
        subscriber's queue of changes. Returns the position."""
        position = self._read_model.catch_up()
        self._follower.pump(always=True)
        return position

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
        agent: str | None = None,
        parent: ForkRef | None = None,
    ) -> SessionInfo:
        """Start a session in ``cwd`` (absolute). Raises ``SessionExists`` if the id is taken.

        ``agent`` names the agent it belongs to (None: the registry's own); ``parent`` makes it a fork of that
        session as of that log position (0: the source's last event; the source must exist and not be deleted,
        else ``SessionNotFound``; a position past the head or before the source existed: ``InvalidParams``).
        """
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
            agent=agent,
            parent=None if parent is None else forks.fork_point(self._store, self._read_model, parent)[1],
        )
        return self._writer.create(session_id, event)

    def record_activity(
        self, session_id: str, *, messages: int = 0, payload: Any = None, at: int | None = None
    ) -> SessionInfo:
        """Activity in a session: moves ``updatedAt`` (to ``at``, default now) and adds ``messages``."""
        check_messages(messages)
        check_payload(payload)
        when = check_time(self._clock() if at is None else at, "at")
        self._writer.write(session_id, lambda state: [SessionUpdated(at=when, messages=messages, payload=payload)])
        return self._writer.written(session_id)

    def record_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        at: int | None = None,
        usage: Usage | None = None,
        count: int | None = None,
    ) -> SessionInfo:
        """Keep what was said in a session - a turn's messages, or a part of its past - with what the turn used:
        one activity that moves ``updatedAt`` (to ``at``, default now; never back) and adds ``count`` to the message
        count (default: the user's and the agent's messages among them). The text is kept as
        ``registry.conversation.prepare`` makes it (bounded, readable, secrets masked unless ``keep_secrets``),
        beside the log, where ``delete`` erases it; ``transcript`` reads it back and ``search`` finds it."""
        when = check_time(self._clock() if at is None else at, "at")
        usage = check_usage(usage)
        kept = kept_messages(messages, when, keep_secrets=self.keep_secrets)
        added = counted(kept) if count is None else check_messages(count)
        self._writer.write(
            session_id,
            lambda state: [messages_update(state, kept, at=when, added=added, usage=usage)],
            content=[kept] if kept else None,
        )
        return self._writer.written(session_id)

    def record_turn(
        self,
        session_id: str,
        *,
        messages: int,
        began: SessionState | None = None,
        at: int | None = None,
        conversation: Sequence[Message] = (),
        usage: Usage | None = None,
    ) -> SessionInfo:
        """A turn seen live (by a proxy) that added ``messages``, ended at ``at`` (default now; never before the
        session's last activity); ``began`` is the session's state when the turn began. Every live turn counts,
        two windows' overlapping turns both: the count grows by ``messages`` - unless an import of the agent's
        files ran while the turn was under way (the agent's own count in ``_meta`` moved since ``began``), which
        may have counted this very turn: the count is then ``began``'s plus ``messages`` unless higher already.
        One turn, one count, in either order; a turn of another window that such an import did not see is counted
        by the next import (the importer brings the count up to the agent's own). So with its ``conversation`` and
        ``usage``: a turn such an import added already is not kept twice, nor its usage counted twice
        (``registry.conversation.unseen``)."""
        check_messages(messages)
        when = check_time(self._clock() if at is None else at, "at")
        usage = check_usage(usage)
        kept = kept_messages(conversation, when, keep_secrets=self.keep_secrets)
        box: list[Sequence[Message] | None] = [kept or None]  # the messages the event keeps, as decided

        def events(state: SessionState) -> list[Event]:
            update, box[0] = turn_update(
                state,
                began=began,
                messages=messages,
                kept=kept,
                usage=usage,
                at=when,
                held=lambda: [m.message for m in self._store.messages(session_id)],
            )
            box[0] = box[0] or None
            return [update]

        self._writer.write(session_id, events, content=box if kept else None)
        return self._writer.written(session_id)

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
        stamp: int | UnsetType | None = (
            updated_at if updated_at is UNSET or updated_at is None else check_time(updated_at)
        )
        new_meta = meta if meta is UNSET else check_meta(meta)
        return self._change_info(session_id, title, check_source(title_source), stamp, new_meta)

    def _change_info(
        self,
        session_id: str,
        title: str | UnsetType | None,
        source: TitleSource,
        stamp: int | UnsetType | None,
        meta: dict[str, Any] | UnsetType | None,
    ) -> SessionInfo:
        """``change_info`` of values already checked (each check once on the way in)."""

        def events(state: SessionState) -> list[Event]:
            change = info_change(state, title=title, title_source=source, updated_at=stamp, meta=meta)
            return [] if change is None else [change]

        self._writer.write(session_id, events)
        return self._writer.written(session_id)

    def fork(
        self,
        source_id: str,
        cwd: str,
        *,
        additional_directories: Sequence[str] = (),
        session_id: str | None = None,
        at_position: int | None = None,
        agent: str | None = None,
    ) -> SessionInfo:
        """A new session in ``cwd`` made from ``source_id`` as of log position ``at_position`` (default: the
        source's last event): its ``activity`` is the source's turns up to there, then its own. Only a reference
        is recorded (``SessionCreated.parent``), whatever the source's size. The fork takes the source's title
        (and who set it) and, unless ``agent`` is given, its agent. An unknown or deleted source ->
        ``SessionNotFound`` and nothing is created; a position before the source existed or past the log's head
        -> ``InvalidParams``."""
        check_session_id(source_id, "sessionId")
        source, parent = forks.fork_point(
            self._store, self._read_model, ForkRef(session_id=source_id, position=at_position or 0)
        )
        return self.create(
            cwd,
            session_id=session_id,
            additional_directories=additional_directories,
            title=source.title,
            title_source=source.title_source or TitleSource.AGENT,
            agent=source.agent if agent is None else agent,
            parent=parent,
        )

    def _write(self, session_id: str, events: Events, *, missing_ok: bool = False) -> None:
        self._writer.write(session_id, events, missing_ok=missing_ok)

    def restore(self, session_id: str) -> SessionInfo:
        """Bring back a session a proxy retired because its agent had not kept it (``_meta``'s
        ``acp-session-registry/retired`` is ``"unkept"``), now that the agent has it: the same record, with all it
        held - the user's title, the archive flag, the count. Nothing to do for a live session. A session deleted
        any other way stays deleted: ``SessionDeletedError``; an unknown one: ``SessionNotFound``."""
        state = self.state(session_id)
        cwd = "/" if state is None else state.cwd
        self._writer.restore(session_id, SessionCreated(cwd=cwd, at=self._clock()))
        return self._writer.written(session_id)

    def _erase_conversation(self, session_id: str) -> None:
        if not self._store.read_only:
            state = self._writer.fresh_state(session_id)
            if state is not None and state.deleted:
                self._store.erase(session_id)

    # -- queries --------------------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionInfo:
        """A session's ACP info. ``SessionNotFound`` (or its subclass ``SessionDeletedError``) otherwise."""
        return self._writer.info(session_id, self.state(session_id))

    def state(self, session_id: str) -> SessionState | None:
        """Everything the registry knows of a session, deleted ones included."""
        check_session_id(session_id)
        return self._writer.fresh_state(session_id)

    def activity(self, session_id: str) -> list[SessionUpdated]:
        """A session's activity events in order (each turn's ``messages`` and opaque ``payload``, e.g. to replay
        them on ``session/load``); deleted sessions included, [] for an unknown one. A fork's starts with its
        source's activity up to the fork's position (the source's source's before it, and so on)."""
        check_session_id(session_id)
        return forks.activity(self._store, session_id)

    def forks(self, session_id: str) -> list[SessionState]:
        """The sessions forked from ``session_id`` (deleted ones included), oldest fork point first."""
        check_session_id(session_id)
        self._read_model.catch_up()
        return forks.forks_of(self._read_model, session_id)

    def list(
        self, cwd: str | None = None, cursor: str | None = None, *, query: str | None = None, **filters: Unpack[Filters]
    ) -> ListSessionsResult:
        """One ``session/list`` page (``SessionPages.list``); ``query``: only the sessions whose conversations match
        it, best first (``search``), each with the passages that matched in its ``_meta`` (``META_SNIPPETS``); the
        cursor is then bound to the query too."""
        if query is not None:
            check_cursor(cursor)
            return self._searched(query, cwd, cursor, filters)
        return super().list(cwd, cursor, **filters)

    # -- ACP methods as JSON-RPC ------------------------------------------------------------------------

    def handle(self, method: str, params: Any = None) -> dict[str, Any]:
        """Answer an ACP request the registry answers (``session/list``, ``delete``, ``set_title``, ``archive``,
        ``unarchive``, ``status``, ``fork``, ``_registry/rename``): the exact result object, or an error
        carrying its JSON-RPC code (``registry.errors.rpc_error`` maps it). ``params`` absent or null is ``{}``;
        unknown keys are ignored. The method table and its params live in ``registry.acp.methods``.
        """
        from registry.acp.methods import handle  # noqa: PLC0415 - the method table: not what a CLI read loads

        return handle(self, method, params)

    # -- changes ----------------------------------------------------------------------------------------

    def follow(self, listener: Listener, on_close: Callable[[], None] | None = None) -> Following:
        """Start following changes atomically: ``listener`` gets every change after the returned handle's
        ``position``, in log order, from the follower's thread; ``state_at`` tells what came before; ``stop()``
        ends it; ``on_close`` is called if the registry closes first. ``list_changes`` / ``changes`` build the
        reactivex stream on this (it completes when the registry closes)."""
        if self._closed:
            raise RuntimeError("the registry is closed")
        return self._follower.add(listener, on_close)

    def wait_for_changes(self, position: int | None = None, *, timeout: float | None = None) -> bool:
        """Block until the changes up to ``position`` (default: everything this registry has answered from) have
        reached every subscriber's queue - not necessarily the subscriber itself, whose scheduler delivers them
        in order; an agent that schedules an action on that scheduler now has it run after them. False when
        ``timeout`` passed first."""
        return self._follower.wait(self.position if position is None else position, timeout)

    def list_changes(
        self, after: int | None = None, *, include_archived: bool = False, **options: Unpack[StreamOptions]
    ) -> Observable[ListChange]:
        """``Added`` / ``Updated`` / ``Removed`` after log position ``after`` (default: now), then live.

        The default list leaves archived sessions out (an archive is ``Removed``, an unarchive ``Added``);
        ``include_archived`` keeps them (an archive is then an ``Updated`` of ``_meta``'s ``META_ARCHIVED``).

        ``coalesce`` merges a session's changes within that many seconds; ``scheduler`` or ``loop`` (asyncio)
        choose where items are delivered (default: a thread per subscription); a subscriber more than
        ``max_pending`` items behind is ended with ``SubscriberTooSlow``. See ``registry.changes``.
        """
        from registry.changes import list_changes  # noqa: PLC0415 - keeps reactivex out of `import registry`

        return list_changes(self, after, include_archived=include_archived, **options)

    def changes(self, after: int | None = None, **options: Unpack[StreamOptions]) -> Observable[SessionNotification]:
        """The ACP ``session/update`` notifications (minimal ``session_info_update`` diffs, explicit nulls)."""
        from registry.changes import notifications  # noqa: PLC0415 - keeps reactivex out of `import registry`

        return notifications(self, after, **options)

    # -- closing ----------------------------------------------------------------------------------------

    def _release(self) -> None:
        """Stop following the log and searching (``close``: then the read model and an owned store)."""
        self._unhook()
        self._search.close()
        self._follower.close()
