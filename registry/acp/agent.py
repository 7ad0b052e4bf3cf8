"""``acp-registry serve``: a reference ACP v1 agent over stdio, backed by the registry.

A minimal agent with a real session history: ``session/prompt`` streams the prompt's text back as
``agent_message_chunk``s and ends the turn; the first prompt names the session after its first line; every
turn is activity. ``session/list``, ``session/delete``, ``session/load`` (replays the stored turns), resume and
close work against the registry, and every title / ``updatedAt`` / ``_meta`` change - this process's or another's
on the same store - is pushed as a minimal ``session_info_update`` with explicit nulls.

Renaming from a client: the extension method ``_registry/rename {"sessionId", "title"}`` (``title: null``
clears it) or a prompt ``/rename New title``. Both set a user title, which generated titles never replace.

Threads: the main thread reads stdin and answers requests in order; the change stream delivers on its own
thread; both write whole lines to stdout under one lock. stdout carries only protocol messages; logs go to
stderr. A malformed line is answered with an error and the server keeps serving; EOF closes it cleanly.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO, Final

import msgspec
from reactivex.abc import DisposableBase

from events.model import SessionUpdated, TitleSource
from registry.acp.jsonrpc import Incoming, encode_error, encode_notification, encode_result, parse
from registry.changes import Added, ListChange, Removed, Updated
from registry.diffs import encode_session_update
from registry.errors import InvalidParams, MethodNotFound, SessionDeletedError, SessionNotFound, rpc_error
from registry.service import SessionRegistry

__all__ = ["AGENT_NAME", "PROTOCOL_VERSION", "ReferenceAgent", "serve"]

log = logging.getLogger("acp_registry.agent")

PROTOCOL_VERSION: Final = 1
AGENT_NAME: Final = "acp-session-registry"
RENAME_METHOD: Final = "_registry/rename"
LIST_CHANGES_META: Final = "acp-session-registry/listChanges"
_CHUNK: Final = 24  # characters per streamed chunk: enough to show streaming, few enough messages
_TITLE_MAX: Final = 80  # an auto-generated title is cut here (a user title may be up to 500)


class _Initialize(msgspec.Struct, rename="camel"):
    protocol_version: int
    client_capabilities: dict[str, Any] | None = None
    client_info: dict[str, Any] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _NewSession(msgspec.Struct, rename="camel"):
    cwd: str
    mcp_servers: list[Any] = msgspec.field(default_factory=list)
    additional_directories: list[str] = msgspec.field(default_factory=list)


class _SessionRef(msgspec.Struct, rename="camel"):
    session_id: str
    cwd: str | None = None


class _Prompt(msgspec.Struct, rename="camel"):
    session_id: str
    prompt: list[dict[str, Any]]


class _Rename(msgspec.Struct, rename="camel"):
    session_id: str
    title: str | None


def _params(params: Any, shape: type[Any]) -> Any:
    try:
        return msgspec.convert({} if params is None else params, shape)
    except msgspec.ValidationError as exc:
        raise InvalidParams(f"invalid params: {exc}") from None


def _version() -> str:
    try:
        from importlib.metadata import version  # noqa: PLC0415 - only when asked

        return version("acp-session-registry")
    except Exception:
        return "0"


class ReferenceAgent:
    """Answers ACP requests from the registry and writes every outgoing line through ``write``."""

    def __init__(self, registry: SessionRegistry, write: Callable[[bytes], None]) -> None:
        self.registry = registry
        self._write = write
        self._subscription: DisposableBase | None = None
        self._list_changes = False
        self._methods: dict[str, Callable[[Any], Any]] = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/close": self.close_session,
            "session/prompt": self.prompt,
            "session/list": lambda params: registry.handle("session/list", params),
            "session/delete": lambda params: registry.handle("session/delete", params),
            RENAME_METHOD: self.rename,
        }

    # -- the wire -----------------------------------------------------------------------------------

    def receive(self, line: bytes) -> None:
        """Handle one input line; answers requests, never raises."""
        if not line.strip():
            return
        message = parse(line)
        if not isinstance(message, Incoming):
            self._write(encode_error(None, message))
            return
        if message.is_response:
            return  # this agent sends no requests; a stray response is ignored
        assert message.method is not None
        if not message.has_id:
            self._notification(message.method, message.params)
            return
        try:
            handler = self._methods.get(message.method)
            if handler is None:
                raise MethodNotFound(message.method)
            result = handler(message.params)
        except Exception as exc:
            if not isinstance(exc, InvalidParams | SessionNotFound | MethodNotFound):
                log.exception("request %s failed", message.method)
            self._write(encode_error(message.id, rpc_error(exc)))
            return
        self._write(encode_result(message.id, result))

    def _notification(self, method: str, params: Any) -> None:
        if method == "session/cancel":
            return  # a turn here ends before the next line is read: there is never one to cancel
        log.info("ignoring notification %s", method)

    def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        self._write(encode_notification("session/update", {"sessionId": session_id, "update": update}))

    # -- the change stream --------------------------------------------------------------------------

    def _follow_changes(self) -> None:
        if self._subscription is None:
            self._subscription = self.registry.list_changes().subscribe(self._on_change)

    def _on_change(self, item: ListChange) -> None:
        if isinstance(item, Updated):
            self._write(encode_session_update(item.notification))
        elif self._list_changes and isinstance(item, Added):
            info = msgspec.to_builtins(item.info)
            self._write(encode_notification("_registry/session_added", {"session": info}))
        elif self._list_changes and isinstance(item, Removed):
            self._write(encode_notification("_registry/session_removed", {"sessionId": item.session_id}))

    def close(self) -> None:
        if self._subscription is not None:
            self._subscription.dispose()

    # -- methods ------------------------------------------------------------------------------------

    def initialize(self, params: Any) -> dict[str, Any]:
        request = _params(params, _Initialize)
        self._list_changes = bool((request.meta or {}).get(LIST_CHANGES_META))
        self._follow_changes()
        return {
            # ACP's negotiation: the client's version when the agent speaks it, else the agent's newest. Version
            # 1 is the only one there is, so the answer is 1 either way; the client decides whether it can go on.
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "sessionCapabilities": {
                    "list": {},
                    "delete": {},
                    "additionalDirectories": {},
                    "resume": {},
                    "close": {},
                },
            },
            "agentInfo": {"name": AGENT_NAME, "title": "ACP session registry", "version": _version()},
            "authMethods": [],
        }

    def new_session(self, params: Any) -> dict[str, Any]:
        request = _params(params, _NewSession)
        info = self.registry.create(request.cwd, additional_directories=request.additional_directories)
        return {"sessionId": info.session_id}

    def _live(self, session_id: str) -> None:
        self.registry.get(session_id)  # SessionNotFound / SessionDeletedError -> -32002

    def load_session(self, params: Any) -> dict[str, Any]:
        """Replay the stored turns as ``session/update`` notifications, then answer."""
        request = _params(params, _SessionRef)
        self._live(request.session_id)
        for record in self.registry.store.read_stream(request.session_id):
            event = record.event
            if not isinstance(event, SessionUpdated) or not isinstance(event.payload, dict):
                continue
            for block in event.payload.get("prompt", []):
                self._notify(request.session_id, {"sessionUpdate": "user_message_chunk", "content": block})
            reply = event.payload.get("reply")
            if isinstance(reply, str) and reply:
                self._notify(
                    request.session_id,
                    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": reply}},
                )
        return {}

    def resume_session(self, params: Any) -> dict[str, Any]:
        self._live(_params(params, _SessionRef).session_id)
        return {}

    def close_session(self, params: Any) -> dict[str, Any]:
        _params(params, _SessionRef)  # nothing is held per session here
        return {}

    def prompt(self, params: Any) -> dict[str, Any]:
        request = _params(params, _Prompt)
        session_id = request.session_id
        state = self.registry.state(session_id)
        if state is None:
            raise SessionNotFound(session_id)
        if state.deleted:
            raise SessionDeletedError(session_id)
        text = "".join(b.get("text", "") for b in request.prompt if b.get("type") == "text")
        first = state.messages == 0
        if text.startswith("/rename"):
            title = text[len("/rename") :].strip() or None
            self.registry.change_info(session_id, title=title, title_source=TitleSource.USER)
            reply = f"Renamed the session to {title!r}." if title else "Cleared the session's title."
            first = False
        else:
            reply = text
        for start in range(0, len(reply), _CHUNK):
            chunk = {"type": "text", "text": reply[start : start + _CHUNK]}
            self._notify(session_id, {"sessionUpdate": "agent_message_chunk", "content": chunk})
        self.registry.record_activity(session_id, messages=2, payload={"prompt": request.prompt, "reply": reply})
        if first:
            line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
            if line:
                title = line if len(line) <= _TITLE_MAX else line[: _TITLE_MAX - 1] + "\u2026"
                self.registry.change_info(session_id, title=title, title_source=TitleSource.PROMPT)
        return {"stopReason": "end_turn"}

    def rename(self, params: Any) -> dict[str, Any]:
        request = _params(params, _Rename)
        self.registry.change_info(request.session_id, title=request.title, title_source=TitleSource.USER)
        return {}


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
        for line in iter(source.readline, b""):
            agent.receive(line)
    except KeyboardInterrupt:
        pass
    finally:
        agent.close()
        registry.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
