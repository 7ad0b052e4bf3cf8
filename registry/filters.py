"""The list filters: what a ``session/list`` walk can be narrowed by, each declared once.

A ``Filter`` is one field of ``ListFilter`` and everything that follows from it:

- its **normal form**: ``normal`` turns what a caller gave (``SessionRegistry.list``'s keyword, ``session/list``'s
  param, the command line's option) into the value kept, or refuses it with ``InvalidParams`` and its message;
- the **states it keeps** for a value (``keeps``): the in-memory fold filters by it, the page guard checks every
  page's states with it, ``verify`` compares with it;
- its **SQL predicate** per dialect over the read model's rows, with named parameters (``sql``, ``params``), and
  what the tables need for it: a column of its own (``column``) and an index a page reads while it narrows the
  list (``index``, the most ``preferred`` one of those that apply);
- its **part of the cursor** (``part``): a cursor is bound to every filter, and a cursor replayed with another value
  is refused with ``InvalidCursor`` naming the filter;
- the ``list`` command's **option** for it (``option``) and the words its heading says (``describe``).

The page statements of both dialects (``registry.readmodel.sqlite_sql``, ``postgres_sql``) are built from these
declarations by name, the cursor lays its parts out from them (``registry.cursor``), and ``SessionRegistry.list``
takes each one by keyword (``Filters``). Adding a filter is a field of ``ListFilter``, its key in ``Filters`` and
its ``Filter`` in ``FILTERS``, here.

``archived`` is the one filter the pages read by their shape rather than by a predicate: every list index is
ordered by ``archived`` first, a page reads one ``archived`` range of it, and ``include`` merges the two.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import typing
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, NamedTuple, TypedDict, TypeVar

import msgspec

from registry.agents import known_name
from registry.codegen import page_check
from registry.commands import check_agent, json_type
from registry.errors import InvalidParams
from registry.model import SessionState

__all__ = [
    "ARCHIVED_FILTERS",
    "FILTERS",
    "Archived",
    "Bound",
    "Dialect",
    "Equals",
    "Filter",
    "FilterColumn",
    "FilterIndex",
    "Filters",
    "ListFilter",
    "Option",
    "bound",
    "list_filter",
]

T = TypeVar("T")
Dialect = Literal["sqlite", "postgresql"]
Test = Callable[[SessionState], bool]
"""Whether a state is in the list (``Filter.keeps``)."""


class Equals(NamedTuple):
    """A filter's test in its common form: the state's ``field`` is ``value`` (checked for a whole page by code
    written out for the fields compared, ``codegen.page_check``: the guard checks every page)."""

    field: str
    value: object


Archived = Literal["exclude", "include", "only"]
ARCHIVED_FILTERS: Final[tuple[Archived, ...]] = typing.get_args(Archived)
"""``session/list``'s ``archived`` values (omitted and null are ``exclude``): the CLI's choices, the check and its
refusal all read them here."""


class ListFilter(msgspec.Struct, frozen=True, kw_only=True):
    """What a ``session/list`` walk lists, each field normal (``list_filter`` makes one from what a caller gave):
    ``cwd`` (canonical; None: all), ``archived``, ``agent`` (None: all), ``pinned`` (None: all). A cursor is bound to
    every field."""

    cwd: str | None = None
    archived: Archived = "exclude"
    agent: str | None = None
    pinned: bool | None = None

    def matches(self, state: SessionState) -> bool:
        """Whether a session is in this list (a deleted one is in none)."""
        return self.outside((state,)) is None

    def outside(self, states: Iterable[SessionState]) -> SessionState | None:
        """A state of ``states`` not in this list, else None: the one home of the rule, for a whole page at once (the
        guard runs it over every page's states: one call, and a field's values compared in C, not a call a state)."""
        checks = bound(self)
        if not checks.tests:
            return checks.check(states)
        listed = list(states)
        found = checks.check(listed)
        if found is not None:
            return found
        for test in checks.tests:
            for state in listed:
                if not test(state):
                    return state
        return None


class Filters(TypedDict, total=False):
    """The filters ``SessionRegistry.list`` takes by keyword, as a caller gives them (``list_filter`` checks them):
    every field of ``ListFilter`` but ``cwd``, which the registry makes canonical by its own options first."""

    archived: str | None
    agent: str | None
    pinned: bool | None


class FilterColumn(NamedTuple):
    """A column of the read model's rows that a filter reads and the rows lack: its name, its kind (as
    ``registry.readmodel.schema`` names kinds: ``text``, ``int``, ``bool``) and its value for a state."""

    name: str
    kind: Literal["text", "int", "bool"]
    value: Callable[[SessionState], object]
    required: bool = True


class FilterIndex(NamedTuple):
    """An index on ``rm_sessions`` that pages read while a filter narrows the list: its columns (the list order,
    ``archived, rank, session_id, valid_from``, after the filter's own) and its predicate."""

    name: str
    columns: tuple[str, ...]
    where: str


class Option(NamedTuple):
    """The ``list`` command's option for a filter: its flag and ``argparse`` keywords (``dest`` is the filter's
    name)."""

    flag: str
    keywords: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Filter(Generic[T]):
    """One field of ``ListFilter`` and all that follows from it (see the module docstring)."""

    name: str
    normal: Callable[[object], T]
    """The value kept for what a caller gave, or ``InvalidParams`` saying why not."""
    keeps: Callable[[T], Equals | Test | None]
    """Which states a value keeps: those whose field is a value (``Equals``), those a function says, or every state
    (None: the value does not narrow the list)."""
    part: Callable[[T], bytes | int]
    """The value's part of a cursor (a fingerprint for text: a cursor carries no user text)."""
    part_default: bytes | int
    """The part of the default value: what a cursor made before the filter existed (without its part) is read as."""
    sql: Mapping[Dialect, str] | None = None
    """The predicate over the rows, its parameters named as ``params`` names them (SQLite ``:name``, PostgreSQL
    ``%(name)s``); applied while the value narrows the list. None: read by the pages' shape (``archived``)."""
    params: Callable[[T], Mapping[str, object]] | None = None
    """The predicate's parameters for a value (default: the value under the filter's name)."""
    column: FilterColumn | None = None
    index: FilterIndex | None = None
    preferred: int = 0
    """Of the filters narrowing a page that have an index, the SQLite page reads the most preferred one's."""
    option: Option | None = None
    describe: Callable[[T], str] | None = None
    """The words the ``list`` command's heading says of a value that narrows the list."""

    def bind(self, value: T) -> Mapping[str, object]:
        return {self.name: value} if self.params is None else self.params(value)


# -- the filters ------------------------------------------------------------------------------------------------


def _fingerprint(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:8]


@functools.lru_cache(maxsize=1024)
def _scope(cwd: str | None) -> bytes:
    return _fingerprint("all" if cwd is None else f"cwd\x00{cwd}")


def _agent_part(agent: str | None) -> bytes:
    return b"" if agent is None else _fingerprint(f"agent\x00{agent}")


def _canonical_cwd(cwd: object) -> str | None:
    """``cwd`` as the registry made it canonical (``SessionRegistry.list`` resolves it by its own options first)."""
    if cwd is not None and not isinstance(cwd, str):
        raise InvalidParams(f"cwd must be a string, not {type(cwd).__name__}", {"field": "cwd"})
    return cwd


def _archived(value: object) -> Archived:
    if value is None:
        return "exclude"
    for known in ARCHIVED_FILTERS:  # refused by name, never read as "exclude"
        if value == known:
            return known
    choices = ", ".join(f'"{known}"' for known in ARCHIVED_FILTERS)
    raise InvalidParams(f"archived must be one of {choices}, not {value!r}", {"field": "archived"})


def _keeps_archived(value: Archived) -> Equals | None:
    return None if value == "include" else Equals("archived", value == "only")


def _keeps_cwd(cwd: str | None) -> Equals | None:
    return None if cwd is None else Equals("cwd", cwd)


def _keeps_agent(agent: str | None) -> Equals | None:
    return None if agent is None else Equals("agent", agent)


def _pinned(value: object) -> bool | None:
    if value is None or type(value) is bool:
        return value
    raise InvalidParams(f"pinned must be a boolean or null, not {json_type(value)}", {"field": "pinned"})


def _keeps_pinned(pinned: bool | None) -> Equals | None:
    return None if pinned is None else Equals("pinned", pinned)


_LIST_ORDER: Final = ("archived", "rank", "session_id", "valid_from")

CWD: Final[Filter[str | None]] = Filter(
    "cwd",
    _canonical_cwd,
    _keeps_cwd,
    _scope,
    b"",  # never left out: the cwd's part is the cursor's scope (``registry.cursor``)
    {"sqlite": "cwd = :cwd", "postgresql": "cwd = %(cwd)s"},
    index=FilterIndex("rm_sessions_cwd", ("cwd", *_LIST_ORDER), "live"),
    describe=lambda cwd: f" in {cwd}",
)
ARCHIVED: Final[Filter[Archived]] = Filter(
    "archived",
    _archived,
    _keeps_archived,
    ARCHIVED_FILTERS.index,  # 0 exclude, 1 include, 2 only
    0,
    params=lambda archived: {"archived": archived == "only"},
    option=Option(
        "--archived",
        {
            "choices": ARCHIVED_FILTERS,
            "default": "exclude",
            "help": "archived sessions: left out (exclude, the default), listed too (include), or only they (only)",
        },
    ),
    describe=lambda archived: {"exclude": "", "include": " (archived ones included)", "only": " (archived only)"}[
        archived
    ],
)
AGENT: Final[Filter[str | None]] = Filter(
    "agent",
    check_agent,
    _keeps_agent,
    _agent_part,
    b"",
    {"sqlite": "agent = :agent", "postgresql": "agent = %(agent)s"},
    index=FilterIndex("rm_sessions_agent", ("agent", *_LIST_ORDER), "live AND agent IS NOT NULL"),
    preferred=1,  # an agent's range, checked for a cwd, rather than a cwd's checked for an agent
    option=Option(
        "--agent",
        {
            "metavar": "NAME",
            "type": known_name,
            "help": "only the sessions of this agent (codex, or a name it goes by: codex-acp, claude-agent-acp, ...)",
        },
    ),
    describe=lambda agent: f" of {agent}",
)

PINNED: Final[Filter[bool | None]] = Filter(
    "pinned",
    _pinned,
    _keeps_pinned,
    lambda pinned: 0 if pinned is None else 1 if pinned else 2,
    0,
    {"sqlite": "pinned = :pinned", "postgresql": "pinned = %(pinned)s"},
    column=FilterColumn("pinned", "bool", lambda state: state.pinned),
    index=FilterIndex("rm_sessions_pinned", ("pinned", *_LIST_ORDER), "live"),
    option=Option(
        "--pinned",
        {
            "action": argparse.BooleanOptionalAction,
            "default": None,
            "help": "only the pinned sessions (--no-pinned: only the others; neither: all)",
        },
    ),
    describe=lambda pinned: " (pinned)" if pinned else " (not pinned)",
)

FILTERS: Final[tuple[Filter[Any], ...]] = (CWD, ARCHIVED, AGENT, PINNED)
"""Every filter, in the order of their parts in a cursor (the first is its scope): a new filter goes last."""

_BY_NAME: Final = {f.name: f for f in FILTERS}
if tuple(_BY_NAME) != ListFilter.__struct_fields__ or set(Filters.__annotations__) != set(_BY_NAME) - {"cwd"}:
    raise TypeError("registry.filters: FILTERS must declare ListFilter's fields in order, and Filters the same but cwd")


def list_filter(cwd: str | None = None, **given: object) -> ListFilter:
    """A checked ``ListFilter`` from what a caller gave by keyword (``cwd`` canonical already): each value through
    its filter's ``normal``; an unknown keyword is a ``TypeError`` (a caller's mistake, not the client's)."""
    key = (cwd, *given.items(), *map(type, given.values()))  # the types too: True == 1, and 1 is refused
    try:
        made = _MADE.get(key)
    except TypeError:  # a value that is no JSON scalar: checked (and refused) below
        made = None
    if made is not None:
        return made
    normal = _NORMAL
    for name in given:
        if name not in normal:
            raise TypeError(f"list_filter() got an unexpected keyword argument {name!r}")
    made = ListFilter(cwd=_canonical_cwd(cwd), **{name: normal[name](value) for name, value in given.items()})
    if len(_MADE) >= 1024:
        _MADE.clear()
    _MADE[key] = made
    return made


_NORMAL: Final = {f.name: f.normal for f in FILTERS if f is not CWD}
_MADE: dict[tuple[object, ...], ListFilter] = {}
"""The lists made last, by what was given (a walk asks for the same list page after page)."""


class Bound(NamedTuple):
    """What a page needs of a ``ListFilter``, worked out once per filter value (``bound``)."""

    narrowing: tuple[str, ...]
    """The filters whose SQL predicates the page applies, in declaration order."""
    params: Mapping[str, object]
    """Every filter's parameters (``archived`` included)."""
    include: bool
    """``archived`` is ``include``: both ``archived`` ranges are read."""
    index_name: str | None
    """The index a SQLite page reads (None: the list order's own, ``rm_sessions_order``)."""
    check: Callable[[Iterable[SessionState]], SessionState | None]
    """The first state that is deleted or not a filter's ``Equals``, else None (``codegen.page_check``)."""
    tests: tuple[Test, ...]
    """The filters' other tests (``ListFilter.outside``)."""
    parts: tuple[bytes | int, ...]
    """Each filter's part of a cursor, in ``FILTERS`` order."""
    made: dict[Hashable, Any]
    """What a backend made of this list (its page statements, by their shape), kept with it."""


@functools.lru_cache(maxsize=256)
def bound(where: ListFilter) -> Bound:
    """``where`` as its pages use it (kept: a walk asks for the same list page after page)."""
    narrowing: list[str] = []
    params: dict[str, object] = {}
    equals: list[Equals] = []
    tests: list[Test] = []
    index: FilterIndex | None = None
    preferred = -1
    for f in FILTERS:
        value = getattr(where, f.name)
        test = f.keeps(value)
        if test is None:
            continue
        if isinstance(test, Equals):
            equals.append(test)
        else:
            tests.append(test)
        params.update(f.bind(value))
        if f.sql is not None:
            narrowing.append(f.name)
            if f.index is not None and f.preferred > preferred:
                index, preferred = f.index, f.preferred
    params.setdefault("archived", False)  # the range an ``include`` page reads first
    include = where.archived == "include"
    parts = tuple(f.part(getattr(where, f.name)) for f in FILTERS)
    return Bound(
        narrowing=tuple(narrowing),
        params=params,
        include=include,
        index_name=None if index is None else index.name,
        check=functools.partial(page_check(tuple(e.field for e in equals)), *(e.value for e in equals)),
        tests=tuple(tests),
        parts=parts,
        made={},
    )
