"""The proxy's recording, off the relay's path: observations go into a queue, one thread writes them.

The relay and the surface only ``put`` what they saw (a session created, loaded or resumed, a turn answered, the
agent's title, a change the client asked for and was answered from memory); the recorder thread applies each to
the registry in order. A registry failure (disk full, a write lock held elsewhere, PostgreSQL gone) never reaches
the conversation: the failure is logged once, the recorder keeps the observation and tries again (every ``retry``
seconds), logs once when recording resumes, and meanwhile ``degraded`` says why, so ``session/list`` can say so
instead of answering from stale data silently. What waits is bounded in bytes, whatever each observation holds:
each declares the strings it keeps (``put(..., held=...)``), and beyond ``MAX_BACKLOG_BYTES`` the oldest are
dropped and counted (one that alone is larger is not kept at all). An observation the registry refuses for its
content (a relative cwd, an over-long title) is skipped with a log line; that is not a fault of the store (an
agent's title over the limit is refused before it is queued). What a killed proxy had queued comes back from the
agent's own history at the next start (``registry.proxy.history``); what the client is told of - a session made or
opened, a turn answered - is written before it is told, within ``ACK_WAIT`` (``durable``).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from events.codec import now_ns
from events.errors import RegistryError
from events.model import TitleSource
from registry.agents import META_RETIRED, Retired, retired, split_id, stored_id
from registry.commands import check_title, prompt_title
from registry.errors import InvalidParams, SessionExists, SessionNotFound, accepts
from registry.limits import MAX_TITLE_LENGTH
from registry.model import SessionState
from registry.proxy.assembly import Said
from registry.proxy.book import Book, Status
from registry.proxy.identity import Identity
from registry.proxy.titles import TitlePolicy
from registry.proxy.turn_usage import kept
from registry.service import SessionRegistry
from registry.session_commands import SessionCommand, marked_by_user

__all__ = [
    "ACK_WAIT",
    "EARLY_TITLE_BYTES",
    "MAX_BACKLOG_BYTES",
    "NAME_WAIT",
    "OBSERVATION_BYTES",
    "Observation",
    "Recorder",
    "held_bytes",
]

log = logging.getLogger("acp_registry.proxy")

MAX_BACKLOG_BYTES: Final = 32 << 20
"""Bytes of observations kept while the store cannot be written (``held_bytes`` of each): beyond that, the oldest
are dropped, and counted."""
OBSERVATION_BYTES: Final = 512
"""What an observation costs beside the strings it holds: its closure, the cells it captures, its queue slot (a
bound above what they take: ``tests/test_proxy_memory.py`` measures it)."""
_REMEMBERED: Final = 10_000
EARLY_TITLE_BYTES: Final = 1 << 20
"""Bytes of agent titles kept for sessions not recorded yet (ids and titles, as UTF-8): beyond that, dropped."""
ACK_WAIT: Final = 5.0
"""Seconds an answer that makes a session or ends a turn waits for the recorder to write it (``durable``): far
above what a write takes (milliseconds), so that a busy machine's slow writes are still waited for, and the bound
only stops a store that is locked elsewhere from stalling the conversation for long."""
NAME_WAIT: Final = 10.0
"""Seconds a session made before ``initialize`` waits for the agent's name (its ``initialize`` answer) before it
is recorded under the name known then (a client that never initializes)."""

Observation = Callable[["Recorder"], None]
"""One thing the relay saw, as a function of the recorder that writes it."""


def held_bytes(held: Iterable[str | bytes | None]) -> int:
    """What an observation holding the strings ``held`` keeps in memory while it waits: each one's own size in
    bytes (``sys.getsizeof``: a str of N ASCII characters is about N bytes, of other characters up to 4N), and
    ``OBSERVATION_BYTES`` for the rest."""
    return OBSERVATION_BYTES + sum(sys.getsizeof(item) for item in held if item is not None)


class Recorder:
    """Writes observations to ``registry`` for the agent ``identity`` names, on its own thread (``start``)."""

    def __init__(
        self,
        registry: SessionRegistry,
        identity: Identity,
        book: Book,
        titles: TitlePolicy,
        *,
        retry: float = 1.0,
        agent_cwd: str | None = None,
    ) -> None:
        self.registry = registry
        self.agent_cwd = os.path.abspath(agent_cwd or os.getcwd())
        """The folder the agent runs in (an agent whose list answers per cwd answers this one without a cwd)."""
        self.identity = identity
        self.book = book
        self.titles = titles
        self.started_at = now_ns()
        self._retry = retry
        self._items: collections.deque[tuple[Observation, int]] = collections.deque()
        self._cond = threading.Condition()
        self._put = 0
        self._done = 0
        self._dropped = 0
        self.held = 0
        """Bytes the observations waiting to be written hold (``held_bytes``)."""
        self._full = False  # observations were dropped since the queue was last empty
        self._closed = False
        self.degraded: str | None = None
        self._early_titles: dict[str, str | None] = {}  # agent titles of sessions not recorded yet
        self._early_bytes = 0
        self._began: dict[str, SessionState] = {}  # sessions whose turn is under way, as it began
        self._late: int | None = None  # an observation ``durable`` stopped waiting for
        self._thread = threading.Thread(target=self._run, name="acp-registry-proxy-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- the relay's side ---------------------------------------------------------------------------

    def put(self, observation: Observation, *, held: Iterable[str | bytes | None]) -> int:
        """Queue one observation that keeps the strings ``held`` (each kind says what it keeps: its size is theirs,
        ``held_bytes``); never blocks on the registry. Within ``MAX_BACKLOG_BYTES``: the oldest waiting make room
        (not the one being written), said once until the queue is empty again. Its ticket, for ``wait_written``."""
        size = held_bytes(held)
        with self._cond:
            self._put += 1
            dropped = 0
            while len(self._items) > 1 and self.held + size > MAX_BACKLOG_BYTES:
                _, bytes_ = self._items[1]  # [0] is being written
                del self._items[1]
                self.held -= bytes_
                dropped += 1
            if self.held + size > MAX_BACKLOG_BYTES:
                dropped += 1  # this one: alone larger than what may wait, or beside the one being written
            else:
                self._items.append((observation, size))
                self.held += size
            self._dropped += dropped
            self._done += dropped
            say = dropped and not self._full
            self._full = self._full or bool(dropped)
            self._cond.notify_all()
            ticket = self._put
        if say:
            log.error(
                "%d MiB of observations are waiting for the store (%s); the oldest are dropped from now on",
                MAX_BACKLOG_BYTES >> 20,
                self.degraded or "it is slow or locked",
            )
        return ticket

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every observation queued so far is written (True), or ``timeout`` passed (False)."""
        with self._cond:
            target = self._put
        return self.wait_written(target, timeout)

    def wait_written(self, ticket: int, timeout: float) -> bool:
        """Wait until the observation ``put`` gave ``ticket`` for (and every one before it) is written (True), or
        ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._done < ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def durable(self, ticket: int) -> bool:
        """Before the client is told of what the observation ``ticket`` records (a session made, opened or forked; a
        turn answered), wait for it to be written, ``ACK_WAIT`` seconds at most: what the client was told is in the
        log, and a proxy killed right after loses none of it. A store slower than that (a lock held elsewhere) is
        not waited for again until the recorder has caught up: the conversation never waits on it for long, and
        what the agent keeps comes back at the next start (``registry.proxy.history``)."""
        with self._cond:
            late = self._late
        if self.degraded is not None or (late is not None and not self.wait_written(late, 0)):
            return False
        if self.wait_written(ticket, ACK_WAIT):
            return True
        with self._cond:
            self._late = ticket
        return False

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (within ``timeout``), then stop the thread and join it."""
        if self._thread.is_alive() and not self.wait_idle(timeout):
            log.error("%d observations were not recorded (%s)", len(self._items), self.degraded or "the store is slow")
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the recorder's thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._closed:
                    self._cond.wait()
                if not self._items:
                    return
                item = self._items[0]
            if self._apply(item[0]):
                with self._cond:
                    self._items.popleft()  # the one being written is never dropped
                    self.held -= item[1]
                    self._done += 1
                    drained = self._full and not self._items
                    self._full = self._full and not drained
                    self._cond.notify_all()
                if drained:
                    log.error("the recorder has caught up; %d observations were dropped in all", self._dropped)
                continue
            with self._cond:  # the store failed: wait, then try the same observation again
                if self._closed:
                    return
                self._cond.wait(self._retry)

    def _apply(self, item: Observation) -> bool:
        try:
            item(self)
        except (InvalidParams, SessionNotFound, SessionExists) as exc:
            log.warning("not recorded: %s", exc)
        except (RegistryError, OSError) as exc:  # the store failed: keep the observation, try again
            if self.degraded is None:
                self.degraded = f"the registry cannot record ({type(exc).__name__}: {' '.join(str(exc).split())})"
                log.error("%s; the conversation goes on, recording resumes when the store is back", self.degraded)
            return False
        except Exception:  # a bug: this observation is lost, the others are not held up by it
            log.exception("an observation could not be recorded")
        if self.degraded is not None:
            self.degraded = None
            dropped = (
                f" ({self._dropped} observations beyond {MAX_BACKLOG_BYTES >> 20} MiB were dropped)"
                if self._dropped
                else ""
            )
            log.error("the registry records again%s", dropped)
        return True

    # -- what observations do -----------------------------------------------------------------------

    def _current(self, native: str) -> tuple[str, SessionState | None]:
        """The stored id of the agent's session ``native`` now (its latest conversation) and its state."""
        entry = self.book.entry(native)
        return entry.stored, self.registry.state(entry.stored)

    def session(
        self,
        native: str,
        cwd: str | None,
        directories: list[str] | None = None,
        *,
        at: int | None = None,
        live: bool = False,
        made: bool = False,
        title: str | None = None,
    ) -> None:
        """A session of the agent is live (``live``: new, loaded, resumed, forked; ``made``: by ``session/new`` or
        fork) or shown in its past: known to the registry. ``made`` under an id the registry holds for a
        conversation from before this proxy started: the agent reused the id - the old record is retired
        (superseded, kept in the history) and this one is recorded as the next generation. A session a proxy
        retired as not kept that the agent has after all is restored - the same record, with what the user set;
        one a user deleted never comes back. ``title``: the agent's title for it (its own list's), recorded with it."""
        agent = self.identity.fix(wait=NAME_WAIT)
        if self.book.entry(native).status is Status.DELETED:
            return  # deleted in the registry (under any name of the agent): a tombstone wins over the agent's files
        sid, state = self._current(native)
        if state is not None and not state.deleted and made and state.created_at < self.started_at:
            self._retire(sid, state, Retired.SUPERSEDED)
            sid, state = self._following(sid), None
        elif state is not None and state.deleted:
            if retired(state) is None:
                return  # deleted in the registry: a tombstone wins over what the agent still has
            if retired(state) is Retired.UNKEPT:
                self.registry.restore(sid)
                state = self.registry.state(sid)
            else:
                sid, state = self._following(sid), self.registry.state(self._following(sid))
        if state is None and cwd is not None:
            # a title the registry does not take is left out, not the session
            named = title if title is not None and accepts(check_title, title) else None
            with contextlib.suppress(SessionExists):  # another proxy (or the importer) was first: the same session
                self.registry.create(
                    cwd,
                    session_id=sid,
                    additional_directories=directories or (),
                    at=at,
                    agent=agent,
                    title=named,
                    title_source=TitleSource.AGENT,
                )
            state = self.registry.state(sid)
        elif title is not None:
            self.agent_title(native, title)
        if state is not None:
            self.book.set(native, sid, Status.LIVE if live else Status.KEPT)
            if state.title is not None and state.title_source is TitleSource.USER:
                self.titles.user_titled(native)
        self._apply_early_title(native)

    def _following(self, sid: str) -> str:
        parts = split_id(sid)
        assert parts is not None
        return stored_id(parts[0], parts[2], parts[1] + 1)

    def _retire(self, sid: str, state: SessionState, why: Retired) -> None:
        self.registry.change_info(sid, meta={**(state.meta or {}), META_RETIRED: why.value})
        self.registry.delete(sid, reason=f"retired by the proxy: {why.value}", erase=False)

    def retire_unkept(self, native: str, *, verified: bool = False) -> None:
        """A session made through the proxy that the agent did not keep: retired (not listed; a load of it is still
        forwarded, and if the agent has it after all, it is restored) - unless the user did something with it
        (``touched``), when that is only assumed; ``verified``: the agent's own list said so after its turn."""
        sid, state = self._current(native)
        if state is None or state.deleted or self.book.entry(native).status is Status.LIVE:
            return
        if not verified and self.touched(state):
            return
        self._retire(sid, state, Retired.UNKEPT)
        self.book.set(native, sid, Status.UNKEPT)

    def touched(self, state: SessionState) -> bool:
        """Whether the user did something with a session that a retirement would take from the list: a mark of a
        user's command (``marked_by_user``: a title of theirs, any of ``USERS_MARKS``), a turn, a fork (of it, or
        from it)."""
        if marked_by_user(state) or state.messages > 0 or state.parent is not None:
            return True
        return bool(self.registry.forks(state.session_id))

    def _apply_early_title(self, native: str) -> None:
        if native in self._early_titles:
            title = self._early_titles.pop(native)
            self._early_bytes -= _size(native, title)
            self.agent_title(native, title)

    def fork(self, native: str, source: str, cwd: str, directories: list[str] | None = None) -> None:
        """The agent forked ``source`` into ``native``: recorded with its parent where the registry knows the
        source (else as a session of its own)."""
        agent = self.identity.fix(wait=NAME_WAIT)
        sid, state = self._current(native)
        parent_id, parent = self._current(source)
        if state is not None or parent is None or parent.deleted:
            self.session(native, cwd, directories, live=True, made=True)
            return
        with contextlib.suppress(SessionExists):
            self.registry.fork(parent_id, cwd, additional_directories=directories or (), session_id=sid, agent=agent)
        self.book.set(native, sid, Status.LIVE)
        self._apply_early_title(native)

    def turn_began(self, native: str) -> None:
        """A prompt went to the agent: the session as it is now is what the turn adds to (``turn``)."""
        _, state = self._current(native)
        if state is not None and not state.deleted:
            self._began[native] = state
            while len(self._began) > _REMEMBERED:
                del self._began[next(iter(self._began))]

    def turn(self, native: str, *, answered: bool, at: int | None = None, said: Said | None = None) -> None:
        """A turn ended (answered, or with an error) at ``at`` (default: now): activity, counted once with what the
        agent's files say of it (``SessionRegistry.record_turn``). Stamped with the time the relay saw it end, not
        the time this thread writes it, so that sessions of several proxies on one store sort by when their turns
        really ended. A turn in a session a proxy retired as not kept brings it back: the agent has it. ``said``: its
        messages and usage as the proxy captured them (``registry.proxy.capture``)."""
        sid, state = self._current(native)
        if state is not None and state.deleted and retired(state) is Retired.UNKEPT:
            self.session(native, state.cwd, list(state.additional_directories), live=True)
            sid, state = self._current(native)
        began = self._began.pop(native, None)
        if state is not None and not state.deleted:
            messages = 2 if answered else 1
            made_here, agent = native in self.book.made_here, self.identity.name
            conversation, usage = kept(said, self.registry, sid, made_here=made_here, agent=agent)
            self.registry.record_turn(
                sid, messages=messages, began=began, at=at, conversation=conversation, usage=usage
            )

    def prompt_title(self, native: str, text: str) -> None:
        """After a turn: a title from its prompt for a session that has none, told to the client - or, for a
        session made here whose title came from elsewhere first (an import of the agent's files), that title.
        ``text``: the prompt's, or the title made from it (the same title: ``prompt_title`` keeps its own)."""
        title = prompt_title(text)
        sid, state = self._current(native)
        if state is None or state.deleted:
            return
        if state.title is None and title is not None:
            info = self.registry.change_info(sid, title=title, title_source=TitleSource.PROMPT)
            if info.title == title:
                self.titles.push(native, title)
        elif (
            state.title is not None
            and state.title_source is not TitleSource.USER
            and native in self.book.made_here
            and not self.titles.told(native)
        ):
            self.titles.push(native, state.title)

    def agent_titled(self, native: str, title: str | None) -> None:
        """Queue the agent's title for a session (``agent_title``); one over the title limit is refused now, as the
        registry would refuse it, and never waits in the queue (a flood of them cannot push out what matters)."""
        if not _too_long(native, title):
            self.put(lambda r: r.agent_title(native, title), held=(native, title))

    def agent_title(self, native: str, title: str | None) -> None:
        """The agent titled (or untitled) a session: recorded as the agent's, never over the user's. A title sent
        before the session is known (while ``session/new`` or ``load`` is being answered: agents replay their
        titles on load) is kept until it is, within ``EARLY_TITLE_BYTES``; one over the title limit is refused
        as the registry would refuse it."""
        if _too_long(native, title):
            return
        sid, state = self._current(native)
        if state is None:
            size = _size(native, title)
            if native not in self._early_titles and self._early_bytes + size <= EARLY_TITLE_BYTES:
                self._early_titles[native] = title
                self._early_bytes += size
            return
        if state.deleted:
            return
        if title is None and state.title_source is TitleSource.USER:
            return  # the agent clears its own titles only
        self.registry.change_info(sid, title=title, title_source=TitleSource.AGENT)

    # -- what the client asked for, answered from memory ------------------------------------------------

    def command(self, native: str, row: SessionCommand, params: Mapping[str, Any]) -> None:
        """A session command the client asked for (``registry.session_commands``), on the store's current id of
        the agent's session ``native``."""
        row.run(self.registry, self._current(native)[0], params)


def _too_long(native: str, title: str | None) -> bool:
    if title is not None and len(title) > MAX_TITLE_LENGTH:
        log.warning("not recorded: the agent's title for %r is %d characters long", native[:80], len(title))
        return True
    return False


def _size(native: str, title: str | None) -> int:
    return len(native.encode()) + (0 if title is None else len(title.encode()))
