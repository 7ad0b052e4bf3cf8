"""Offered means openable, verified: after a session's turn on this connection, the agent's own list says whether
the agent keeps it.

A session is offered (listed, ``saved``) once it had a turn, because most agents keep a session from its first turn
on - but an agent may not (measured: fast-agent 0.10.48, claude-agent-acp 0.101.0 and mistral-vibe 2.26.1 keep
sessions made in another folder than the one they run in, each listing it under its own cwd - fast-agent only when
asked for that cwd, and it opens it only with that cwd). So for an agent that advertises ``session/list``, the proxy
asks it, after a session's answered turn here, for that session's cwd (one request, its pages walked; again after
each turn until it shows the session): a list read whole that does not show the session after its last turn is
the agent's word that it did not keep it, and the session is retired when this connection ends
(``Recorder.retire_unkept``; restored, the same record, if the agent has it after all). Only a list asked for after
the session's latest turn says so: a later turn takes back what an earlier list said (an agent may save a session
only at a later turn - claude-agent-acp after a cancelled one - and the connection may end before the list asked
after that turn answers). Whatever fails - an error, a page bound, no answer - proves nothing and changes nothing.
The answers come on the agent's reader thread; nothing here waits on them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Final

import msgspec

from registry.proxy.wire import AgentLine

__all__ = ["KeptCheck"]

log = logging.getLogger("acp_registry.proxy")

_PAGES: Final = 50  # pages of the agent's list walked for one session, at most
_REMEMBERED: Final = 10_000

RequestAgent = Callable[[str, Any, Callable[[AgentLine | None], None]], None]


class _Page(msgspec.Struct, rename="camel"):
    sessions: list[Any]
    next_cursor: Any = None


_decode_page: Final = msgspec.json.Decoder(_Page).decode


class KeptCheck:
    """Which sessions of this connection the agent's own list shows it did not keep (``unkept``)."""

    def __init__(self, request_agent: RequestAgent) -> None:
        self._request_agent = request_agent
        self._lock = threading.Lock()
        self._cwds: dict[str, str] = {}  # sessions opened here, by the agent's id: their cwd
        self._turns: dict[str, int] = {}  # turns answered here, by the agent's id: which list is about the latest
        self.kept: set[str] = set()
        self.unkept: set[str] = set()

    def opened(self, native: str, cwd: object) -> None:
        """``native`` was made or opened here in ``cwd`` (as the request said)."""
        if isinstance(cwd, str) and cwd:
            with self._lock:
                if len(self._cwds) < _REMEMBERED:
                    self._cwds[native] = cwd

    def turned(self, native: str) -> None:
        """A turn of ``native`` was answered: ask the agent's list for its cwd - after each turn until the list
        shows it (an agent that saves a moment after it answers is not taken at its first word)."""
        with self._lock:
            cwd = self._cwds.get(native)
            if cwd is None or native in self.kept:
                return
            turn = self._turns[native] = self._turns.get(native, 0) + 1
            self.unkept.discard(native)  # what a list said before this turn no longer holds
        self._ask(native, cwd, turn, None, 0)

    def _ask(self, native: str, cwd: str, turn: int, cursor: str | None, pages: int) -> None:
        params: dict[str, str] = {"cwd": cwd} if cursor is None else {"cwd": cwd, "cursor": cursor}
        self._request_agent("session/list", params, lambda answer: self._answered(native, cwd, turn, answer, pages + 1))

    def _answered(self, native: str, cwd: str, turn: int, answer: AgentLine | None, pages: int) -> None:
        if answer is None or not len(answer.result):
            return  # an error, or the agent ended: no evidence
        try:
            page = _decode_page(answer.result)
        except msgspec.DecodeError:
            return
        if any(isinstance(item, dict) and item.get("sessionId") == native for item in page.sessions):
            with self._lock:
                self.kept.add(native)
                self.unkept.discard(native)
            return
        cursor = page.next_cursor if isinstance(page.next_cursor, str) and page.next_cursor else None
        if cursor is not None and pages < _PAGES:
            self._ask(native, cwd, turn, cursor, pages)
        elif cursor is None:
            with self._lock:
                if self._turns.get(native) != turn:
                    return  # a list asked before the session's latest turn: that turn's own list decides
                self.unkept.add(native)
            log.info("the agent's own list for %s does not show session %s after its turn: not offered", cwd, native)
