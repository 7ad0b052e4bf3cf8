"""What the proxy adds to the conversation it relays: its own answers, its additions, what it observes.

The proxy is one more surface over the method table (``registry.acp.methods``, surface ``"proxy"``), and the
table's rules decide: a method ``Method.forwards`` for the agent's capabilities is relayed; any other method the
table has a proxy role for is answered by the table's own handler (``Method.answer``) in a ``Context`` naming the
agent, so ids are the agent's own and only its sessions are listed; ``capabilities`` says what ``initialize``'s
answer gains. Methods the table does not know are relayed.

The relay talks to the surface through ``route`` (a client request: forward it, or the bytes answering it),
``response`` (the agent's answer to a forwarded request) and ``agent_title``; the surface talks back through a
``Conversation`` (send a line to the client, send a request of its own to the agent). Neither direction waits on
the store here:

- a request naming a session the registry deleted, or another agent's session, is answered -32002 at once from
  the book (``registry.proxy.book``) and never reaches the agent; an id in its stored form (``codex:<id>``, as the
  command line prints it) is relayed as the agent's own id;
- the answered methods run on the surface's own thread, in order. A session command (``set_title``, ``delete``,
  ``archive``...: ``registry.session_commands``) is run on a stand-in that checks without writing - answered once
  written or within ``WRITE_WAIT`` - and queued for the recorder, which runs the same method on the store: a store
  whose write lock is held elsewhere delays no relayed line and no answer beyond that. The first answer waits for
  the agent's past to be read (``list_wait`` seconds at most: a first ``session/list`` then answers with what it
  has and says ``importing`` in ``_meta``; a deletion of a session from the agent's past is not overtaken by its
  import). ``session/list`` waits for the recorder to write what the client has seen happen (``LIST_WAIT``; else
  ``_meta`` says the list is degraded);
- the answers of ``initialize``, ``session/new`` / ``load`` / ``resume`` / ``fork``, ``session/prompt`` and
  ``session/close`` are observed (``registry.proxy.observe``);
- the registry's changes of the agent's sessions, made here or in any other process, reach the client as ``serve``
  sends them (``registry.diffs``: one ``session_info_update`` per change), users' titles among them; the titles the
  agent or the proxy gave are the title policy's (``registry.proxy.titles``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET

from events.codec import now_ns
from events.model import TitleSource
from registry.acp.jsonrpc import Incoming, RequestId, encode_result
from registry.acp.methods import METHODS, Method
from registry.acp.methods import capabilities as capabilities_of
from registry.agents import META_SOURCE_GONE, keeps_unprompted, native_id
from registry.commands import check_session_id, prompt_title
from registry.diffs import SessionInfoUpdate, SessionNotification, Updated, encode_session_update, shown
from registry.errors import InvalidParams, RpcError, SessionNotFound, rpc_error
from registry.fold import Change
from registry.model import META_NAMESPACE, META_PARENT
from registry.proxy import versions
from registry.proxy.capture import Capture
from registry.proxy.context import Conversation, FromMemory, ProxyContext
from registry.proxy.history import History, HistoryState
from registry.proxy.kept import KeptCheck
from registry.proxy.recorder import Recorder
from registry.proxy.turn_usage import record_replay
from registry.proxy.wire import AgentLine, TitleUpdate, encode_error

__all__ = ["LIST_WAIT", "META_DEGRADED", "META_PROXY", "Conversation", "Pending", "Surface"]

log = logging.getLogger("acp_registry.proxy")

LIST_WAIT: Final = 2.0
"""Seconds a ``session/list`` waits for the recorder to write what the client has seen happen."""
WRITE_WAIT: Final = 1.0
"""Seconds a change the client asks for (``set_title``, ``delete``, ...) waits to be written before it is answered
from memory (then the recorder writes it when the store allows)."""
META_PROXY: Final = f"{META_NAMESPACE}/proxy"
META_DEGRADED: Final = f"{META_NAMESPACE}/degraded"
_READS: Final = frozenset({"session/list", "session/status"})
_OBSERVED: Final = frozenset(
    {"initialize", "session/new", "session/load", "session/resume", "session/fork", "session/close", "authenticate"}
)


class Pending(msgspec.Struct):
    """A request sent to the agent, waiting for its answer: the client's (its id, what to observe in the answer)
    or the proxy's own (``own`` gets the answer; None when the agent ended first)."""

    client_id: RequestId
    method: str
    params: Any = None
    own: Callable[[AgentLine | None], None] | None = None


