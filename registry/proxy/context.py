"""The method table's answered methods in front of an agent: the table's ``Context`` with ids mapped by the proxy's
book (``ProxyContext``), and the registry as its handlers see it there (``FromMemory``): a session command checked
without writing and answered at once, what it changes noted in the proxy's memory, then queued for the recorder,
which runs the same method on the store (``registry.session_commands``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from registry.acp.methods import Context
from registry.agents import native_id, split_id
from registry.commands import check_session_id
from registry.errors import SessionNotFound
from registry.model import SessionInfo, SessionState
from registry.proxy.book import Book, Status
from registry.proxy.recorder import Recorder
from registry.proxy.titles import TitlePolicy
from registry.proxy.wire import AgentLine
from registry.session_commands import Events, SessionCommand, SessionCommands

__all__ = ["Conversation", "FromMemory", "Front", "ProxyContext", "native_of"]


class Conversation(Protocol):
    """What the surface needs of the relay."""

    def send_client(self, line: bytes) -> None: ...

    def request_agent(self, method: str, params: Any, on_answer: Callable[[AgentLine | None], None]) -> None: ...


class Front(Protocol):
    """What the context needs of the surface it answers for (``registry.proxy.surface.Surface``)."""

    @property
    def book(self) -> Book: ...
    @property
    def titles(self) -> TitlePolicy: ...
    @property
    def recorder(self) -> Recorder: ...
    @property
    def checks(self) -> SessionCommands: ...
    @property
    def conversation(self) -> Conversation: ...

    def advertised(self, name: str) -> bool: ...


class ProxyContext(Context):
    """The table's context in front of an agent: ids mapped by the book (stored forms and later generations
    included), and closing a session (before archiving it) closes it at the agent too when it advertises close."""

    front: Front | None = None
    """The surface it answers for (set once the surface is made)."""

    def store_id(self, wire_id: str) -> str:
        assert self.front is not None
        return self.front.book.stored(wire_id)

    def wire_id(self, store_id: str) -> str:
        return native_id(self.agent or "", store_id) or store_id

    def close(self, wire_id: str) -> None:
        was_open = wire_id in self.open_sessions
        super().close(wire_id)
        surface = self.front
        if was_open and surface is not None and surface.advertised("session/close"):
            surface.conversation.request_agent("session/close", {"sessionId": wire_id}, lambda _answer: None)

    def command(self, row: SessionCommand, store_id: str, params: Mapping[str, Any]) -> Any:
        """The command checked and answered from memory (``FromMemory``), what it changes noted in the proxy's
        memory, and the command queued for the recorder, which runs it on the store's current id of the session."""
        surface = self.front
        assert surface is not None
        returned = row.run(surface.checks, store_id, params)
        native = native_of(store_id)
        if "deleted" in row.changes:
            surface.book.deleted(native)
        if "title" in row.changes and params.get("title") is not None:
            surface.titles.user_titled(native)  # the user's title outranks the agent's from now on
        held = (native, *(value for value in params.values() if isinstance(value, str)))
        ticket = surface.recorder.put(lambda r: r.command(native, row, params), held=held)
        if "deleted" in row.changes:
            # A user's delete erases the conversation: written (and erased) before the client is told it is done.
            surface.recorder.durable(ticket)
        return returned


class FromMemory(SessionCommands):
    """The registry as the table's handlers see it in front of an agent: reads from the registry; a session command
    run here checks without writing - the session against the book (a live one) or the read model, the command's own
    checks - and answers at once (``ProxyContext.command`` then queues it for the recorder)."""

    def __init__(self, recorder: Recorder) -> None:
        self._book = recorder.book
        self._registry = recorder.registry
        self.list = recorder.registry.list  # lists are the registry's as they are

    def state(self, session_id: str) -> SessionState | None:
        return self._registry.read_model.get(session_id)

    def fork(self, source_id: str, cwd: str, **_: Any) -> SessionInfo:
        raise SessionNotFound(source_id, "the proxy relays session/fork to its agent")  # pragma: no cover

    def _write(self, session_id: str, events: Events, *, missing_ok: bool = False) -> None:
        check_session_id(session_id)
        if missing_ok or self._book.entry(native_of(session_id)).status is Status.LIVE:
            return
        state = self._registry.read_model.get(session_id)
        if state is None or state.deleted:
            raise SessionNotFound(session_id)


def native_of(store_id: str) -> str:
    parts = split_id(store_id)
    return store_id if parts is None else parts[2]
