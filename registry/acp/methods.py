"""The registry's ACP methods as JSON-RPC: params checked with msgspec structs, answered by a registry.

``handle(registry, method, params)`` answers ``session/list`` and ``session/delete`` (``SessionRegistry.handle``
delegates here). It needs only the two registry methods named by ``SessionMethods``, so this module never
imports the facade. ``convert_params`` is the one way params become structs here and in ``registry.acp.agent``:
a msgspec validation error becomes ``InvalidParams`` (-32602) whose message names the field as a client wrote
it (``prompt[0].text``, ``additionalDirectories[2]``) and whose ``data.field`` holds it.

``params`` absent or null is ``{}``; unknown keys are ignored (ACP is extensible).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

import msgspec

from registry.commands import check_session_id
from registry.errors import InvalidParams, MethodNotFound
from registry.model import ListSessionsResult

__all__ = ["DeleteParams", "ListParams", "SessionMethods", "convert_params", "handle"]

T = TypeVar("T")


class SessionMethods(Protocol):
    """What ``handle`` needs of a registry (``SessionRegistry`` has it)."""

    def list(self, cwd: str | None = None, cursor: str | None = None) -> ListSessionsResult: ...

    def delete(self, session_id: str, *, reason: str | None = None) -> None: ...


class ListParams(msgspec.Struct, rename="camel"):
    """ACP ``session/list`` params (its ``_meta`` is accepted and ignored)."""

    cwd: str | None = None
    cursor: str | None = None


class DeleteParams(msgspec.Struct, rename="camel"):
    """ACP ``session/delete`` params."""

    session_id: str


def _list(registry: SessionMethods, params: Any) -> dict[str, Any]:
    request = convert_params(params, ListParams)
    return msgspec.to_builtins(registry.list(cwd=request.cwd, cursor=request.cursor))  # type: ignore[no-any-return]


def _delete(registry: SessionMethods, params: Any) -> dict[str, Any]:
    registry.delete(check_session_id(convert_params(params, DeleteParams).session_id))
    return {}


_METHODS: Final[dict[str, Callable[[SessionMethods, Any], dict[str, Any]]]] = {
    "session/list": _list,
    "session/delete": _delete,
}


def handle(registry: SessionMethods, method: str, params: Any = None) -> dict[str, Any]:
    """Answer an ACP request from ``registry``: the exact result object, or an error carrying its JSON-RPC code
    (``registry.errors.rpc_error`` maps it): ``MethodNotFound`` for any other method."""
    answer = _METHODS.get(method) if isinstance(method, str) else None
    if answer is None:
        raise MethodNotFound(method)
    return answer(registry, params)


# -- params as structs ------------------------------------------------------------------------------------

_ERROR = re.compile(r"^(?P<reason>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`$")
_EXPECTED = re.compile(r"^Expected `(?P<expected>[^`]*)`, got `(?P<got>[^`]*)`$")
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


def convert_params(params: Any, shape: type[T], field: str = "params") -> T:
    """``params`` (None: ``{}``) as ``shape``; ``InvalidParams`` naming the field otherwise.

    ``field`` is how the value itself is called in messages: ``params`` for a request's params, ``prompt[0]``
    for a content block, so a field inside it is ``prompt[0].text``.
    """
    try:
        return msgspec.convert({} if params is None else params, shape)
    except msgspec.ValidationError as exc:
        raise _invalid(str(exc), field) from None


def _invalid(message: str, field: str) -> InvalidParams:
    parts = _ERROR.match(message)
    assert parts is not None  # the pattern matches every string
    reason, path = parts["reason"], parts["path"] or ""
    where = _join(field, path)
    missing = _MISSING.match(reason)
    if missing:
        where = _join(where, "." + missing["name"])
        return InvalidParams(f"{where} is missing", {"field": where})
    expected = _EXPECTED.match(reason)
    if expected:
        name = where.rsplit(".", 1)[-1]
        wanted = _FIELD_TYPES.get(name) or " or ".join(
            _TYPES.get(t, t) for t in expected["expected"].split(" | ") if t != "null"
        )
        got = _GOT.get(expected["got"], expected["got"])
        return InvalidParams(f"{where} must be {wanted or 'null'}, not {got}", {"field": where})
    if reason.startswith("must "):  # a struct's own check (``__post_init__``) says what the value must be
        return InvalidParams(f"{where} {reason}", {"field": where})
    return InvalidParams(f"{where}: {reason[:1].lower()}{reason[1:]}", {"field": where})


def _join(field: str, path: str) -> str:
    """``params`` + ``.cwd`` is ``cwd`` (a request's params are its top level); ``prompt[0]`` + ``.text`` is
    ``prompt[0].text``."""
    if field == "params":
        return path.lstrip(".") or "params"
    return field + path
