"""The read model's daily usage totals: what the turns of each UTC day added - turns, the token counts, the reported
cost - summed in place, so that totals over any stretch of days are a pass over a few rows, never a scan of the log
or of sessions. Two tables, each keyed for the questions it answers:

* ``rm_usage`` - by cwd, model, currency, agent and day (in that key order): a ``--cwd`` is one range of the key,
  and totals by cwd are grouped in key order, without a sort;
* ``rm_usage_days`` - the same summed over cwds, by day, model, currency and agent: totals by day, week or month
  are grouped in key order, and by agent or model read a few rows a day (a store's cwds outnumber its agents and
  models many times over).

The fold adds to both in the same transaction as the rest of the read model (``tables.fold_stretch`` collects what a
stretch of the log adds; ``sqlite.py`` and ``postgres_fold.py`` write it), ``rebuild`` makes them again from the
log, and ``verify`` compares them with the fold of the log (``check.py``). The rule of what a turn adds is
``registry.usage.fold_usage``'s; the keys' text columns hold '' for "none" (a primary key column is never NULL).
The sums are not sealed as the sessions' states are: a sum is moved by the database (``value + delta``), and
``verify`` finds an edited one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final, TypeAlias

import msgspec

from events.model import SessionCreated, SessionDeleted, SessionUpdated
from registry.usage import UsageKey, fold_usage

if TYPE_CHECKING:
    import sqlite3

    from registry.fold import Entry

__all__ = [
    "COLUMNS",
    "DAYS_KEY",
    "GROUPS",
    "KEY",
    "SUMS",
    "TEXT",
    "DayRow",
    "UsageFold",
    "UsageGroup",
    "UsageQuery",
    "UsageRow",
    "add_statement",
    "add_to_sqlite",
    "day_rows",
    "grouped",
    "query_statement",
    "select_add",
    "usage_rows",
]


KEY: Final = ("cwd", "model", "currency", "agent", "day")
"""``rm_usage``'s key: the day is the turns' UTC day (days since 1970-01-01); the currency is that of the cost the
turns reported ('' for turns that reported none: their cost is estimated)."""
DAYS_KEY: Final = ("day", "model", "currency", "agent")
"""``rm_usage_days``' key: ``rm_usage``'s summed over cwds."""
SUMS: Final = (
    "turns",
    "input_tokens",
    "output_tokens",
    "cached_read_tokens",
    "cached_write_tokens",
    "thought_tokens",
    "cost_nanos",
)
"""What a key's turns added, after the key in each table (``cost_nanos``: the reported cost, in billionths of the
currency)."""
_KEYS: Final = {"rm_usage": KEY, "rm_usage_days": DAYS_KEY}
COLUMNS: Final = {table: (*key, *SUMS) for table, key in _KEYS.items()}
"""Each table's columns, in every dialect (``schema.TABLES``): a row of it is a plain tuple of these, in order."""
TEXT: Final = frozenset({"agent", "cwd", "model", "currency"})
"""The text columns; every other column is an integer, and none is NULL."""
GROUPS: Final = ("day", "agent", "cwd", "model")
"""The columns a query groups by (weeks and months are days grouped again: ``registry.usage_report``)."""

UsageRow: TypeAlias = tuple[str, str, str, str, int, *tuple[int, ...]]
"""A row of ``rm_usage``: ``COLUMNS["rm_usage"]``, in order."""
DayRow: TypeAlias = tuple[int, str, str, str, *tuple[int, ...]]
"""A row of ``rm_usage_days``: ``COLUMNS["rm_usage_days"]``, in order."""
UsageGroup: TypeAlias = tuple[int | str, str, str, *tuple[int, ...]]
"""One group's totals for one model and currency (a price is per model, a cost per currency): the group (the value
of the column it is grouped by), the model, the currency, then ``SUMS``."""


class UsageQuery(msgspec.Struct, frozen=True):
    """Which turns' totals: grouped ``by`` one of ``GROUPS``; from day ``since`` to day ``until`` (UTC days since
    1970-01-01, both included; None: unbounded); of one ``agent`` and one ``cwd`` (None: all)."""

    by: str = "day"
    since: int | None = None
    until: int | None = None
    agent: str | None = None
    cwd: str | None = None


def usage_rows(totals: Mapping[UsageKey, list[int]]) -> list[UsageRow]:
    """What a fold collected (``registry.usage.fold_usage``) as ``rm_usage`` rows to add, in key order."""
    return sorted(
        (cwd, model, currency, agent, day, *sums) for (day, agent, cwd, model, currency), sums in totals.items()
    )


def day_rows(totals: Mapping[UsageKey, list[int]]) -> list[DayRow]:
    """What a fold collected as ``rm_usage_days`` rows to add (summed over cwds), in key order."""
    days: dict[tuple[int, str, str, str], list[int]] = {}
    for (day, agent, _cwd, model, currency), sums in totals.items():
        found = days.get((day, model, currency, agent))
        if found is None:
            days[(day, model, currency, agent)] = list(sums)
        else:
            for n, value in enumerate(sums):
                found[n] += value
    return [(day, model, currency, agent, *sums) for (day, model, currency, agent), sums in sorted(days.items())]


def _conflict(key: tuple[str, ...]) -> str:
    return f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET " + ", ".join(
        f"{name} = u.{name} + excluded.{name}" for name in SUMS
    )


