"""Commands: what a write may say, checked once, and the events it becomes.

Every way in - ``SessionRegistry``, ``acp-registry serve``, ``acp-registry import`` and the importers - checks its
input with these functions and decides what to append with them, so a rule (a limit, "a generated title never
replaces the user's", "nothing is written when nothing would change") has exactly one home. Checks raise
``InvalidParams`` (a ``ValueError``; -32602 on the wire) naming the field and why; they never truncate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, assert_never

import msgspec
from msgspec import UNSET, UnsetType

import events
from events.store import check_session_id as store_check_session_id
from registry.errors import InvalidParams
from registry.limits import (
    MAX_DIRECTORIES,
    MAX_META_BYTES,
    MAX_META_DEPTH,
    MAX_PAYLOAD_BYTES,
    MAX_TIME_NS,
    MAX_TITLE_LENGTH,
    MIN_TIME_NS,
)
from registry.model import SessionState, parse_time, title_replaces
from registry.paths import normalise_cwd
from registry.usage import check_usage

__all__ = [
    "PROMPT_TITLE_LENGTH",
    "archive_change",
    "check_agent",
    "check_directories",
    "check_event",
    "check_messages",
    "check_meta",
    "check_payload",
    "check_session_id",
    "check_source",
    "check_time",
    "check_title",
    "check_user_title",
    "creation",
    "info_change",
    "json_type",
    "one_line",
    "prompt_title",
]

PROMPT_TITLE_LENGTH: Final = 200
"""A title taken from a prompt is cut here, with an ellipsis (as Claude Code's own lister cuts its first prompt)."""
_PROMPT_HEAD: Final = 4096  # characters of a prompt read first for its title (usually all that it needs)
_SPACES: Final = r"[\s\x00-\x1f\x7f-\x9f]+"  # compiled at its first use (re keeps it): not by a read

_json_encoder = msgspec.json.Encoder()
_msgpack_encoder = msgspec.msgpack.Encoder()


def json_type(value: object) -> str:
    """How a value is called in JSON, for messages ("a number", "null", ...)."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def check_session_id(session_id: object, field: str = "sessionId") -> str:
    """A non-empty string of at most ``MAX_SESSION_ID_BYTES`` UTF-8 bytes, without control characters, and without
    whitespace around it (`` abc`` would be another id than ``abc`` to the registry, and the same to a person)."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidParams(f"{field} must be a non-empty string, got {json_type(session_id)}", field=field)
    shown = session_id if len(session_id) <= 80 else session_id[:80] + "..."
    try:
        store_check_session_id(session_id)
    except ValueError as exc:
        raise InvalidParams(f"{str(exc).replace('session_id', field, 1)}: {shown!r}", field=field) from None
    if session_id != session_id.strip():
        raise InvalidParams(f"{field} must not begin or end with whitespace: {shown!r}", field=field)
    return session_id


def check_title(title: object, field: str = "title") -> str:
    if not isinstance(title, str):
        raise InvalidParams(f"{field} must be a string, not {json_type(title)}", field=field)
    if len(title) > MAX_TITLE_LENGTH:
        raise InvalidParams(
            f"{field} is {len(title)} characters long; at most {MAX_TITLE_LENGTH} are allowed", field=field
        )
    _check_text(title, field)
    return title


def check_user_title(title: object, field: str = "title") -> str:
    """A title a client sets (``session/set_title``): surrounding whitespace is trimmed (the stored, normalised
    title is what the caller answers with); an empty or blank one is refused (it would be a clear)."""
    if not isinstance(title, str):
        raise InvalidParams(f"{field} must be a string, not {json_type(title)}", field=field)
    stripped = title.strip()
    if not stripped:
        raise InvalidParams(f"{field} must not be empty or blank", field=field)
    return check_title(stripped, field)


MAX_AGENT_LENGTH = 200


def check_agent(agent: object, field: str = "agent") -> str | None:
    """An agent's name (None: none): a non-empty printable string of at most ``MAX_AGENT_LENGTH`` characters."""
    if agent is None:
        return None
    if not isinstance(agent, str) or not agent:
        raise InvalidParams(f"{field} must be a non-empty string, not {json_type(agent)}", field=field)
    if len(agent) > MAX_AGENT_LENGTH or not agent.isprintable():
        raise InvalidParams(f"{field} must be printable and at most {MAX_AGENT_LENGTH} characters long", field=field)
    _check_text(agent, field)
    return agent


def archive_change(state: SessionState, archived: bool) -> events.Event | None:
    """The event that archives (or unarchives) ``state``; None when it already is (both are idempotent)."""
    if state.archived is archived:
        return None
    return events.SessionArchived() if archived else events.SessionUnarchived()


def one_line(text: object, limit: int = MAX_TITLE_LENGTH) -> str | None:
    """``text`` as a title: on one line, at most ``limit`` characters (cut with an ellipsis); None when nothing is
    left. Runs of white space and control characters become one space: a title is shown on one line, and another
    program's text must not put escape sequences into a terminal that lists it."""
    if not isinstance(text, str):
        return None
    line = re.sub(_SPACES, " ", text).strip()
    if not line:
        return None
    limit = min(limit, MAX_TITLE_LENGTH)
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "\u2026"


def prompt_title(prompt: object) -> str | None:
    """The title a session gets from a prompt, wherever the session comes from (``serve``'s first prompt, an
    imported agent's first or last prompt): the whole prompt on one line, cut at ``PROMPT_TITLE_LENGTH``.

    Read from the prompt's head when the head alone is longer than that on one line: the line of a head is the
    head of the line, so the cut is the same - and a prompt of megabytes costs what a short one does."""
    if isinstance(prompt, str) and len(prompt) > _PROMPT_HEAD:
        head = one_line(prompt[:_PROMPT_HEAD])
        if head is not None and len(head) > PROMPT_TITLE_LENGTH:
            return one_line(head, PROMPT_TITLE_LENGTH)
    return one_line(prompt, PROMPT_TITLE_LENGTH)


def check_source(source: object) -> events.TitleSource:
    if not isinstance(source, events.TitleSource):
        raise InvalidParams(f"title_source must be a TitleSource, not {type(source).__name__}", field="title_source")
    return source


def check_messages(messages: object) -> int:
    if isinstance(messages, bool) or not isinstance(messages, int) or not 0 <= messages < 1 << 31:
        raise InvalidParams(f"messages must be a non-negative int below 2**31, got {messages!r}", field="messages")
    return messages


def check_time(value: object, field: str = "updatedAt") -> int:
    """Epoch ns (int, aware ``datetime`` or RFC 3339 string) within the range the registry stores."""
    ns = parse_time(value, field=field)
    if not MIN_TIME_NS <= ns <= MAX_TIME_NS:
        raise InvalidParams(
            f"{field} is out of range: times from 1970-01-01 to 2262-04-11 (epoch ns in int64)", field=field
        )
    return ns


def check_meta(meta: object, field: str = "_meta") -> dict[str, Any] | None:
    """A JSON object with string keys (None: no ``_meta``), at most ``MAX_META_BYTES`` encoded, nested at most
    ``MAX_META_DEPTH`` deep; returned as a fresh copy made of plain JSON values."""
    if meta is None:
        return None
    if not isinstance(meta, Mapping) or not all(isinstance(k, str) for k in meta):
        raise InvalidParams(f"{field} must be a JSON object with string keys", field=field)
    _check_depth(meta, field)
    try:
        encoded = _json_encoder.encode(dict(meta))
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        raise InvalidParams(f"{field} must hold only JSON values ({exc})", field=field) from exc
    if len(encoded) > MAX_META_BYTES:
        raise InvalidParams(
            f"{field} is {len(encoded)} bytes as JSON; at most {MAX_META_BYTES} are allowed", field=field
        )
    copy: dict[str, Any] = msgspec.json.decode(encoded)
    try:
        _msgpack_encoder.encode(copy)  # the log's codec: JSON numbers are unbounded, msgpack integers are not
    except OverflowError:
        raise InvalidParams(
            f"{field} holds an integer outside -2**63 .. 2**64-1, which the log cannot store", field=field
        ) from None
    return copy


def check_payload(payload: object) -> object:
    """An opaque activity payload: any msgpack-encodable value of at most ``MAX_PAYLOAD_BYTES``."""
    if payload is None:
        return None
    _check_depth(payload, "payload")
    try:
        size = len(_msgpack_encoder.encode(payload))
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise InvalidParams(f"payload must be plain data (JSON-like values): {exc}", field="payload") from exc
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidParams(f"payload is {size} bytes; at most {MAX_PAYLOAD_BYTES} are allowed", field="payload")
    return payload


def check_directories(directories: object, *, resolve_symlinks: bool = False) -> tuple[str, ...]:
    """``additionalDirectories``: a list of at most ``MAX_DIRECTORIES`` absolute paths, each normalised."""
    if isinstance(directories, str | bytes) or not isinstance(directories, Sequence):
        raise InvalidParams("additionalDirectories must be a list of absolute paths", field="additionalDirectories")
    if len(directories) > MAX_DIRECTORIES:
        raise InvalidParams(
            f"additionalDirectories has {len(directories)} entries; at most {MAX_DIRECTORIES} are allowed",
            field="additionalDirectories",
        )
    return tuple(
        normalise_cwd(d, field=f"additionalDirectories[{i}]", resolve_symlinks=resolve_symlinks)
        for i, d in enumerate(directories)
    )


def creation(
    cwd: object,
    *,
    at: object,
    additional_directories: object = (),
    title: object = None,
    title_source: object = events.TitleSource.USER,
    meta: object = None,
    resolve_symlinks: bool = False,
    agent: object = None,
    parent: events.ForkRef | None = None,
) -> events.SessionCreated:
    """The ``SessionCreated`` a create command becomes, every field checked (``parent`` is checked against the
    log by the caller)."""
    return events.SessionCreated(
        cwd=normalise_cwd(cwd, field="cwd", resolve_symlinks=resolve_symlinks),
        at=check_time(at, "at"),
        additional_directories=check_directories(additional_directories, resolve_symlinks=resolve_symlinks),
        title=None if title is None else check_title(title),
        title_source=None if title is None else check_source(title_source),
        meta=check_meta(meta),
        agent=check_agent(agent),
        parent=parent,
    )


def info_change(
    state: SessionState,
    *,
    title: str | UnsetType | None = UNSET,
    title_source: events.TitleSource = events.TitleSource.USER,
    updated_at: int | UnsetType | None = UNSET,
    meta: dict[str, Any] | UnsetType | None = UNSET,
) -> events.SessionInfoChanged | None:
    """The event that takes ``state`` to what was asked, or None when nothing would change.

    Arguments are already checked. A generated title that the fold would drop (``title_replaces``) is left out
    here too, so nothing is written for it.
    """
    change: dict[str, Any] = {}
    if title is not UNSET and (title, title_source if title is not None else None) != (
        state.title,
        state.title_source,
    ):
        if title is None:
            change["title"] = None
        elif title_replaces(state.title_source, title_source):
            change["title"] = title
            change["title_source"] = title_source
    if updated_at is not UNSET and updated_at != state.updated_at:
        change["updated_at"] = updated_at
    if meta is not UNSET and meta != state.meta:
        change["meta"] = meta
    return events.SessionInfoChanged(**change) if change else None


def check_event(event: events.Event, field: str = "event") -> events.Event:
    """A stored-form event as a write path would have made it (``acp-registry import`` of a file, whose events are
    appended as they are): every field within the same rules and limits, the cwd in its canonical form."""
    match event:  # every kind, named (mypy fails on a kind added to ``events.Event`` without a case)
        case events.SessionCreated():
            _check_created(event, field)
        case events.SessionUpdated():
            check_time(event.at, f"{field}.at")
            check_messages(event.messages)
            check_payload(event.payload)
            check_usage(event.usage, f"{field}.usage")
        case events.SessionInfoChanged():
            if isinstance(event.title, str):
                check_title(event.title, f"{field}.title")
            if isinstance(event.updated_at, int):
                check_time(event.updated_at, f"{field}.updated_at")
            if event.meta is not UNSET:
                check_meta(event.meta, f"{field}._meta")
        case events.SessionDeleted():
            if event.reason is not None:
                check_title(event.reason, f"{field}.reason")
        case events.UserMark():
            pass  # booleans at most, which the decoder has checked
        case _:
            assert_never(event)
    return event


def _check_created(event: events.SessionCreated, field: str) -> None:
    if normalise_cwd(event.cwd, field=f"{field}.cwd") != event.cwd:
        raise InvalidParams(f"{field}.cwd is not in canonical form ({event.cwd!r})", field=f"{field}.cwd")
    check_time(event.at, f"{field}.at")
    for n, directory in enumerate(event.additional_directories):
        if normalise_cwd(directory, field=f"{field}.additional_directories[{n}]") != directory:
            raise InvalidParams(
                f"{field}.additional_directories[{n}] is not in canonical form ({directory!r})",
                field=f"{field}.additional_directories[{n}]",
            )
    check_directories(event.additional_directories)
    if event.title is not None:
        check_title(event.title, f"{field}.title")
    check_meta(event.meta, f"{field}._meta")
    check_agent(event.agent, f"{field}.agent")
    if event.parent is not None:
        check_session_id(event.parent.session_id, f"{field}.parent.session_id")
        if isinstance(event.parent.position, bool) or not 0 < event.parent.position < 1 << 63:
            raise InvalidParams(
                f"{field}.parent.position must be a log position (a positive int)", field=f"{field}.parent.position"
            )


def _check_text(text: str, field: str) -> None:
    if "\x00" in text:
        raise InvalidParams(f"{field} must not contain a NUL character", field=field)
    try:
        text.encode()
    except UnicodeEncodeError:
        raise InvalidParams(f"{field} is not valid Unicode (it holds a lone surrogate)", field=field) from None


def _check_depth(value: object, field: str) -> None:
    """Refuse nesting deeper than ``MAX_META_DEPTH`` without recursing (a hostile value may nest 100,000 deep)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= MAX_META_DEPTH:
            raise InvalidParams(f"{field} nests deeper than {MAX_META_DEPTH} levels", field=field)
        stack.extend((child, depth + 1) for child in children)
