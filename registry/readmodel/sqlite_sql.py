"""The SQLite read model's statements (``postgres_sql.py`` holds PostgreSQL's): the freshness check, the fold's
writes, a page's query by its shape and its parameters, and every other read ``sqlite.py`` makes. Each page query
names the index it reads (``INDEXED BY``): one range of one index, in list order."""

from __future__ import annotations

import functools
from typing import Any, Final

import msgspec

from events.schema import chain_query, head_query
from registry.filters import FILTERS, Bound, ListFilter, bound
from registry.readmodel.schema import TABLES, insert_statement

__all__ = [
    "ADD_COUNT",
    "ARCHIVED_IN_CWD",
    "CHAIN",
    "CHECK",
    "CHECK_SEALED",
    "COUNT",
    "CURRENT_OF",
    "CWD_COUNTS",
    "FORKS",
    "GET",
    "INSERT_PAST",
    "IN_LIST_ORDER",
    "META",
    "PAST_AT",
    "PRUNE",
    "SEALED",
    "SET_META",
    "STATES",
    "UPSERT",
    "PageParams",
    "PageShape",
    "load",
    "page_params",
    "page_query",
    "page_statement",
]

CHECK: Final = (
    "SELECT (SELECT value FROM rm_meta WHERE key = 'checkpoint'), (SELECT value FROM rm_meta WHERE key = 'floor'),"
    f" {head_query()}"
)
"""The checkpoint, the floor and the log's head, in one read."""
CHECK_SEALED: Final = CHECK + ", (SELECT value FROM rm_meta WHERE key = 'seal')"
"""``CHECK`` and the id of the key the rows are sealed with: what a fold reads before it writes rows."""
CHAIN: Final = chain_query()
META: Final = "SELECT key, value FROM rm_meta"
SEALED: Final = "SELECT value FROM rm_meta WHERE key = 'seal'"
SET_META, UPSERT, INSERT_PAST = (insert_statement(table, "sqlite") for table in TABLES[:3])  # rm_usage: usage_tables
PRUNE: Final = "DELETE FROM rm_past WHERE valid_to <= ?"
ADD_COUNT: Final = "UPDATE rm_meta SET value = value + ? WHERE key = ?"
"""One count (``live``, ``archived``) moved by a delta: a statement a row (one UPDATE of both rows, by ``IN`` or
``OR``, cost several times one keyed row's: docs/benchmarks.md)."""
GET: Final = "SELECT state, valid_from FROM rm_sessions WHERE session_id = ?"
CURRENT_OF: Final = "SELECT valid_from, state FROM rm_sessions WHERE session_id = ?"
PAST_AT: Final = (
    "SELECT state FROM rm_past WHERE session_id = ? AND valid_from <= ? AND valid_to > ?"
    " ORDER BY valid_from DESC LIMIT 1"
)
FORKS: Final = "SELECT state FROM rm_sessions INDEXED BY rm_sessions_parent WHERE parent = ?"
CWD_COUNTS: Final = "SELECT cwd, count(*) FROM rm_sessions WHERE live GROUP BY cwd"
ARCHIVED_IN_CWD: Final = (
    "SELECT count(*) FROM rm_sessions INDEXED BY rm_sessions_cwd WHERE live AND cwd = ? AND archived = 1"
)
COUNT: Final = "SELECT count(*) FROM rm_sessions"
STATES: Final = "SELECT state FROM rm_sessions"
IN_LIST_ORDER: Final = (
    "SELECT state FROM (SELECT 0 AS part, rank, session_id, state FROM rm_sessions INDEXED BY rm_sessions_order"
    " WHERE live ORDER BY archived, rank, session_id) UNION ALL SELECT state FROM rm_sessions WHERE NOT live"
)
"""Every state, the live ones in list order (what a kept snapshot holds)."""


def load(count: int) -> str:
    """The states of ``count`` sessions by id (at most SQLite's 999 parameters)."""
    return f"SELECT session_id, state, valid_from FROM rm_sessions WHERE session_id IN ({','.join('?' * count)})"


class PageShape(msgspec.Struct, frozen=True):
    """Which page statement: the filters it narrows by (``registry.filters.Bound.narrowing``) and the index it reads
    (None: the list order's own), whether it continues after a cursor's sort key, reads one ``archived`` range (else
    both: an ``include`` walk's past rows), is as of ``:p`` (``as_of``), reads the past rows (``past``), or is a
    ``KNOWN`` page."""

    narrowing: tuple[str, ...]
    index_name: str | None
    after: bool
    one_range: bool = True
    as_of: bool = False
    past: bool = False
    known: bool = False


_AT_P: Final = (
    "(SELECT value FROM rm_meta WHERE key = 'checkpoint') = :p",
    "(SELECT value FROM rm_meta WHERE key = 'floor') <= :p",
)


@functools.cache
def page_query(shape: PageShape) -> str:
    """One range of one index (current rows), or the past rows valid at ``:p``; ``one_range``: the rows with
    ``archived = :archived`` (else both values: the past rows of an ``include`` walk).

    A ``known`` page reads the current rows of one range only if the tables are where this process last saw them -
    the checkpoint ``:p`` at or after the floor, and for a first page (no ``after``) the log's head too - else no
    row: a page and its freshness check in one statement, without a transaction of its own (an empty answer is
    also an empty list: ask again with the check of its own). Conditions on nothing but the tables' positions are
    evaluated once (no row when one is false)."""
    where = [*(_AT_P if shape.after else (*_AT_P, f"{head_query()} = :p"))] if shape.known else []
    where.append("live")
    where += (_SQL[name] for name in shape.narrowing)
    if shape.one_range:
        where.append("archived = :archived")
    if shape.after:
        where.append("(rank, session_id) > (:rank, :sid)")
    if shape.past:
        where += ["valid_to > :p", "valid_from <= :p"]
    elif shape.as_of:
        where.append("valid_from <= :p")
    index = "" if shape.past else f" INDEXED BY {shape.index_name or 'rm_sessions_order'}"
    table = "rm_past" if shape.past else "rm_sessions"
    return (
        f"SELECT rank, session_id, state FROM {table}{index} WHERE {' AND '.join(where)}"
        " ORDER BY rank, session_id LIMIT :n"
    )


_SQL: Final = {f.name: f.sql["sqlite"] for f in FILTERS if f.sql is not None}


class PageParams(msgspec.Struct, frozen=True):
    """A page statement's parameters (``values``), with what chooses the statement: the filters' ``Bound``."""

    values: dict[str, Any]
    bound: Bound


def page_params(where: ListFilter, as_of: int, after: tuple[int, str] | None, limit: int) -> PageParams:
    """A page statement's parameters: every filter's, the position, the sort key after which it starts, the rows."""
    rank, sid = after or (None, None)
    filtered = bound(where)
    return PageParams({**filtered.params, "p": as_of, "n": limit + 1, "rank": rank, "sid": sid}, filtered)


def page_statement(
    params: PageParams, *, one_range: bool = True, as_of: bool = False, past: bool = False, known: bool = False
) -> str:
    """The page statement ``params`` go with (``page_query`` of its shape, kept with the list's ``Bound``)."""
    filtered = params.bound
    after = params.values["rank"] is not None
    key = ("sqlite", after, one_range, as_of, past, known)
    statement: str | None = filtered.made.get(key)
    if statement is None:
        shape = PageShape(
            narrowing=filtered.narrowing,
            index_name=filtered.index_name,
            after=after,
            one_range=one_range,
            as_of=as_of,
            past=past,
            known=known,
        )
        statement = filtered.made[key] = page_query(shape)
    return statement
