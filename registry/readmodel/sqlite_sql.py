"""The SQLite read model's statements (``postgres_sql.py`` holds PostgreSQL's): the freshness check, the fold's
writes, a page's query by its shape and its parameters, and every other read ``sqlite.py`` makes. Each page query
names the index it reads (``INDEXED BY``): one range of one index, in list order."""

from __future__ import annotations

import itertools
from typing import Any, Final

from events.schema import chain_query, head_query
from registry.model import ListFilter
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
    "KNOWN_PAGES",
    "META",
    "PAGES",
    "PAST_AT",
    "PRUNE",
    "SEALED",
    "SET_META",
    "STATES",
    "UPSERT",
    "load",
    "page_params",
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
``OR``, took ~11 us against ~1.3 us for one keyed row, measured in a loop)."""
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


def _page_query(
    cwd: bool, agent: bool, after: bool, archived: bool, as_of: bool, past: bool, *, known: tuple[str, ...] = ()
) -> str:
    """One range of one index (current rows), or the past rows valid at ``:p``; ``archived``: the rows with
    ``archived = :archived`` (else both values: the past rows of an ``include`` walk); ``known``: conditions on
    nothing but the tables' positions, evaluated once (no row when one is false)."""
    where = [*known, "live"]
    if agent:
        where.append("agent = :agent")
    if cwd:
        where.append("cwd = :cwd")
    if archived:
        where.append("archived = :archived")
    if after:
        where.append("(rank, session_id) > (:rank, :sid)")
    if past:
        where += ["valid_to > :p", "valid_from <= :p"]
    elif as_of:
        where.append("valid_from <= :p")
    index = "" if past else f" INDEXED BY rm_sessions_{'agent' if agent else 'cwd' if cwd else 'order'}"
    table = "rm_past" if past else "rm_sessions"
    return (
        f"SELECT rank, session_id, state FROM {table}{index} WHERE {' AND '.join(where)}"
        " ORDER BY rank, session_id LIMIT :n"
    )


PAGES: Final = {
    shape: _page_query(*shape)
    for shape in itertools.product((False, True), repeat=6)  # (cwd, agent, after, archived, as_of, past)
}
"""Page queries by (cwd, agent, after, archived, as_of, past)."""

_AT_P: Final = (
    "(SELECT value FROM rm_meta WHERE key = 'checkpoint') = :p",
    "(SELECT value FROM rm_meta WHERE key = 'floor') <= :p",
)
KNOWN_PAGES: Final = {
    (cwd, agent, after): _page_query(
        cwd, agent, after, True, False, False, known=_AT_P if after else (*_AT_P, f"{head_query()} = :p")
    )
    for cwd, agent, after in itertools.product((False, True), repeat=3)
}
"""The current rows of one range of one index (``archived = :archived``), read only if the tables are where this
process last saw them - the checkpoint ``:p`` at or after the floor, and for a first page (no ``after``) the log's
head too - else no row: a page and its freshness check in one statement, without a transaction of their own
(an empty answer is also an empty list: ask again with the check of its own). By (cwd, agent, after)."""


def page_params(where: ListFilter, as_of: int, after: tuple[int, str] | None, limit: int) -> dict[str, Any]:
    """A page statement's parameters, with its shape (the first three of its ``PAGES`` key) and whether both
    halves of the ``archived`` index are read (``include``)."""
    cwd, archived, agent = where
    rank, sid = after or (None, None)
    shape = (cwd is not None, agent is not None, after is not None)
    keys = {"cwd": cwd, "agent": agent, "p": as_of, "n": limit + 1, "rank": rank, "sid": sid, "shape": shape}
    return keys | {"archived": int(archived == "only"), "include": archived == "include"}
