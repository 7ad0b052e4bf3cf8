"""Request params as msgspec structs: ``convert_params`` is the one way params become structs on the wire.

A msgspec validation error becomes ``InvalidParams`` (-32602) whose message names the field as a client wrote it
(``prompt[0].text``, ``additionalDirectories[2]``) and whose ``data.field`` holds it. ``params`` absent or null is
``{}``; unknown keys are ignored (ACP is extensible).

msgspec's ``ValidationError`` carries its facts only in its message (``Expected `str`, got `int` - at `$.cwd```):
it has no path or kind attributes to read. So the message is read here, and only here, with the three patterns
below; the dependency is pinned to the msgspec minor version CI installs (``pyproject.toml``), and
``tests/test_acp_params.py`` holds each pattern to what that version writes, so a changed message fails a test
instead of reaching a client garbled. A message none of them matches is still a clear -32602: its text, lower-cased,
after the field.
"""

from __future__ import annotations

import re
from typing import Any, Final, TypeVar

import msgspec

from registry.errors import InvalidParams

__all__ = [
    "CancelParams",
    "ForkParams",
    "InitializeParams",
    "ListParams",
    "NewSessionParams",
    "PromptParams",
    "SessionParams",
    "SessionRef",
    "convert_params",
    "invalid_params",
]

T = TypeVar("T")

_ERROR: Final = re.compile(r"^(?P<reason>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING: Final = re.compile(r"^Object missing required field `(?P<name>[^`]*)`$")
_EXPECTED: Final = re.compile(r"^Expected `(?P<expected>[^`]*)`, got `(?P<got>[^`]*)`$")
_TYPES: Final = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "null",
    "array": "an array",
    "object": "an object",
}
_GOT: Final = {**_TYPES, "int": "a number"}  # what was sent, in JSON's words (it has numbers, not integers)
# Fields whose own check says more than their type: the struct says str, the rule says non-empty.
_FIELD_TYPES: Final = {"sessionId": "a non-empty string"}


# -- the params of each method (``registry.acp.methods`` names which struct a method takes) ------------------


class InitializeParams(msgspec.Struct, rename="camel"):
    """``initialize``."""

    protocol_version: int
    client_capabilities: Any = None
    client_info: Any = None
    meta: Any = msgspec.field(default=None, name="_meta")  # ACP: _meta of a wrong type is ignored


class NewSessionParams(msgspec.Struct, rename="camel"):
    """``session/new``."""

    cwd: str
    mcp_servers: list[Any] = msgspec.field(default_factory=list)
    additional_directories: list[str] = msgspec.field(default_factory=list)


class SessionRef(msgspec.Struct, rename="camel"):
    """``session/load``, ``session/resume``, ``session/close``: a session (``cwd`` accepted, not used)."""

    session_id: str
    cwd: str | None = None


class PromptParams(msgspec.Struct, rename="camel"):
    """``session/prompt``."""

    session_id: str
    prompt: Any  # checked block by block (registry.acp.content), so errors name prompt[i].field


class CancelParams(msgspec.Struct, rename="camel"):
    """``session/cancel`` (a notification)."""

    session_id: str


class ListParams(msgspec.Struct, rename="camel"):
    """``session/list``. ``archived`` is a string here so that an unsupported value is refused by name (-32602),
    never read as ``exclude``; of ``_meta``, the search key is read (``acp-session-registry/query``, or goose's
    ``query``) and the rest ignored."""

    cwd: str | None = None
    cursor: str | None = None
    archived: str | None = None
    meta: Any = msgspec.field(default=None, name="_meta")  # read only when an object: anything else is ignored


class SessionParams(msgspec.Struct, rename="camel"):
    """``session/status``: a session (a session command's params are its method's: ``registry.session_commands``)."""

    session_id: str


class ForkParams(msgspec.Struct, rename="camel"):
    """``session/fork``: the new session's ``cwd`` and ``additionalDirectories`` (null is empty, as ACP says)."""

    session_id: str
    cwd: str
    additional_directories: list[str] | None = None
    mcp_servers: list[Any] | None = None


# -- conversion ---------------------------------------------------------------------------------------------


def convert_params(params: Any, shape: type[T], field: str = "params") -> T:
    """``params`` (None: ``{}``) as ``shape``; ``InvalidParams`` naming the field otherwise.

    ``field`` is how the value itself is called in messages: ``params`` for a request's params, ``prompt[0]``
    for a content block, so a field inside it is ``prompt[0].text``.
    """
    try:
        return msgspec.convert({} if params is None else params, shape)
    except msgspec.ValidationError as exc:
        raise invalid_params(str(exc), field) from None


def invalid_params(message: str, field: str = "params") -> InvalidParams:
    """The -32602 for a msgspec validation message about ``field``."""
    parts = _ERROR.match(message)
    assert parts is not None  # the pattern matches every string
    reason, path = parts["reason"], parts["path"] or ""
    where = _join(field, path)
    missing = _MISSING.match(reason)
    if missing:
        where = _join(where, "." + missing["name"])
        return InvalidParams(f"{where} is missing", field=where)
    expected = _EXPECTED.match(reason)
    if expected:
        name = where.rsplit(".", 1)[-1]
        wanted = _FIELD_TYPES.get(name) or " or ".join(
            _TYPES.get(t, t) for t in expected["expected"].split(" | ") if t != "null"
        )
        got = _GOT.get(expected["got"], expected["got"])
        return InvalidParams(f"{where} must be {wanted or 'null'}, not {got}", field=where)
    if reason.startswith("must "):  # a struct's own check (``__post_init__``) says what the value must be
        return InvalidParams(f"{where} {reason}", field=where)
    return InvalidParams(f"{where}: {reason[:1].lower()}{reason[1:]}", field=where)


def _join(field: str, path: str) -> str:
    """``params`` + ``.cwd`` is ``cwd`` (a request's params are its top level); ``prompt[0]`` + ``.text`` is
    ``prompt[0].text``."""
    if field == "params":
        return path.lstrip(".") or "params"
    return field + path
