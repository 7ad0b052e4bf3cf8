"""The agent's past, read once at start on a thread of its own, and reconciled with the registry both ways.

When the agent has answered ``initialize``, its past is read: by the importer of its history files when one
reads this agent (``registry.agents.IMPORTED``), else through its own ``session/list`` when it advertises one
(every page, each entry on its own: a malformed entry is skipped, not the history). The importer runs in a
process of its own (``acp-registry import-agents``) when another process can open the store, so a relayed line
never waits for the import's share of this interpreter; on a ``memory://`` store it runs on the thread. What the
agent has that the registry lost (a killed proxy's queue) comes back that way. Then the other way: a session of
this agent that never had a turn, is not live here and is not in the agent's past was not kept by the agent; it
is retired (``Recorder.retire_unkept``), so the list offers only what the agent can open. ``state`` says where
this is (``HistoryState``); the first ``session/list`` waits for ``done`` within its bound.
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
from typing import Any, Final

import msgspec

from events.factory import split_url
from registry.agents import IMPORTED, native_id
from registry.errors import InvalidParams
from registry.filters import list_filter
from registry.model import parse_time
from registry.proxy.book import Status
from registry.proxy.recorder import Recorder
from registry.proxy.wire import AgentLine

__all__ = ["History", "HistoryState"]

log = logging.getLogger("acp_registry.proxy")

_AGENT_LIST_PAGES: Final = 200  # pages of the agent's own session/list walked for its past, at most
_AGENT_LIST_WAIT: Final = 60.0  # seconds for one page of the agent's own list (a slow agent, not a deadline)
_META_PATH: Final = "acp-session-registry/path"  # set on a session by the importer that read its file
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
            read: Callable[[], set[str] | None] = set  # nothing to read: reconcile only
            if agent in IMPORTED:
                read = functools.partial(self._import, agent)
            elif own_list:
                read = self._walk_agent_list
            self.state = HistoryState.IMPORTING
            self.done.clear()
            self._thread = threading.Thread(
                target=self._run, args=(read, reads_past), name="acp-registry-proxy-history"
            )
            self._thread.start()

    def _run(self, read: Callable[[], set[str] | None], reads_past: bool) -> None:
        try:
            shown = read()
            if shown is None:
                self.state = HistoryState.FAILED
                return
            self._reconcile(shown)
            self.state = HistoryState.READY if reads_past else HistoryState.NONE
        except Exception:
            log.exception("reading the agent's past sessions failed")
            self.state = HistoryState.FAILED
        finally:
            self.done.set()

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- reading -------------------------------------------------------------------------------------

    def _import(self, agent: str) -> set[str] | None:
        if self._store_url is not None:
            return self._import_apart(agent, self._store_url)
        from registry.importers import Importer, sources  # noqa: PLC0415 - only on this thread

        try:
            summary = Importer(self._registry.store, sources([agent])).run()
        except Exception as exc:
            log.warning("reading %s's past sessions failed: %s", agent, exc)
            return None
        for part in summary.agents:
            log.info("%s's past sessions: %d added, %d changed (%s)", agent, part.added, part.changed, part.root)
        return set()  # the importer marks what it read (the session's _meta path)

    def _import_apart(self, agent: str, url: str) -> set[str] | None:
        """``acp-registry import-agents --agent AGENT`` on the same store, in a process of its own (the URL goes in
        the environment, not on a command line others can read); ended when the proxy closes first."""
        from registry.cli.stores import ENV_STORE  # noqa: PLC0415 - the command line's own name for it

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
        return set()

    def _walk_agent_list(self) -> set[str] | None:
        shown: set[str] = set()
        cursor: str | None = None
        for _ in range(_AGENT_LIST_PAGES):
            done = threading.Event()
            box: list[AgentLine | None] = []

            def answered(
                answer: AgentLine | None, box: list[AgentLine | None] = box, done: threading.Event = done
            ) -> None:
                box.append(answer)
                done.set()

            self._request_agent("session/list", {} if cursor is None else {"cursor": cursor}, answered)
            while not done.wait(0.5):
                if self._closing.is_set():
                    return None
            if not box or box[0] is None or not len(box[0].result):
                return None
            try:
                page = _decode_listed(box[0].result)
            except msgspec.DecodeError:
                return None
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
                break
        return shown

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
        self._recorder.put(lambda r: r.session(native, cwd, at=at))
        if isinstance(title, str):
            self._recorder.put(lambda r: r.agent_title(native, title))
        return native

    # -- reconciling ---------------------------------------------------------------------------------

    def _reconcile(self, shown: set[str]) -> None:
        """Retire this agent's sessions that never had a turn and that neither this connection nor the agent's
        past shows (a killed proxy's, or one from before the proxy retired them at its close)."""
        if not self._recorder.wait_idle(_AGENT_LIST_WAIT):
            return
        agent = self._identity.name
        model = self._registry.read_model
        as_of = model.catch_up()
        unkept: list[str] = []
        for page in model.pages(as_of=as_of, where=list_filter(archived="include", agent=agent), limit=500):
            for state in page.states:
                native = native_id(agent, state.session_id)
                if native is None or state.messages > 0 or native in shown or _META_PATH in (state.meta or {}):
                    continue
                if state.created_at > self._recorder.started_at - UNKEPT_AFTER:
                    continue
                if self._book.entry(native).status is Status.LIVE:
                    continue
                unkept.append(native)
        for native in unkept:
            self._recorder.put(lambda r, native=native: r.retire_unkept(native))  # type: ignore[misc]
        if unkept:
            log.info("%d sessions that never had a turn and that the agent does not have were retired", len(unkept))
        self._recorder.wait_idle(_AGENT_LIST_WAIT)
