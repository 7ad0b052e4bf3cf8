"""The agent's past, read once at start on a thread of its own, and reconciled with the registry both ways.

When the agent has answered ``initialize``, sessions recorded under another name of the agent are taken over
(``registry.proxy.names``), then its past is read: by the importer of its history files when one reads this agent
(``registry.agents.IMPORTED``), else through its own ``session/list`` when it advertises one (every page, each
entry on its own: a malformed entry is skipped, not the history; an agent whose list answers one cwd at a time,
``Known.lists_per_cwd``, is asked once more for each cwd the registry knows of it). The importer runs in a process
of its own (``acp-registry import-agents``) when another process can open the store, so a relayed line never
waits for the import's share of this interpreter; on a ``memory://`` store it runs on the thread. What the agent
has that the registry lost (a killed proxy's queue) comes back that way, and a session a proxy had retired as not
kept comes back as the same record. Then the other way: a session of this agent that the agent's past does not
show is retired (``Recorder.retire_unkept``) when that absence is evidence - the past was read whole (every page,
within the bound, none failed) for the session's cwd - and the user did nothing with it (``Recorder.touched``: no
mark of a user's command, no turn, no fork), it is not live here and it is older than ``UNKEPT_AFTER``; an
agent known to keep sessions without a turn has none retired. ``state`` says where this is (``HistoryState``);
the first ``session/list`` waits for ``shown`` (the past recorded) within its bound (``wait``).
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import msgspec

from events.factory import ENV_STORE, split_url
from registry.agents import IMPORTED, keeps_unprompted, known, native_id
from registry.errors import InvalidParams
from registry.filters import list_filter
from registry.model import parse_time
from registry.proxy.book import Status
from registry.proxy.names import take_over
from registry.proxy.recorder import Recorder
from registry.proxy.wire import AgentLine

__all__ = ["Evidence", "History", "HistoryState"]

log = logging.getLogger("acp_registry.proxy")

_AGENT_LIST_PAGES: Final = 200  # pages of the agent's own session/list walked for its past, at most
_AGENT_LIST_WAIT: Final = 60.0  # seconds for one page of the agent's own list (a slow agent, not a deadline)
_META_PATH: Final = "acp-session-registry/path"  # set on a session by the importer that read its file
OWN_LIST_WAIT: Final = 30.0
"""Seconds the first ``session/list`` waits for the agent's own list of its past (one request, however slowly an
agent answers its first one), when that is where the past comes from; ``--list-wait`` bounds an import of files."""
UNKEPT_AFTER: Final = 60 * 1_000_000_000
"""A session made less than this long (ns) before the proxy started is not retired at start: another window's
proxy may have it live (one whose turn comes later brings it back anyway: ``Recorder.turn``)."""

RequestAgent = Callable[[str, Any, Callable[[AgentLine | None], None]], None]


class HistoryState(enum.Enum):
    NONE = "none"  # not read (no importer, no list of its own, or --no-history)
    IMPORTING = "importing"
    READY = "ready"
    FAILED = "failed"


class _Listed(msgspec.Struct, rename="camel"):
    sessions: list[Any]
    next_cursor: Any = None


_decode_listed: Final = msgspec.json.Decoder(_Listed).decode


class Evidence(NamedTuple):
    """What reading the agent's past showed: the agent's ids it listed, and where its absence is evidence - the
    cwds whose list was read whole (None: all of them; an empty set: none)."""

    shown: frozenset[str]
    covered: frozenset[str] | None

    def absent(self, native: str, cwd: str) -> bool:
        """Whether the past says the agent does not have ``native`` (in ``cwd``)."""
        return native not in self.shown and (self.covered is None or cwd in self.covered)


_WHOLE: Final = Evidence(frozenset(), None)  # an import of the agent's files: its records say what it has


class History:
    """Reads the agent's past and reconciles it with the registry, on its own thread."""

    def __init__(
        self, recorder: Recorder, request_agent: RequestAgent, *, enabled: bool = True, store_url: str | None = None
    ) -> None:
        self._recorder = recorder
        self._registry, self._identity, self._book = recorder.registry, recorder.identity, recorder.book
        self._request_agent = request_agent
        self._enabled = enabled
        # Another process opens the same store from its URL - not a memory:// one (as the store factory reads it).
        self._store_url = store_url if store_url and split_url(store_url)[0] != "memory" else None
        self.state = HistoryState.NONE
        self.done = threading.Event()
        self.done.set()
        self.shown = threading.Event()  # what the past shows is recorded (``done``: and reconciled)
        self.shown.set()
        self._own_list = False
        self.own_list_wait = OWN_LIST_WAIT
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()

    def start(self, *, own_list: bool) -> None:
        """Begin reading the past (once; again after a failure, e.g. when the agent needed ``authenticate``)."""
        if not self._enabled:
            return
        with self._lock:
            if self._thread is not None and self.state is not HistoryState.FAILED:
                return
            if self._thread is not None:
                self._thread.join()
            agent = self._identity.fix()
            reads_past = agent in IMPORTED or own_list
            # No past to read: what was made here and never had a turn is what most agents forget (DESIGN.md).
            read: Callable[[], Evidence | None] = lambda: _WHOLE  # noqa: E731
            if agent in IMPORTED:
                read = functools.partial(self._import, agent)
            elif own_list:
                read = self._walk_agent_list
            self._own_list = agent not in IMPORTED and own_list
            self.state = HistoryState.IMPORTING
            self.done.clear()
            self.shown.clear()
            self._thread = threading.Thread(
                target=self._run, args=(read, reads_past), name="acp-registry-proxy-history"
            )
            self._thread.start()

    def _run(self, read: Callable[[], Evidence | None], reads_past: bool) -> None:
        try:
            try:
                take_over(self._registry, self._identity.name, self._identity.others)
            except Exception as exc:  # the sessions stay where they are; the past is read all the same
                log.warning("taking over the sessions held under another name of the agent failed: %s", exc)
            evidence = read()
            if evidence is None:
                self.state = HistoryState.FAILED
                return
            self._recorder.wait_idle(_AGENT_LIST_WAIT)  # what the past showed is written: a list now is whole
            self.state = HistoryState.READY if reads_past else HistoryState.NONE
            self.shown.set()
            self._reconcile(evidence)
        except Exception:
            log.exception("reading the agent's past sessions failed")
            self.state = HistoryState.FAILED
        finally:
            self.shown.set()
            self.done.set()

    def wait(self, timeout: float) -> bool:
        """Wait for the past to be recorded, within ``timeout`` - or, when the past is the agent's own list, within
        ``own_list_wait``: that is one request the agent answers, not a walk of files, so the first
        ``session/list`` waits for it and is whole - then for the reconcile after it, within ``timeout`` again."""
        if not self.shown.wait(max(timeout, self.own_list_wait) if self._own_list else timeout):
            return False
        return self.done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        self._closing.set()
        with self._lock:  # a thread ``start`` made is started before the lock is let go
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    # -- reading -------------------------------------------------------------------------------------

    def _import(self, agent: str) -> Evidence | None:
        if self._store_url is not None:
            return self._import_apart(agent, self._store_url)
        from registry.importers import Importer, sources  # noqa: PLC0415 - only on this thread

        try:
            summary = Importer(self._registry.store, sources([agent]), keep_secrets=self._registry.keep_secrets).run()
        except Exception as exc:
            log.warning("reading %s's past sessions failed: %s", agent, exc)
            return None
        for part in summary.agents:
            log.info("%s's past sessions: %d added, %d changed (%s)", agent, part.added, part.changed, part.root)
        return _WHOLE

    def _import_apart(self, agent: str, url: str) -> Evidence | None:
        """``acp-registry import-agents --agent AGENT`` on the same store, in a process of its own (the URL goes in
        the environment, not on a command line others can read); ended when the proxy closes first."""
        command = [sys.executable, "-m", "registry.cli", "import-agents", "--agent", agent, "--json"]
        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, ENV_STORE: url},
            )
        except OSError as exc:
            log.warning("reading %s's past sessions failed: cannot start the importer: %s", agent, exc)
            return None
        while True:
            try:
                out, err = child.communicate(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                if self._closing.is_set():
                    child.terminate()
                    child.communicate()
                    return None
        if child.returncode != 0:
            said = err.decode(errors="replace").strip().splitlines()
            log.warning(
                "reading %s's past sessions failed (the importer exited %d): %s",
                agent,
                child.returncode,
                said[-1] if said else "it said nothing",
            )
            return None
        # Its summary as it printed it (``--json``): decoding it here would load the importer's modules into
        # this interpreter, which running it apart keeps out.
        log.info("%s's past sessions: %s", agent, out.decode(errors="replace").strip())
        return _WHOLE

    def _walk_agent_list(self) -> Evidence | None:
        """The agent's own list, walked: once without a cwd, and, for an agent whose list answers per cwd, once
        for each cwd the registry knows of it and the one it runs in. None when its first answer is an error."""
        entry = known(self._identity.name)
        asks: list[str | None] = [None]
        if entry is not None and entry.lists_per_cwd:
            asks += sorted(self._agent_cwds() | {self._recorder.agent_cwd})
        shown: set[str] = set()
        covered: set[str] = set()
        for n, cwd in enumerate(asks):
            whole = self._walk(cwd, shown)
            if whole is None and n == 0:
                return None
            if whole and cwd is not None:
                covered.add(cwd)
            elif whole and not (entry is not None and entry.lists_per_cwd):
                return Evidence(frozenset(shown), None)
        return Evidence(frozenset(shown), frozenset(covered))

    def _walk(self, cwd: str | None, shown: set[str]) -> bool | None:
        """One walk of the agent's list (for ``cwd``), adding what it shows to ``shown``: whether it was read whole
        (False: a page failed or the bound was hit after the first; None: the first page failed)."""
        cursor: str | None = None
        for number in range(_AGENT_LIST_PAGES):
            params: dict[str, str] = {} if cwd is None else {"cwd": cwd}
            if cursor is not None:
                params["cursor"] = cursor
            page = self._page(params)
            if page is None:
                return None if number == 0 else False
            skipped = 0
            for item in page.sessions:
                native = self._listed(item)
                if native is None:
                    skipped += 1
                else:
                    shown.add(native)
            if skipped:
                log.warning("%d entries of the agent's own session/list were not sessions; skipped", skipped)
            cursor = page.next_cursor if isinstance(page.next_cursor, str) else None
            if not cursor:
                return True
        log.warning("the agent's own session/list has more than %d pages: the rest is not read", _AGENT_LIST_PAGES)
        return False

    def _page(self, params: dict[str, str]) -> _Listed | None:
        done = threading.Event()
        box: list[AgentLine | None] = []

        def answered(answer: AgentLine | None) -> None:
            box.append(answer)
            done.set()

        self._request_agent("session/list", params, answered)
        while not done.wait(0.5):
            if self._closing.is_set():
                return None
        if not box or box[0] is None or not len(box[0].result):
            return None
        try:
            return _decode_listed(box[0].result)
        except msgspec.DecodeError:
            return None

    def _agent_cwds(self) -> set[str]:
        """The cwds of the sessions the registry holds for this agent."""
        model = self._registry.read_model
        as_of = model.catch_up()
        where = list_filter(None, archived="include", agent=self._identity.name)
        return {state.cwd for page in model.pages(as_of=as_of, where=where, limit=500) for state in page.states}

    def _listed(self, item: Any) -> str | None:
        if not isinstance(item, dict):
            return None
        native, cwd, title = item.get("sessionId"), item.get("cwd"), item.get("title")
        if not isinstance(native, str) or not native or not isinstance(cwd, str):
            return None
        at: int | None = None
        if isinstance(item.get("updatedAt"), str):
            try:
                at = parse_time(item["updatedAt"])
            except (InvalidParams, ValueError):
                at = None
        named = title if isinstance(title, str) else None
        self._recorder.put(lambda r: r.session(native, cwd, at=at, title=named), held=(native, cwd, named))
        return native

    # -- reconciling ---------------------------------------------------------------------------------

    def _reconcile(self, evidence: Evidence) -> None:
        """Retire this agent's sessions that the agent's past shows it does not have (``Evidence.absent``), that
        the user did nothing with (``Recorder.touched``), that are not live here and were made before
        ``UNKEPT_AFTER`` (a killed proxy's, or one from before the proxy retired them at its close)."""
        if not self._recorder.wait_idle(_AGENT_LIST_WAIT):
            return
        agent = self._identity.name
        if keeps_unprompted(agent):
            return
        model = self._registry.read_model
        as_of = model.catch_up()
        unkept: list[str] = []
        for page in model.pages(as_of=as_of, where=list_filter(archived="include", agent=agent), limit=500):
            for state in page.states:
                native = native_id(agent, state.session_id)
                if native is None or not evidence.absent(native, state.cwd) or _META_PATH in (state.meta or {}):
                    continue
                if state.messages > 0 or state.created_at > self._recorder.started_at - UNKEPT_AFTER:
                    continue
                if self._book.entry(native).status is Status.LIVE or self._recorder.touched(state):
                    continue
                unkept.append(native)
        for native in unkept:
            self._recorder.put(lambda r, native=native: r.retire_unkept(native), held=(native,))  # type: ignore[misc]
        if unkept:
            log.info("%d sessions that never had a turn and that the agent does not have were retired", len(unkept))
        self._recorder.wait_idle(_AGENT_LIST_WAIT)
