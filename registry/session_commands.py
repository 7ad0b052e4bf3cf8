"""Session commands: each change a client can ask for of a session, declared once.

A command is one method of ``SessionCommands`` and one ``SessionCommand`` row naming it - the pattern of the ACP
Python SDK's router, where a route binds a method name to a method name on a handler object. From the two follow:

- the facade: ``SessionRegistry`` is a ``SessionCommands`` (the method is its public method, typed, checked by mypy);
- the ACP method table's entry (``registry.acp.methods``): its name, its capability, its params struct - the method's
  parameters before ``*``, ``sessionId`` first, in camelCase (``wire_params``) - and one generic handler that calls
  ``<commands>.<attr>(session_id, **params)`` and answers with the row's ``answer`` of what the method returned;
- the proxy's write path (``registry.proxy.surface``): the very method run on a stand-in that checks without writing
  (its refusals and its answer at once), then run again on the recorder's thread against the store;
- its ``acp-registry`` command, when the row gives it one (``command_line``: ``registry.cli.session_command``);
- ``changes``: the state fields it changes, which the surfaces react to: a session open on a connection is closed
  first when the row ``closes`` it (ACP: an archived session is closed), the proxy's book learns of a deletion, a
  user's title outranks the agent's from then on.

Every method writes through ``_write`` alone: the events it appends are decided from the session's state as the
store has it when the write happens (``registry.writing``), so the same method is right wherever it runs. Adding a
command is a method here and its row in ``COMMANDS``; ``tests/test_session_commands.py`` holds each row to its method.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
from msgspec import UNSET

from events.model import EVENT_TYPES, Event, SessionDeleted, SessionPinned, TitleSource, UserMark
from registry.commands import (
    archive_change,
    check_session_id,
    check_title,
    check_user_title,
    info_change,
    json_type,
)
from registry.errors import InvalidParams
from registry.model import SessionState

__all__ = [
    "COMMANDS",
    "USERS_MARKS",
    "CommandLine",
    "SessionCommand",
    "SessionCommands",
    "command",
    "marked_by_user",
    "users_marks",
    "wire_params",
]

Events = Callable[[SessionState], list[Event]]
"""What a command appends, decided from the session's state (``[]``: nothing: it is so already)."""


class SessionCommands:
    """The session commands (``COMMANDS`` names each by its method). A subclass says how a command's events are
    written (``_write``): ``SessionRegistry`` appends them; the proxy's stand-in only checks that the session is one
    the client may change."""

    def _write(self, session_id: str, events: Events, *, missing_ok: bool = False) -> None:
        """Append what ``events`` decides from the session's current state; an unknown or deleted session is
        ``SessionNotFound`` unless ``missing_ok`` (then nothing is written)."""
        raise NotImplementedError

    def set_title(self, session_id: str, title: str) -> str:
        """Set a user title (``session/set_title``): never replaced by a generated one afterwards. Returns the
        stored title (surrounding whitespace trimmed). Blank or empty -> ``InvalidParams``; an unknown or deleted
        session -> ``SessionNotFound``. Setting the title it has writes nothing."""
        stored = check_user_title(title)
        self._write(session_id, _titled(stored))
        return stored

    def rename(self, session_id: str, title: str | None) -> None:
        """Set the user's title, or with None clear it (``_registry/rename``: ``session/set_title`` under the
        registry's older name, which can clear)."""
        if title is None:
            self._write(session_id, _titled(None))
        else:
            self.set_title(session_id, title)

    def archive(self, session_id: str) -> None:
        """Hide a session from default lists (``session/archive``); its id and history stay. Idempotent: an
        archived session is left as it is. Unknown or deleted -> ``SessionNotFound``."""
        self._write(session_id, _archived(True))

    def unarchive(self, session_id: str) -> None:
        """Bring an archived session back into default lists; idempotent. Unknown or deleted -> ``SessionNotFound``."""
        self._write(session_id, _archived(False))

    def set_pinned(self, session_id: str, pinned: bool = True) -> bool:
        """Pin a session, or with ``pinned=False`` unpin it (``session/set_pinned``, the registry's own: ``_meta``'s
        ``acp-session-registry/pinned``, ``list``'s ``pinned`` filter). Idempotent: a session already so is left as it
        is. Returns ``pinned``. Not a boolean -> ``InvalidParams``; unknown or deleted -> ``SessionNotFound``."""
        if type(pinned) is not bool:
            raise InvalidParams(f"pinned must be a boolean, not {json_type(pinned)}", field="pinned")
        self._write(session_id, lambda state: [] if state.pinned is pinned else [SessionPinned(pinned=pinned)])
        return pinned

    def delete(self, session_id: str, *, reason: str | None = None, erase: bool = True) -> None:
        """Delete a session for good (a tombstone stays in the log). Unknown or deleted sessions: no-op.

        ``erase`` (a user's delete, ``session/delete``): its conversation is erased from disk too - by the time this
        returns no byte of its messages is left in the store's files (``EventStore.erase``); its metadata (id, cwd,
        title, times) stays in the tombstone. A session the registry itself retires keeps it (``erase=False``)."""
        check_session_id(session_id)
        if reason is not None:
            check_title(reason, "reason")  # a short text, like a title: anything else would poison the log
        self._write(session_id, lambda state: [SessionDeleted(reason=reason)], missing_ok=True)
        if erase:
            self._erase_conversation(session_id)

    def copy_marks(self, session_id: str, marked: SessionState) -> None:
        """Give a session the marks a user's commands left on another (``users_marks(marked)``), each by the event
        that sets it; one it has already is left as it is (a proxy's take-over carries them to the agent's one name).
        Not a session command: no client asks for it."""
        wanted = {name: getattr(marked, name) for name in users_marks(marked)}

        def events(state: SessionState) -> list[Event]:
            return [_setting(name, value) for name, value in wanted.items() if getattr(state, name) != value]

        if wanted:
            self._write(session_id, events)

    def _erase_conversation(self, session_id: str) -> None:
        """Erase a deleted session's conversation (``delete``); a subclass that keeps none has nothing to do."""


