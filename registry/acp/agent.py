"""``acp-registry serve``: a reference ACP v1 agent over stdio, backed by the registry - the ``serve`` surface of
the method table (``registry.acp.methods``).

A minimal agent with a real session history: ``session/prompt`` streams the prompt's text back as
``agent_message_chunk``s and ends the turn; the first prompt names the session (``registry.commands.prompt_title``,
the rule imported sessions share too); every turn is kept as its two messages (``SessionRegistry.record_messages``:
what the user said - a link or an image as a marker, ``registry.acp.content.blocks_text`` - and the answer), so
``transcript`` and ``search`` see it. ``initialize``, ``session/new``, ``load`` (replays the conversation from the
transcript - a fork's starts with its source's up to the fork point; turns that older versions kept in the opaque
payload first), ``resume``, ``close``, ``prompt`` and
``cancel`` are this module's own handlers, bound to the table with ``bind``; everything the registry answers -
``session/list``, ``delete``, ``set_title``, ``archive``, ``unarchive``, ``status``, ``fork``, ``_registry/rename``
- is the table's, and what ``initialize`` advertises is derived from it. The sessions open in this process (one
connection) are the table ``Context``'s ``open_sessions``: ``session/status`` reads them. Every title /
``updatedAt`` / ``_meta`` change - this process's or another's on the same store, archived sessions included - is
pushed as a minimal ``session_info_update`` with explicit nulls.

Renaming from a client: ``session/set_title``, the extension method ``_registry/rename {"sessionId", "title"}``
(``title: null`` clears it) or a prompt ``/rename New title``. All set a user title, which generated titles never
replace.

Threads: the main thread reads stdin and answers requests in order; the registry's follower (the thread that tails
the log) writes each change's ``session_info_update`` as it folds it; both write whole lines to stdout under one
lock. Before a response is written, the follower is waited for up to that moment (``wait_for_changes``), so the
updates a request caused (a turn's title) reach the client before its answer; changes from other processes flow
whenever they come. No reactivex here: the first answer needs none of it. stdout carries only protocol messages;
logs go to stderr. Whatever a line holds, it is answered (``registry.acp.jsonrpc``) and the server keeps serving;
EOF closes it cleanly.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, Final

import msgspec

from events.model import Message, Role, TitleSource
from registry import __version__
from registry.acp.content import ContentBlock, TextContent, blocks_text, prompt_blocks
from registry.acp.jsonrpc import (
    Incoming,
    OverlongLine,
    RequestId,
    encode_error,
    encode_notification,
    encode_result,
    incoming,
    read_lines,
)
from registry.acp.methods import METHODS, Context, EncodedSessions, bind, capabilities
from registry.acp.params import CancelParams, InitializeParams, NewSessionParams, PromptParams, SessionRef
from registry.commands import check_session_id, check_title, prompt_title
from registry.diffs import Added, Removed, Updated, encode_session_update, shown
from registry.errors import (
    InvalidParams,
    MethodNotFound,
    SessionExists,
    SessionNotFound,
    rpc_error,
)
from registry.fold import Change
from registry.follow import Following
from registry.service import SessionRegistry

__all__ = ["AGENT_NAME", "PROTOCOL_VERSION", "ReferenceAgent", "serve"]

log = logging.getLogger("acp_registry.agent")

PROTOCOL_VERSION: Final = 1
AGENT_NAME: Final = "acp-session-registry"
LIST_CHANGES_META: Final = "acp-session-registry/listChanges"
_CHUNK: Final = 24  # characters per streamed chunk: enough to show streaming, few enough messages
_FLUSH_TIMEOUT: Final = 10.0  # seconds a response waits for the change stream (only a stuck client reaches it)
_EXPECTED: Final = (InvalidParams, SessionNotFound, MethodNotFound, SessionExists)  # answered, not logged


def _version() -> str:
    return __version__


def _payload_turns(registry: SessionRegistry, session_id: str) -> Iterator[tuple[list[Any], str | None]]:
    """Each turn older versions of this agent kept in an activity's opaque payload: its prompt blocks and its
    reply (those versions kept no messages, so these come before any kept message)."""
    for event in registry.activity(session_id):
        if isinstance(event.payload, dict) and event.content is None:
            blocks, reply = event.payload.get("prompt"), event.payload.get("reply")
            yield (blocks if isinstance(blocks, list) else []), (reply if isinstance(reply, str) else None)


class ReferenceAgent:
    """Answers ACP requests from the registry and writes every outgoing line through ``write``."""

    def __init__(self, registry: SessionRegistry, write: Callable[[bytes], None]) -> None:
        self.registry = registry
        self._write = write
        self._following: Following | None = None
        self._list_changes = False
        # One process serves one connection: the sessions open on it are the process's open sessions.
        self.context = Context(registry, encoded=EncodedSessions())  # its results are written as msgspec JSON
        bound = bind(
            "serve",
            self.context,
            own={
                "initialize": self.initialize,
                "session/new": self.new_session,
                "session/load": self.load_session,
                "session/resume": self.resume_session,
                "session/close": self.close_session,
                "session/prompt": self.prompt,
                "session/cancel": self.cancel,
            },
        )
        self._requests = {name: answer for name, answer in bound.items() if not METHODS[name].notification}
        self._notifications = {name: answer for name, answer in bound.items() if METHODS[name].notification}

    # -- the wire -----------------------------------------------------------------------------------

    def receive(self, line: bytes | OverlongLine) -> None:
        """Handle one input line; answers what needs an answer, never raises."""
        request_id: RequestId = None
        try:
            message = incoming(line, self._write)  # an invalid message or a batch is refused there
            if message is None:
                return
            if message.is_response:
                return  # this agent sends no requests; a stray response is ignored
            if not message.has_id:
                self._notification(message)
                return
            request_id = message.id
            self._answer(message)
        except Exception as exc:  # a bug: still one answer, and the server goes on
            log.exception("could not answer a line")
            self._write(encode_error(request_id, rpc_error(exc)))

    def _answer(self, message: Incoming) -> None:
        assert message.method is not None
        before = self.registry.position
        try:
            handler = self._requests.get(message.method)
            if handler is None:
                raise MethodNotFound(message.method)
            answer = encode_result(message.id, handler(message.params))
        except Exception as exc:
            if not isinstance(exc, _EXPECTED):
                log.exception("request %s failed", message.method)
            answer = encode_error(message.id, rpc_error(exc))
        if self.registry.position != before:  # this request wrote: its updates go first
            self._flush_changes()
        self._write(answer)

    def _notification(self, message: Incoming) -> None:
        assert message.method is not None
        handler = self._notifications.get(message.method)
        if handler is None:
            log.info("ignoring notification %s", message.method)
            return
        try:
            handler(message.params)
        except _EXPECTED as exc:  # a notification gets no answer, not even an error
            log.info("ignoring notification %s: %s", message.method, exc)

    def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        self._write(encode_notification("session/update", {"sessionId": session_id, "update": update}))

    # -- the change stream --------------------------------------------------------------------------

    def _follow_changes(self) -> None:
        if self._following is None:
            self._following = self.registry.follow(self._on_changes)

    def _flush_changes(self) -> None:
        """Wait until every change made so far has been written: the follower writes them as it folds them."""
        if self._following is not None and not self.registry.wait_for_changes(timeout=_FLUSH_TIMEOUT):
            log.warning("the change follower is %s s behind; answering anyway", _FLUSH_TIMEOUT)

    def _on_changes(self, changes: Sequence[Change]) -> None:
        """On the follower's thread, in log order: each change the client must hear of, as one line.

        A ``session_info_update`` goes out for every session, archived ones included ((un)archiving is a change of
        its ``_meta``); the list-changes extension follows the default list, which archiving leaves."""
        directories = self.registry.additional_directories
        for change in changes:
            try:
                update = shown(change, additional_directories=directories, include_archived=True)
                if isinstance(update, Updated):
                    self._write(encode_session_update(update.notification))
                if not self._list_changes:
                    continue
                item = shown(change, additional_directories=directories)
                if isinstance(item, Added):
                    info = msgspec.to_builtins(item.info)
                    self._write(encode_notification("_registry/session_added", {"session": info}))
                elif isinstance(item, Removed):
                    self._write(encode_notification("_registry/session_removed", {"sessionId": item.session_id}))
            except Exception:  # never let one change stop the follower; the client misses this update only
                log.exception("could not send the update of session %s", change.after.session_id)

    def close(self) -> None:
        if self._following is not None:
            self._following.stop()
            self._following = None

    # -- methods ------------------------------------------------------------------------------------

    def initialize(self, request: InitializeParams) -> dict[str, Any]:
        meta = request.meta if isinstance(request.meta, dict) else {}
        self._list_changes = meta.get(LIST_CHANGES_META) is True
        self._follow_changes()
        advertised = capabilities("serve")  # each method serve answers, by its capability in the method table
        advertised["sessionCapabilities"]["additionalDirectories"] = {}  # a param of new/load/resume, not a method
        return {
            # ACP's negotiation: the client's version when the agent speaks it, else the agent's newest. Version
            # 1 is the only one there is, so the answer is 1 either way; the client decides whether it can go on.
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": advertised,
            "agentInfo": {"name": AGENT_NAME, "title": "ACP session registry", "version": _version()},
            "authMethods": [],
        }

    def new_session(self, request: NewSessionParams) -> dict[str, Any]:
        info = self.registry.create(request.cwd, additional_directories=request.additional_directories)
        self.context.opened(info.session_id)
        return {"sessionId": info.session_id}

    def _live(self, session_id: str, refusal: str) -> int:
        """The number of messages of a live session; -32002 saying so for an unknown or deleted one."""
        state = self.registry.state(check_session_id(session_id))
        if state is None:
            raise SessionNotFound(session_id)
        if state.deleted:
            raise SessionNotFound(session_id, f"session {session_id!r} was deleted; {refusal}")
        return state.messages

    def load_session(self, request: SessionRef) -> dict[str, Any]:
        """Replay the stored turns as ``session/update`` notifications, then answer."""
        session_id = request.session_id
        self._live(session_id, "it cannot be loaded")
        for blocks, reply in _payload_turns(self.registry, session_id):
            for block in blocks:
                try:
                    shown = prompt_blocks([block])  # turns stored by older versions were not checked
                except InvalidParams:
                    continue
                for content in shown:
                    self._notify(session_id, {"sessionUpdate": "user_message_chunk", "content": _builtins(content)})
            if reply:
                text = {"type": "text", "text": reply}
                self._notify(session_id, {"sessionUpdate": "agent_message_chunk", "content": text})
        for n, kept in enumerate(self.registry.transcript(session_id).messages):
            self._notify(session_id, _replayed(kept.message, n))
        self.context.opened(session_id)
        return {}

    def resume_session(self, request: SessionRef) -> dict[str, Any]:
        self._live(request.session_id, "it cannot be resumed")
        self.context.opened(request.session_id)
        return {}

    def close_session(self, request: SessionRef) -> dict[str, Any]:
        self.context.close(check_session_id(request.session_id))  # nothing else is held per session here
        return {}

    def cancel(self, _request: CancelParams) -> dict[str, Any]:
        return {}  # a turn here ends before the next line is read: there is never one to cancel

    def prompt(self, request: PromptParams) -> dict[str, Any]:
        """One turn: every check first (nothing is written or sent for a refused turn), then the writes, then
        the reply streamed; the turn's title update reaches the client before the response (``_answer``)."""
        blocks = prompt_blocks(request.prompt)
        session_id = request.session_id
        first = self._live(session_id, "it takes no more turns") == 0
        text = "".join(block.text for block in blocks if isinstance(block, TextContent))
        rename = text.startswith("/rename")
        title: str | None = None
        if rename:
            title = text[len("/rename") :].strip() or None
            if title is not None:
                check_title(title)
            reply = f"Renamed the session to {title!r}." if title else "Cleared the session's title."
        else:
            reply = text
        said = blocks_text([_builtins(block) for block in blocks])
        turn = [Message(role=Role.USER, text=said), Message(role=Role.AGENT, text=reply)]
        self.registry.record_messages(session_id, turn, count=2)
        if rename:
            self.registry.change_info(session_id, title=title, title_source=TitleSource.USER)
        elif first:
            title = prompt_title(text)
            if title is not None:
                self.registry.change_info(session_id, title=title, title_source=TitleSource.PROMPT)
        for start in range(0, len(reply), _CHUNK):
            chunk = {"type": "text", "text": reply[start : start + _CHUNK]}
            self._notify(session_id, {"sessionUpdate": "agent_message_chunk", "content": chunk})
        return {"stopReason": "end_turn"}


