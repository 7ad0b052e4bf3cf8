"""The proxy's recording, off the relay's path: observations go into a queue, one thread writes them.

The relay and the surface only ``put`` what they saw (a session created, loaded or resumed, a turn answered, the
agent's title, a change the client asked for and was answered from memory); the recorder thread applies each to
the registry in order. A registry failure (disk full, a write lock held elsewhere, PostgreSQL gone) never reaches
the conversation: the failure is logged once, the recorder keeps the observation and tries again (every ``retry``
seconds, up to ``MAX_BACKLOG`` observations kept; older ones beyond that are dropped and counted), logs once when
recording resumes, and meanwhile ``degraded`` says why, so ``session/list`` can say so instead of answering from
stale data silently. An observation the registry refuses for its content (a relative cwd, an over-long title) is
skipped with a log line; that is not a fault of the store. What a killed proxy had queued comes back from the
agent's own history at the next start (``registry.proxy.history``).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from events.codec import now_ns
from events.errors import RegistryError
from events.model import TitleSource
from registry.agents import META_RETIRED, Retired, retired, split_id, stored_id
from registry.commands import prompt_title
from registry.errors import InvalidParams, SessionExists, SessionNotFound
from registry.limits import MAX_TITLE_LENGTH
from registry.model import SessionState
from registry.proxy.book import Book, Status
from registry.proxy.identity import Identity
from registry.proxy.titles import TitlePolicy
from registry.service import SessionRegistry
from registry.session_commands import SessionCommand

__all__ = ["EARLY_TITLE_BYTES", "MAX_BACKLOG", "Observation", "Recorder"]

log = logging.getLogger("acp_registry.proxy")

MAX_BACKLOG: Final = 100_000
_REMEMBERED: Final = 10_000
EARLY_TITLE_BYTES: Final = 1 << 20
"""Bytes of agent titles kept for sessions not recorded yet (ids and titles, as UTF-8): beyond that, dropped."""

Observation = Callable[["Recorder"], None]
"""One thing the relay saw, as a function of the recorder that writes it."""


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
    ) -> None:
        self.registry = registry
        self.identity = identity
        self.book = book
        self.titles = titles
        self.started_at = now_ns()
        self._retry = retry
        self._items: collections.deque[Observation] = collections.deque()
        self._cond = threading.Condition()
        self._put = 0
        self._done = 0
        self._dropped = 0
        self._closed = False
        self.degraded: str | None = None
        self._early_titles: dict[str, str | None] = {}  # agent titles of sessions not recorded yet
        self._early_bytes = 0
        self._began: dict[str, int] = {}  # the count of sessions whose turn is under way, as it began
        self._thread = threading.Thread(target=self._run, name="acp-registry-proxy-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- the relay's side ---------------------------------------------------------------------------

    def put(self, observation: Observation) -> None:
        """Queue one observation; never blocks on the registry."""
        with self._cond:
            if len(self._items) >= MAX_BACKLOG:
                self._items.popleft()
                self._dropped += 1
                self._done += 1
            self._items.append(observation)
            self._put += 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every observation queued so far is written (True), or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._put
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

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
            if self._apply(item):
                with self._cond:
                    if self._items and self._items[0] is item:
                        self._items.popleft()
                    self._done += 1
                    self._cond.notify_all()
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
            dropped = f" ({self._dropped} observations beyond {MAX_BACKLOG} were dropped)" if self._dropped else ""
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
    ) -> None:
        """A session of the agent is live (``live``: new, loaded, resumed, forked; ``made``: by ``session/new`` or
        fork) or shown in its past: known to the registry. ``made`` under an id the registry holds for a
        conversation from before this proxy started: the agent reused the id - the old record is retired
        (superseded, kept in the history) and this one is recorded as the next generation. A session a proxy
        retired as not kept that the agent has after all comes back as the next generation too; one a user
        deleted never does."""
        agent = self.identity.fix()
        sid, state = self._current(native)
        if state is not None and not state.deleted and made and state.created_at < self.started_at:
            self._retire(sid, state, Retired.SUPERSEDED)
            sid, state = self._following(sid), None
        elif state is not None and state.deleted:
            if retired(state) is None:
                return  # deleted in the registry: a tombstone wins over what the agent still has
            sid, state = self._following(sid), self.registry.state(self._following(sid))
        if state is None and cwd is not None:
            with contextlib.suppress(SessionExists):  # another proxy (or the importer) was first: the same session
                self.registry.create(cwd, session_id=sid, additional_directories=directories or (), at=at, agent=agent)
            state = self.registry.state(sid)
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
        self.registry.delete(sid, reason=f"retired by the proxy: {why.value}")

    def retire_unkept(self, native: str) -> None:
        """A session made through the proxy that never had a turn, which the agent did not keep: retired (not
        listed; a load of it is still forwarded, and if the agent has it after all, it comes back)."""
        sid, state = self._current(native)
        if state is None or state.deleted or state.messages > 0 or self.book.entry(native).status is Status.LIVE:
            return
        self._retire(sid, state, Retired.UNKEPT)
        self.book.set(native, sid, Status.UNKEPT)

    def _apply_early_title(self, native: str) -> None:
        if native in self._early_titles:
            title = self._early_titles.pop(native)
            self._early_bytes -= _size(native, title)
            self.agent_title(native, title)

    def fork(self, native: str, source: str, cwd: str, directories: list[str] | None = None) -> None:
        """The agent forked ``source`` into ``native``: recorded with its parent where the registry knows the
        source (else as a session of its own)."""
        agent = self.identity.fix()
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
        """A prompt went to the agent: the session's count now is what the turn adds to (``turn``)."""
        _, state = self._current(native)
        if state is not None and not state.deleted:
            self._began[native] = state.messages
            while len(self._began) > _REMEMBERED:
                del self._began[next(iter(self._began))]

    def turn(self, native: str, *, answered: bool, at: int | None = None) -> None:
        """A turn ended (answered, or with an error) at ``at`` (default: now): activity, counted once with what the
        agent's files say of it (``SessionRegistry.record_turn``). Stamped with the time the relay saw it end, not
        the time this thread writes it, so that sessions of several proxies on one store sort by when their turns
        really ended. A turn in a session a proxy retired as not kept brings it back: the agent has it."""
        sid, state = self._current(native)
        if state is not None and state.deleted and retired(state) is Retired.UNKEPT:
            self.session(native, state.cwd, list(state.additional_directories), live=True)
            sid, state = self._current(native)
        before = self._began.pop(native, None)
        if state is not None and not state.deleted:
            messages = 2 if answered else 1
            self.registry.record_turn(
                sid, before=state.messages if before is None else before, messages=messages, at=at
            )

    def prompt_title(self, native: str, text: str) -> None:
        """After a turn: a title from its prompt for a session that has none, told to the client - or, for a
        session made here whose title came from elsewhere first (an import of the agent's files), that title."""
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

    def agent_title(self, native: str, title: str | None) -> None:
        """The agent titled (or untitled) a session: recorded as the agent's, never over the user's. A title sent
        before the session is known (while ``session/new`` or ``load`` is being answered: agents replay their
        titles on load) is kept until it is, within ``EARLY_TITLE_BYTES``; one over the title limit is refused
        as the registry would refuse it."""
        if title is not None and len(title) > MAX_TITLE_LENGTH:
            log.warning("not recorded: the agent's title for %r is %d characters long", native[:80], len(title))
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


def _size(native: str, title: str | None) -> int:
    return len(native.encode()) + (0 if title is None else len(title.encode()))