def _titled(title: str | None) -> Events:
    def events(state: SessionState) -> list[Event]:
        change = info_change(state, title=title, title_source=TitleSource.USER, updated_at=UNSET, meta=UNSET)
        return [] if change is None else [change]

    return events


def _archived(archived: bool) -> Events:
    def events(state: SessionState) -> list[Event]:
        change = archive_change(state, archived)
        return [] if change is None else [change]

    return events


# -- the rows -----------------------------------------------------------------------------------------------------


def _nothing(_returned: object) -> dict[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A command's ``acp-registry`` command (``registry.cli.session_command``): its ``name`` and one-line ``help``,
    the help of each of its params (``arguments``; ``SESSION`` comes first), and what it ``says`` it did, from what
    the method returned (``--json``: the command's answer, or the session's ``SessionInfo`` when the answer is
    empty)."""

    name: str
    help: str
    says: Callable[[Any], str]
    arguments: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, eq=False)  # one of each: told apart by identity
class SessionCommand:
    """A command as the surfaces serve it: the ACP ``method`` it answers, the ``SessionCommands`` method it is
    (``attr``), the ``capability`` that advertises it (a path in ``agentCapabilities``; None: none), the state fields
    it ``changes``, whether a session open on a connection is closed first (``closes``), and the result it answers
    with, from what the method returned (``answer``); its ``acp-registry`` command, if it has one (``command_line``)."""

    method: str
    attr: str
    capability: tuple[str, ...] | None
    changes: frozenset[str]
    closes: bool = False
    answer: Callable[[Any], dict[str, Any]] = field(default=_nothing)
    command_line: CommandLine | None = None

    def run(self, commands: SessionCommands, session_id: str, params: Mapping[str, Any]) -> Any:
        """The command on ``commands`` for a session, with its wire params (``wire_params``' fields but the
        session's id)."""
        return getattr(commands, self.attr)(session_id, **params)


COMMANDS: Final[tuple[SessionCommand, ...]] = (
    SessionCommand("session/delete", "delete", ("sessionCapabilities", "delete"), frozenset({"deleted"}), closes=True),
    SessionCommand(
        "session/set_title",
        "set_title",
        ("sessionCapabilities", "title"),
        frozenset({"title"}),
        answer=lambda stored: {"title": stored},
        command_line=CommandLine(
            "title",
            "set a session's title as its user (generated titles never replace it)",
            lambda stored: f"title {stored!r}",
            {"title": "the new title (surrounding spaces are trimmed; not blank)"},
        ),
    ),
    SessionCommand(
        "session/archive",
        "archive",
        ("sessionCapabilities", "archive"),
        frozenset({"archived"}),
        closes=True,
        command_line=CommandLine(
            "archive", "hide a session from default lists (its id and history stay)", lambda _: "archived"
        ),
    ),
    SessionCommand(
        "session/unarchive",
        "unarchive",
        ("sessionCapabilities", "archive"),
        frozenset({"archived"}),
        command_line=CommandLine(
            "unarchive", "bring an archived session back into default lists", lambda _: "listed again (unarchived)"
        ),
    ),
    SessionCommand("_registry/rename", "rename", None, frozenset({"title"})),
    SessionCommand(
        "session/set_pinned",
        "set_pinned",
        None,  # the registry's own: no ACP capability advertises it
        frozenset({"pinned"}),
        command_line=CommandLine(
            "pin",
            "pin a session (false: unpin it); list --pinned lists the pinned ones",
            lambda pinned: "pinned" if pinned else "unpinned",
            {"pinned": "true (the default) to pin, false to unpin"},
        ),
    ),
)
"""Every session command, in the order the method table lists them."""

_BY_METHOD: Final = {row.method: row for row in COMMANDS}

USERS_MARKS: Final = frozenset(name for row in COMMANDS for name in row.changes) - {"deleted", "title"}
"""The state fields only a user's command sets (``archived``), beside the title (whose source says whose it is) and
the deletion: what the proxy never retires (``Recorder.touched``) and carries to the agent's one name."""

_UNMARKED: Final = {
    name: field.default for field in msgspec.structs.fields(SessionState) if (name := field.name) in USERS_MARKS
}


def users_marks(state: SessionState) -> list[str]:
    """The fields of ``USERS_MARKS`` away from their defaults on ``state`` (archived), in the state's order."""
    return [name for name, default in _UNMARKED.items() if getattr(state, name) != default]


def marked_by_user(state: SessionState) -> bool:
    """Whether a user's command left a mark on ``state``: a title of theirs, or a field of ``USERS_MARKS`` away
    from its default (``users_marks``)."""
    if state.title_source is TitleSource.USER and state.title is not None:
        return True
    return bool(users_marks(state))


def _setting(name: str, value: bool) -> Event:
    """The mark event (``events.UserMark``) that sets field ``name`` to ``value``: one with that field, made with
    ``value``, or one without fields that says it sets it so (``SessionArchived``)."""
    for kind in EVENT_TYPES:
        if issubclass(kind, UserMark):
            mark = kind(**{name: value}) if name in kind.__struct_fields__ else kind()
            if mark.marks() == {name: value}:
                return mark
    raise LookupError(f"no event sets {name} to {value}")  # a mark a command changes has its event (a test says so)


def command(method: str) -> SessionCommand | None:
    """The command answering ACP ``method`` (None: not a session command)."""
    return _BY_METHOD.get(method)


@functools.cache
def wire_params(row: SessionCommand) -> type[msgspec.Struct]:
    """The params struct of ``row``'s method: its parameters before ``*`` (the rest are the facade's own), each typed
    and defaulted as the method says, named in camelCase on the wire; ``session_id`` first."""
    method = getattr(SessionCommands, row.attr)
    code = method.__code__
    names = code.co_varnames[1 : code.co_argcount]  # after self, up to the keyword-only ones
    if not names or names[0] != "session_id":
        raise TypeError(f"SessionCommands.{row.attr} must take session_id first")
    hints = typing.get_type_hints(method)
    defaults = dict(zip(reversed(names), reversed(method.__defaults__ or ()), strict=False))
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        (name, hints[name], defaults[name]) if name in defaults else (name, hints[name]) for name in names
    ]
    struct_name = "".join(part.title() for part in row.attr.split("_")) + "Params"
    return msgspec.defstruct(struct_name, fields, rename="camel", kw_only=True, module=__name__)
