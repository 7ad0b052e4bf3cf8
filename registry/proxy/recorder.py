"""The proxy's recording, off the relay's path: observations go into a queue, one thread writes them.

The relay threads only ``put`` what they saw (a session created, loaded or resumed, a turn answered, the agent's
title); the recorder thread applies each to the registry in order. A registry failure (disk full, PostgreSQL
gone) never reaches the conversation: the failure is logged once, the recorder keeps the observation and tries
again (every ``retry`` seconds, up to ``MAX_BACKLOG`` observations kept; older ones beyond that are dropped and
counted), logs once when recording resumes, and meanwhile ``degraded`` says why, so ``session/list`` can say so
instead of answering from stale data silently. An observation the registry refuses for its content (a
relative cwd, an over-long title) is skipped with a log line; that is not a fault of the store.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from events.errors import RegistryError
from events.model import TitleSource
from registry.commands import prompt_title
from registry.errors import InvalidParams, SessionExists, SessionNotFound
from registry.proxy.names import stored_id
from registry.service import SessionRegistry

__all__ = ["MAX_BACKLOG", "MAX_EARLY_TITLES", "Observation", "Recorder"]

log = logging.getLogger("acp_registry.proxy")

MAX_BACKLOG: Final = 100_000
MAX_EARLY_TITLES: Final = 1000

Observation = Callable[["Recorder"], None]
"""One thing the relay saw, as a function of the recorder that writes it."""


class Recorder:
    """Writes observations to ``registry`` for agent ``agent`` on its own thread; ``push`` sends a line to the
    client (the proxy's own ``session_info_update`` for a title it gave)."""

    def __init__(
        self, registry: SessionRegistry, push: Callable[[str, dict[str, Any]], None], *, retry: float = 1.0
    ) -> None:
        self.registry = registry
        self.agent = ""
        self._push = push
        self._retry = retry
        self._items: collections.deque[Observation] = collections.deque()
        self._cond = threading.Condition()
        self._put = 0
        self._done = 0
        self._dropped = 0
        self._closed = False
        self.degraded: str | None = None
        self._early_titles: dict[str, str | None] = {}  # agent titles of sessions not recorded yet
        self._thread = threading.Thread(target=self._run, name="acp-registry-proxy-recorder", daemon=True)
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
        """Write what is queued (within ``timeout``), then stop the thread."""
        if not self.wait_idle(timeout):
            log.error("%d observations were not recorded (%s)", len(self._items), self.degraded or "the store is slow")
        with self._cond:
            self._closed = True
            self._cond.notify_all()
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

    def session(
        self, native: str, cwd: str | None, directories: list[str] | None = None, *, at: int | None = None
    ) -> None:
        """A session of the agent is live (new, loaded, resumed, forked) or listed by it: known to the registry."""
        sid = stored_id(self.agent, native)
        if self.registry.state(sid) is None and cwd is not None:
            with contextlib.suppress(SessionExists):  # another proxy (or the importer) was first: the same session
                self.registry.create(
                    cwd, session_id=sid, additional_directories=directories or (), at=at, agent=self.agent
                )
        self._apply_early_title(native)

    def _apply_early_title(self, native: str) -> None:
        if native in self._early_titles:
            self.agent_title(native, self._early_titles.pop(native))

    def fork(self, native: str, source: str, cwd: str, directories: list[str] | None = None) -> None:
        """The agent forked ``source`` into ``native``: recorded with its parent where the registry knows the
        source (else as a session of its own)."""
        sid = stored_id(self.agent, native)
        if self.registry.state(sid) is not None:
            self._apply_early_title(native)
            return
        parent = self.registry.state(stored_id(self.agent, source))
        if parent is None or parent.deleted:
            self.session(native, cwd, directories)
            return
        with contextlib.suppress(SessionExists):
            self.registry.fork(
                parent.session_id, cwd, additional_directories=directories or (), session_id=sid, agent=self.agent
            )
        self._apply_early_title(native)

    def turn(self, native: str, *, answered: bool, at: int | None = None) -> None:
        """A turn ended (answered, or with an error) at ``at`` (default: now): activity. Stamped with the time the
        relay saw it end, not the time this thread writes it, so that sessions of several proxies on one store sort
        by when their turns really ended; never before the session's last activity."""
        sid = stored_id(self.agent, native)
        state = self.registry.state(sid)
        if state is not None and not state.deleted:
            when = None if at is None else max(at, state.updated_at or 0)
            self.registry.record_activity(sid, messages=2 if answered else 1, at=when)

    def prompt_title(self, native: str, text: str) -> None:
        """After a turn: a title from its prompt for a session that has none, pushed to the client."""
        title = prompt_title(text)
        state = self.registry.state(stored_id(self.agent, native))
        if title is None or state is None or state.deleted or state.title is not None:
            return
        info = self.registry.change_info(state.session_id, title=title, title_source=TitleSource.PROMPT)
        if info.title == title:
            self._push(native, {"sessionUpdate": "session_info_update", "title": title})

    def agent_title(self, native: str, title: str | None) -> None:
        """The agent titled (or untitled) a session: recorded as the agent's, never over the user's. A title sent
        before the session is known (while ``session/new`` or ``load`` is being answered: agents replay their
        titles on load) is kept until it is (at most ``MAX_EARLY_TITLES`` of them)."""
        sid = stored_id(self.agent, native)
        state = self.registry.state(sid)
        if state is None:
            if len(self._early_titles) < MAX_EARLY_TITLES:
                self._early_titles[native] = title
            return
        if state.deleted:
            return
        if title is None and state.title_source is TitleSource.USER:
            return  # the agent clears its own titles only
        self.registry.change_info(sid, title=title, title_source=TitleSource.AGENT)

    def delete(self, native: str) -> None:
        self.registry.delete(stored_id(self.agent, native))