def add_statement(table: str, dialect: str, prefix: str = "") -> str:
    """The insert that adds a row's sums to the row of its key in ``table``, or makes it (positional parameters)."""
    columns, key = COLUMNS[table], _KEYS[table]
    marks = ", ".join(["?" if dialect == "sqlite" else "%s"] * len(columns))
    return f"INSERT INTO {prefix}{table} AS u ({', '.join(columns)}) VALUES ({marks}) {_conflict(key)}"


_SQLITE_ADD: Final = (add_statement("rm_usage", "sqlite"), add_statement("rm_usage_days", "sqlite"))


def add_to_sqlite(db: sqlite3.Connection, totals: Mapping[UsageKey, list[int]]) -> None:
    """Add what a fold collected to both tables of a SQLite read model, in the fold's transaction."""
    usage, days = _SQLITE_ADD
    if len(totals) == 1:  # a turn: one row in each (an execute costs less than an executemany of one)
        ((day, agent, cwd, model, currency), sums) = next(iter(totals.items()))
        db.execute(usage, (cwd, model, currency, agent, day, *sums))
        db.execute(days, (day, model, currency, agent, *sums))
    else:
        db.executemany(usage, usage_rows(totals))
        db.executemany(days, day_rows(totals))


def select_add(table: str, prefix: str, names: str, source: str) -> str:
    """``add_statement`` for PostgreSQL as a ``SELECT`` of named parameters (``%(<names><column>)s``, a
    ``UsageRow``'s) ``FROM source``: a part of an append's one statement, writing only what ``source`` selects (its
    guard)."""
    columns, key = COLUMNS[table], _KEYS[table]
    marks = ", ".join(f"%({names}{name})s::{'text' if name in TEXT else 'bigint'}" for name in columns)
    return f"INSERT INTO {prefix}{table} AS u ({', '.join(columns)}) SELECT {marks} {source} {_conflict(key)}"


def query_statement(query: UsageQuery, dialect: str, prefix: str = "") -> tuple[str, list[object]]:
    """The statement of a query's groups (``UsageGroup``'s columns) and its parameters: from ``rm_usage_days``, or
    from ``rm_usage`` where the cwd is asked for."""
    if query.by not in GROUPS:
        raise ValueError(f"usage is grouped by one of {', '.join(GROUPS)}, not {query.by!r}")
    mark = "?" if dialect == "sqlite" else "%s"
    where: list[str] = []
    params: list[object] = []
    for condition, value in (
        (f"cwd = {mark}", query.cwd),
        (f"day >= {mark}", query.since),
        (f"day <= {mark}", query.until),
        (f"agent = {mark}", query.agent),
    ):
        if value is not None:
            where.append(condition)
            params.append(value)
    table = "rm_usage" if query.by == "cwd" or query.cwd is not None else "rm_usage_days"
    group = "model, model" if query.by == "model" else f"{query.by}, model"
    sums = ", ".join(f"sum({name})" for name in SUMS)
    text = f"SELECT {group}, currency, {sums} FROM {prefix}{table}"
    if where:
        text += " WHERE " + " AND ".join(where)
    keys = "model, currency" if query.by == "model" else f"{query.by}, model, currency"
    return f"{text} GROUP BY {keys} ORDER BY {keys}", params


def grouped(rows: Iterable[UsageRow], query: UsageQuery) -> list[UsageGroup]:
    """``query`` answered from ``rm_usage`` rows in memory, as the tables' statement answers it (the in-memory read
    model's answer, and what the tests hold the tables to)."""
    if query.by not in GROUPS:
        raise ValueError(f"usage is grouped by one of {', '.join(GROUPS)}, not {query.by!r}")
    by = KEY.index(query.by)
    sums: dict[tuple[int | str, str, str], list[int]] = {}
    for row in rows:
        cwd, model, currency, agent, day, *values = row
        if (
            (query.since is not None and day < query.since)
            or (query.until is not None and day > query.until)
            or (query.agent is not None and agent != query.agent)
            or (query.cwd is not None and cwd != query.cwd)
        ):
            continue
        key = (row[by], model, currency)
        found = sums.get(key)
        if found is None:
            sums[key] = [int(value) for value in values]
        else:
            for n, value in enumerate(values):
                found[n] += int(value)
    ordered = sorted(sums.items(), key=lambda item: item[0])
    return [(group, model, currency, *values) for (group, model, currency), values in ordered]


class UsageFold:
    """Daily totals folded from a log read in order (``apply`` each entry): what the in-memory read model answers
    ``usage`` from. It keeps of each session only what the rule needs - its agent and cwd while it lives - and
    applies the session fold's rules: a session is created once, nothing follows its deletion."""

    def __init__(self) -> None:
        self.position = 0
        self.totals: dict[UsageKey, list[int]] = {}
        self._live: dict[str, tuple[str | None, str]] = {}
        self._gone: set[str] = set()

    def apply(self, entry: Entry) -> None:
        from registry.model import agent_of  # noqa: PLC0415 - registry.model imports this package's parent

        self.position = entry.position
        event, session_id = entry.event, entry.session_id
        if type(event) is SessionUpdated:
            if event.usage is not None:
                found = self._live.get(session_id)
                if found is not None:
                    fold_usage(self.totals, event.at, found[0], found[1], event.usage)
        elif type(event) is SessionCreated:
            if session_id not in self._live and session_id not in self._gone:
                self._live[session_id] = (agent_of(session_id, event.agent), event.cwd)
        elif type(event) is SessionDeleted and session_id in self._live:
            del self._live[session_id]
            self._gone.add(session_id)