def _replayed(message: Message, n: int) -> dict[str, Any]:
    """A kept message as the ``session/update`` that replays it on ``session/load``: what the user and the agent
    said and thought as chunks, a tool call as a finished one (its first line the title), a plan with its entries."""
    text = {"type": "text", "text": message.text}
    if message.role is Role.USER:
        return {"sessionUpdate": "user_message_chunk", "content": text}
    if message.role is Role.THOUGHT:
        return {"sessionUpdate": "agent_thought_chunk", "content": text}
    if message.role is Role.TOOL:
        title, _, rest = message.text.partition("\n")
        content = [{"type": "content", "content": {"type": "text", "text": rest}}] if rest else []
        tool = {"toolCallId": f"replayed-{n}", "title": title, "status": "completed", "content": content}
        return {"sessionUpdate": "tool_call", **tool}
    if message.role is Role.PLAN:
        entries = []
        for line in message.text.splitlines():
            status, mark, rest = line[1:].partition("] ") if line.startswith("[") else ("", "", line)
            done = status if mark and status in ("pending", "in_progress", "completed") else "completed"
            entries.append({"content": rest if mark else line, "priority": "medium", "status": done})
        return {"sessionUpdate": "plan", "entries": entries}
    return {"sessionUpdate": "agent_message_chunk", "content": text}


def _builtins(block: ContentBlock) -> dict[str, Any]:
    return msgspec.to_builtins(block)  # type: ignore[no-any-return]


class _Stdout:
    """Whole lines to a binary stream, one writer at a time."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def __call__(self, line: bytes) -> None:
        with self._lock:
            try:
                self._stream.write(line + b"\n")
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                pass  # the client went away; EOF on stdin ends the loop


def serve(
    url: str,
    *,
    page_size: int = 50,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    **options: Any,
) -> int:
    """Serve ACP over stdio until EOF; returns the process exit code."""
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="acp-registry: %(message)s")
    source = stdin or sys.stdin.buffer
    write = _Stdout(stdout or sys.stdout.buffer)
    registry = SessionRegistry.open(url, page_size=page_size, **options)
    agent = ReferenceAgent(registry, write)

    def stop(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop) if threading.current_thread() is threading.main_thread() else None
    try:
        for line in read_lines(source):
            agent.receive(line)
    except KeyboardInterrupt:
        pass
    finally:
        agent.close()
        registry.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