class Surface:
    """The proxy's answers and observations for one client connection."""

    def __init__(self, recorder: Recorder, history: History, conversation: Conversation, *, list_wait: float) -> None:
        self.recorder = recorder
        self.registry, self.identity, self.book, self.titles = (
            recorder.registry,
            recorder.identity,
            recorder.book,
            recorder.titles,
        )
        self.history = history
        self.conversation = conversation
        self.list_wait = list_wait
        self.checks = FromMemory(recorder)
        self.context = ProxyContext(self.checks, agent=self.identity.name)
        self.context.front = self
        self.agent_capabilities: dict[str, Any] = {}
        self._answered_once = False
        self._jobs: queue.SimpleQueue[Incoming | None] = queue.SimpleQueue()
        self._answerer = threading.Thread(target=self._answer_loop, name="acp-registry-proxy-answers")
        self._answerer.start()
        self._following: Any = None
        self._changes: queue.SimpleQueue[Sequence[Change] | None] = queue.SimpleQueue()
        self._changes_thread: threading.Thread | None = None
        self.kept = KeptCheck(conversation.request_agent)
        self.capture = Capture()  # what is said, kept off the relay's path

    # -- the table's rules ----------------------------------------------------------------------------

    def advertised(self, name: str) -> bool:
        """Whether the agent advertised method ``name`` in its ``initialize`` answer (the table's rule)."""
        method = METHODS.get(name)
        return method is not None and method.capability is not None and method.advertised_in(self.agent_capabilities)

    def answers(self, method: Method) -> bool:
        """Whether the proxy answers ``method`` itself (else it is relayed)."""
        return method.role("proxy") is not None and not method.forwards("proxy", self.agent_capabilities)

    # -- client requests ------------------------------------------------------------------------------

    def route(self, message: Incoming) -> Pending | bytes:
        """What to do with a client's request: the ``Pending`` to forward it with, or the bytes answering it now
        (``b""``: the answer comes later, from the surface's thread)."""
        name = message.method
        assert name is not None
        method = METHODS.get(name)
        if method is not None and self.answers(method):
            self._jobs.put(message)
            return b""
        params = message.params
        wire = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(wire, str) and wire:
            try:
                check_session_id(wire)  # " id" is not "id": refused, as the registry refuses it
                refusal: Exception | None = self.book.refusal(wire)
                native = self.book.native(wire)
            except InvalidParams as exc:
                refusal = exc
            except Exception as exc:  # the store cannot be read: the agent decides
                log.warning("could not look up session %r: %s", wire[:80], exc)
                refusal, native = None, wire
            if refusal is not None:
                return encode_error(message.id, rpc_error(refusal))
            params["sessionId"] = native  # the spelling the registry holds: one id, one record
            if name == "session/prompt":  # the agent has it now, whatever becomes of the turn
                self.book.turned.add(native)
                self.recorder.put(lambda r: r.turn_began(native), held=(native,))
                self.capture.prompt(native, params.get("prompt"))
            elif name == "session/load":
                self.capture.load(native)
        return Pending(message.id, name, params)

    def _answer_loop(self) -> None:
        while True:
            message = self._jobs.get()
            if message is None:
                return
            answer = self._answer(message)
            if answer:
                self.conversation.send_client(answer)

    def _answer(self, message: Incoming) -> bytes:
        """The proxy's own answer to a client request (``b""``: it is sent later)."""
        method = METHODS[message.method or ""]
        history = self.history.state  # read first: "ready" then covers every observation the history walk queued
        try:
            if not self._answered_once:  # the agent's past first: what it lists, and what a change applies to
                self._answered_once = True
                self.history.wait(self.list_wait)
                history = self.history.state
            # What the client has seen happen is written first; a change it asks for is answered once written, or
            # from memory (queued for the recorder) when the store does not take it within WRITE_WAIT.
            deadline = time.monotonic() + (LIST_WAIT if method.name in _READS else WRITE_WAIT)
            caught_up = self.recorder.degraded is None and self.recorder.wait_idle(
                LIST_WAIT if method.name in _READS else WRITE_WAIT
            )
            self.context.agent = self.identity.name
            result = method.answer(self.context, message.params)
            if method.name not in _READS and caught_up:
                self.recorder.wait_idle(max(0.0, deadline - time.monotonic()))
            if method.name == "session/delete" and self.advertised("session/delete"):
                return self._forward_delete(message)
            if method.name == "session/list":
                _drop_gone(result)
                self._wire_parents(result)
                result["_meta"] = self._list_meta(result.get("_meta"), caught_up, history)
            return encode_result(message.id, result)
        except Exception as exc:
            if not isinstance(exc, InvalidParams | SessionNotFound):
                log.warning("%s failed: %s", method.name, exc)
            error = rpc_error(exc)
            if self.recorder.degraded is not None:
                error = RpcError(error.code, error.message, {"degraded": self.recorder.degraded})
            return encode_error(message.id, error)

    def _wire_parents(self, result: dict[str, Any]) -> None:
        """A fork's parent named by the id the client knows (the agent's), not the store's."""
        for info in result.get("sessions", ()):
            parent = info.get("_meta", {}).get(META_PARENT)
            if isinstance(parent, dict) and isinstance(parent.get("sessionId"), str):
                wire = native_id(self.identity.name, parent["sessionId"])
                if wire is not None:
                    info["_meta"][META_PARENT] = {**parent, "sessionId": wire}

    def _list_meta(self, meta: Any, caught_up: bool, history: HistoryState) -> dict[str, Any]:
        shown: dict[str, Any] = dict(meta) if isinstance(meta, dict) else {}
        shown[META_PROXY] = {"agent": self.identity.name, "history": history.value}
        degraded = self.recorder.degraded or (None if caught_up else "the recorder is behind: recent changes missing")
        if degraded is not None:
            shown[META_DEGRADED] = degraded
        return shown

    def _forward_delete(self, message: Incoming) -> bytes:
        native = self.book.native(message.params["sessionId"])  # checked by the table's handler
        client_id = message.id

        def answered(answer: AgentLine | None) -> None:
            if answer is not None and len(answer.error):
                log.warning("the agent's own session/delete of %s failed: %s", native, bytes(answer.error)[:300])
            self.conversation.send_client(encode_result(client_id, {}))

        self.conversation.request_agent("session/delete", {"sessionId": native}, answered)
        return b""

    # -- the agent's answers ---------------------------------------------------------------------------

    def response(self, pending: Pending, answer: AgentLine) -> bytes | None:
        """The client's answer when the proxy changes it (None: the agent's, relayed as it is); records what
        the answer tells."""
        method, params = pending.method, pending.params if isinstance(pending.params, dict) else {}
        ok = len(answer.result) > 0
        if method == "session/prompt":
            turn_of = params.get("sessionId")
            if isinstance(turn_of, str):
                # The title the prompt makes, not the prompt: what waits for the recorder stays small.
                title = prompt_title(_prompt_text(params.get("prompt"))) or ""
                ended = now_ns()  # the turn's time is when it ended here, not when the recorder gets to it
                said = self.capture.answered(turn_of, answer.result if ok else None)
                self.recorder.durable(
                    self.recorder.put(lambda r: r.turn(turn_of, answered=ok, at=ended, said=said()), held=(turn_of,))
                )
                self.recorder.put(lambda r: r.prompt_title(turn_of, title), held=(turn_of, title))
                if ok and self.advertised("session/list"):
                    self.kept.turned(turn_of)
            return None
        loaded = source = params.get("sessionId")
        replay = self.capture.loaded(source, ok) if method == "session/load" and isinstance(source, str) else None
        if ok and method == "authenticate" and self.history.state is HistoryState.FAILED:
            self.history.start(own_list=self.advertised("session/list"))  # its own list may have needed it
        if not ok or method not in _OBSERVED:
            return None
        if method == "initialize":
            return self._initialized(pending.client_id, answer)
        if method == "session/close":
            native = params.get("sessionId")
            if isinstance(native, str):
                self.context.open_sessions.discard(native)
                self.book.closed(native)
            return None
        try:
            result = msgspec.json.decode(answer.result)
        except msgspec.DecodeError:
            return None
        made = method in ("session/new", "session/fork")
        native = result.get("sessionId") if isinstance(result, dict) and made else source
        cwd, directories = params.get("cwd"), params.get("additionalDirectories")
        if not isinstance(native, str) or not native:
            return None
        self.context.opened(native)
        self.book.opened(native, made=made)
        self.kept.opened(native, cwd)
        dirs = [d for d in directories if isinstance(d, str)] if isinstance(directories, list) else None
        if method == "session/fork" and isinstance(source, str) and isinstance(cwd, str):
            self.recorder.durable(
                self.recorder.put(
                    lambda r: r.fork(native, source, cwd, dirs), held=(native, source, cwd, *(dirs or ()))
                )
            )
        else:
            at_cwd = cwd if isinstance(cwd, str) else None
            self.recorder.durable(
                self.recorder.put(
                    lambda r: r.session(native, at_cwd, dirs, live=True, made=made),
                    held=(native, at_cwd, *(dirs or ())),
                )
            )
        if replay is not None and native == loaded:
            self.recorder.put(
                lambda r: record_replay(r.registry, r.book.entry(native).stored, replay()), held=(native,)
            )
        return None

    def agent_title(self, line: bytes, update: TitleUpdate) -> bytes | None:
        """An agent's ``session_info_update`` that sets a title: recorded as the agent's; the line the client gets
        is the title policy's (None: nothing)."""
        native, title = update.session_id, update.title
        relayed = self.titles.agent_update(line, native, title, alone=update.alone)
        self.recorder.agent_titled(native, title)
        return relayed

    def _initialized(self, client_id: RequestId, answer: AgentLine) -> bytes | None:
        try:
            result = msgspec.json.decode(answer.result)
        except msgspec.DecodeError:
            return None
        if not isinstance(result, dict):
            return None
        before = self.identity.name
        self.identity.told(*versions.agent_name(result))  # v1's agentInfo or v2's info
        if self.identity.name != before:
            self.book.renamed()
        self.context.agent = self.identity.name
        advertised = versions.advertised(result)
        if advertised is not None:
            self.agent_capabilities = msgspec.json.decode(msgspec.json.encode(advertised))  # as the agent said
            versions.add(result, capabilities_of("proxy", agent_capabilities=self.agent_capabilities))
        self.history.start(own_list=self.advertised("session/list"))
        self.follow()
        meta = result.get("_meta")
        if meta is None:
            meta = result["_meta"] = {}
        if isinstance(meta, dict):
            meta[META_PROXY] = {"agent": self.identity.name, "history": self.history.state.value}
        return encode_result(client_id, result)

    # -- the registry's changes -----------------------------------------------------------------------

    def follow(self) -> None:
        """Hear of the registry's changes (once): deletions for the book, the updates for the client."""
        if self._following is None:
            self._changes_thread = threading.Thread(target=self._send_changes, name="acp-registry-proxy-changes")
            self._changes_thread.start()
            self._following = self.registry.follow(self._changes.put)

    def _send_changes(self) -> None:
        """Each change of one of this agent's sessions - made here or elsewhere: another window, ``acp-registry
        archive``, a host - reaches the book (a deletion), and the client as ``serve`` sends it: the
        ``session_info_update`` of ``registry.diffs`` (archived sessions included), by the session's wire id. Titles
        the agent or the proxy gave are the title policy's (``registry.proxy.titles``: the client heard them from
        the agent's own line or the proxy's, or not at all), so an update carries users' titles only. The follower's
        thread only queues the changes; this thread sends them."""
        directories = self.registry.additional_directories
        while True:
            changes = self._changes.get()
            if changes is None:
                return
            agent = self.identity.name
            for change in changes:
                after = change.after
                if after.agent != agent:
                    continue
                self.book.changed(after)
                native = native_id(agent, after.session_id)
                if native is None:
                    continue
                if after.title is not None and after.title_source is TitleSource.USER and not after.deleted:
                    self.titles.user_titled(native)
                shown_now = shown(change, additional_directories=directories, include_archived=True)
                if isinstance(shown_now, Updated):
                    update = _as_the_client_sees_it(agent, change, shown_now.notification.update)
                    if update is not None:
                        self.conversation.send_client(encode_session_update(SessionNotification(native, update)))

    # -- closing --------------------------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Stop answering and following, join the surface's threads, and retire the sessions the agent's own list
        showed it did not keep (``registry.proxy.kept``) and those made here that never had a turn
        (``Recorder.retire_unkept``) unless the agent keeps such sessions."""
        self._jobs.put(None)
        self._answerer.join(timeout)
        self.capture.close(timeout)
        if self._following is not None:
            self._following.stop()
            self._following = None
        self._changes.put(None)
        if self._changes_thread is not None:
            self._changes_thread.join(timeout)
        for native in sorted(self.kept.unkept):  # the agent's own list says it does not have them
            self.book.closed(native)
            self.recorder.put(lambda r, native=native: r.retire_unkept(native, verified=True), held=(native,))  # type: ignore[misc]
        if keeps_unprompted(self.identity.name):
            return
        for native in sorted(self.book.made_here - self.book.turned):
            self.book.closed(native)
            self.recorder.put(lambda r, native=native: r.retire_unkept(native), held=(native,))  # type: ignore[misc]


def _prompt_text(prompt: Any) -> str:
    if not isinstance(prompt, list):
        return ""
    return "".join(
        b["text"] for b in prompt if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _drop_gone(result: dict[str, Any]) -> None:
    """The agent's client is offered only what the agent can open: a session whose files the agent no longer has
    (``META_SOURCE_GONE``) stays in the registry, readable there, and out of the proxy's list (a page may then be
    shorter than the others)."""
    sessions = result.get("sessions")
    if isinstance(sessions, list):
        result["sessions"] = [s for s in sessions if not (s.get("_meta") or {}).get(META_SOURCE_GONE)]


def _as_the_client_sees_it(agent: str, change: Change, update: SessionInfoUpdate) -> SessionInfoUpdate | None:
    """``update`` without a title the agent or the proxy gave (the title policy's), with a fork's parent named by
    the agent's id (as ``session/list`` names it); None when nothing is left."""
    before, after = change.before, change.after
    users = after.title_source is TitleSource.USER or (
        after.title is None and before is not None and before.title_source is TitleSource.USER
    )
    if update.title is not UNSET and not users:
        update = msgspec.structs.replace(update, title=UNSET)
    meta = update.meta
    if isinstance(meta, dict) and isinstance(meta.get(META_PARENT), dict):
        parent = meta[META_PARENT]
        wire = native_id(agent, parent.get("sessionId", ""))
        if wire is not None:
            update = msgspec.structs.replace(update, meta={**meta, META_PARENT: {**parent, "sessionId": wire}})
    if update.title is UNSET and update.updated_at is UNSET and update.meta is UNSET:
        return None
    return update
