"""Declarations written out as plain Python functions, for speed: the one module of this package that compiles
source.

A declaration read in a loop costs a call per entry on paths that run once per change or per page row; written
out once (as ``dataclasses`` writes an ``__init__``), the same rule runs as straight-line code. What is written here,
and from what:

- ``shown_in_meta``: ``visible_meta`` and ``meta_changed`` from ``registry.model.SHOWN_IN_META`` (each runs once per
  change and view of the change stream);
- ``page_check``: the check that every state of a page is one its list keeps, from the fields the list filters
  compare (``registry.filters.Equals``: the page guard runs it over every page).

``tests/test_session_shape.py`` and ``tests/test_read_model.py`` hold each written-out function to its declaration
read entry by entry. What these functions cost against the loops they replace is in docs/benchmarks.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["MetaDeclaration", "page_check", "shown_in_meta"]


State = TypeVar("State")
"""The state type whose fields the written-out functions read (``registry.model.SessionState``)."""
_Read_contra = TypeVar("_Read_contra", contravariant=True)


class MetaDeclaration(Protocol[_Read_contra]):
    """What ``shown_in_meta`` reads of a ``_meta`` field's declaration (``registry.model.MetaField`` is one)."""

    @property
    def key(self) -> str: ...
    @property
    def reads(self) -> tuple[str, ...]: ...
    @property
    def shown(self) -> Callable[[_Read_contra], Any] | str | None: ...
    @property
    def follows(self) -> bool: ...
    def value(self, state: _Read_contra, /) -> Any: ...


def _compiled(source: str, name: str, names: dict[str, Any]) -> dict[str, Any]:
    exec(compile(source, f"<{name} written out>", "exec"), names)  # a traceback names what it ran
    return names


def shown_in_meta(
    fields: tuple[MetaDeclaration[State], ...], state_fields: Iterable[str]
) -> tuple[Callable[[State], dict[str, Any]], Callable[[State, State], bool]]:
    """``visible_meta`` and ``meta_changed`` for ``fields`` (``SHOWN_IN_META``), whose ``reads`` must be of
    ``state_fields``: while every field it reads is set (not None or False), a field's value is the first one it
    reads, that value's attribute ``shown``, or ``shown`` of the state, and it is shown unless None or False; the
    states' ``_meta`` differ when their own objects do, or a ``follows`` field's reads do, or another field's value
    does where its reads moved."""
    known = set(state_fields)
    names: dict[str, Any] = {}
    build = ["def visible_meta(state):", "    meta = dict(state.meta) if state.meta else {}"]
    for n, field in enumerate(fields):
        if not field.reads or not set(field.reads) <= known:
            raise TypeError(f"{field.key}: reads {field.reads!r}, not fields of the state")
        if isinstance(field.shown, str) and not field.shown.isidentifier():
            raise TypeError(f"{field.key}: shown {field.shown!r} is not an attribute name")
        names[f"key{n}"], names[f"shown{n}"] = field.key, field.shown
        lines = [f"value = state.{field.reads[0]}", "if value is not None and value is not False:"]
        indent = "    "
        for other in field.reads[1:]:
            lines += [f"{indent}other = state.{other}", f"{indent}if other is not None and other is not False:"]
            indent += "    "
        if field.shown is None:
            lines.append(f"{indent}meta[key{n}] = value")
        else:
            read = f"value.{field.shown}" if isinstance(field.shown, str) else f"shown{n}(state)"
            lines += [
                f"{indent}value = {read}",
                f"{indent}if value is not None and value is not False:",
                f"{indent}    meta[key{n}] = value",
            ]
        build += ["    " + line for line in lines]
    build.append("    return meta")
    compared = ["before.meta != after.meta"]
    compared += (f"before.{name} != after.{name}" for f in fields if f.follows for name in f.reads)
    for n, field in enumerate(fields):
        if not field.follows:
            names[f"value{n}"] = field.value
            read = " or ".join(f"before.{name} != after.{name}" for name in field.reads)
            compared.append(f"(({read}) and value{n}(before) != value{n}(after))")
    changed = ["def meta_changed(before, after):", "    return " + " or ".join(compared)]
    written = _compiled("\n".join([*build, *changed]), "SHOWN_IN_META", names)
    return written["visible_meta"], written["meta_changed"]


PageCheck = Callable[..., Any]
"""``check(*values, states)``: the first of ``states`` that is deleted or whose compared fields are not ``values``."""


@functools.cache
def page_check(fields: tuple[str, ...]) -> PageCheck:
    """The page check for a list whose filters compare ``fields`` (each a ``SessionState`` field name) with values:
    ``check(*values, states)`` (a deleted session is in no list)."""
    for name in fields:
        if not name.isidentifier():
            raise ValueError(f"not a field name: {name!r}")
    values = [f"v{n}" for n in range(len(fields))]
    tests = ["state.deleted", *(f"state.{name} != {value}" for name, value in zip(fields, values, strict=True))]
    source = "\n".join(
        [
            f"def check({', '.join([*values, 'states'])}):",
            "    for state in states:",
            f"        if {' or '.join(tests)}:",
            "            return state",
            "    return None",
        ]
    )
    check: PageCheck = _compiled(source, f"page check of {', '.join(fields) or 'no field'}", {})["check"]
    return check
