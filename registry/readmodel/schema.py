"""The read model's schema, declared once: its tables (columns, types, collations, keys), its indexes (with their
predicates) and the rows of ``rm_meta``; rendered from here for each dialect - the ``CREATE`` statements, the
inserts - and the one way every backend compares the whole definition it finds with it and makes the tables
usable.

A table's columns are those of the rows the fold writes (``tables.CURRENT_ROW``, ``tables.PAST_ROW``: names and
types), then the columns the list filters declare (``registry.filters``): a column added there is a column in every
dialect, in every insert, and in the check; so is a filter's index. What differs per
dialect is said here too: SQLite keeps an integer rowid (``rowid``: a page is faster than on a table keyed by the
session id, docs/benchmarks.md) and the key as a unique constraint, PostgreSQL the key as the primary key and every
text column in the "C" collation (byte order: the list order is the same in both).

The check compares what the database reports - SQLite's ``sqlite_master`` (the text each object was made by),
PostgreSQL's catalogue (each column's type, collation and nullability, each constraint, each index's columns and
predicate) - with what this declaration renders, for every object on an ``rm_*`` table (a trigger or a view
included): one catalogue query at open.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Final, Literal

import msgspec

from events.errors import StoreFormatError
from events.logger import Logger
from registry.filters import FILTERS
from registry.readmodel.tables import (
    COUNTED,
    CURRENT_COLUMNS,
    CURRENT_ROW,
    FILTER_COLUMNS,
    PAST_COLUMNS,
    PAST_ROW,
    READ_MODEL_VERSION,
)
from registry.readmodel.usage_tables import COLUMNS as USAGE_COLUMNS
from registry.readmodel.usage_tables import DAYS_KEY
from registry.readmodel.usage_tables import KEY as USAGE_KEY
from registry.readmodel.usage_tables import TEXT as USAGE_TEXT

__all__ = [
    "INDEXES",
    "META_KEYS",
    "STORED_COLUMNS",
    "TABLES",
    "Dialect",
    "FoundObject",
    "FoundSchema",
    "Index",
    "Table",
    "expected_objects",
    "insert_statement",
    "newer_version",
    "postgres_ddl",
    "prepare_tables",
    "schema_problems",
    "sqlite_ddl",
]

log = Logger("registry.readmodel.tables")

Dialect = Literal["sqlite", "postgresql"]
Kind = Literal["text", "int", "bool", "blob"]
_TYPES: Final[dict[Kind, tuple[str, str]]] = {
    "text": ("TEXT", 'text COLLATE "C"'),
    "int": ("INTEGER", "bigint"),
    "bool": ("INTEGER", "boolean"),
    "blob": ("BLOB", "bytea"),
}
_KINDS: Final[dict[object, Kind]] = {str: "text", int: "int", bool: "bool", bytes: "blob"}


class Column(msgspec.Struct, frozen=True):
    name: str
    kind: Kind
    required: bool  # NOT NULL


class Table(msgspec.Struct, frozen=True):
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    """Unique per row: the primary key (PostgreSQL; SQLite without ``rowid``), else a unique constraint."""
    rowid: bool = False
    """SQLite: an integer rowid ``id`` the indexes point at, before the declared columns."""
    replace: bool = False
    """An insert of a row whose key exists replaces it (else the row there is kept)."""


class Index(msgspec.Struct, frozen=True):
    name: str
    table: str
    columns: tuple[str, ...]
    where: str = ""
    """A partial index's predicate (the same text in both dialects)."""


def columns_of(row: tuple[tuple[str, object], ...]) -> tuple[Column, ...]:
    """A row's declared columns (name, type) as columns: ``str`` text, ``int``, ``bool``, ``bytes`` blob; ``X |
    None`` nullable."""
    columns = []
    for name, hint in row:
        options = typing.get_args(hint) or (hint,)
        kind = next(option for option in options if option is not type(None))
        columns.append(Column(name, _KINDS[kind], type(None) not in options))
    return tuple(columns)


def _usage_columns(table: str) -> tuple[Column, ...]:
    """A usage table's columns (``usage_tables.COLUMNS``): text or integers, none NULL."""
    return tuple(Column(name, "text" if name in USAGE_TEXT else "int", True) for name in USAGE_COLUMNS[table])


_filtered: Final = tuple(Column(c.name, c.kind, c.required) for c in FILTER_COLUMNS)
TABLES: Final = (
    Table("rm_meta", (Column("key", "text", True), Column("value", "int", True)), ("key",), replace=True),
    Table("rm_sessions", (*columns_of(CURRENT_ROW), *_filtered), ("session_id",), rowid=True, replace=True),
    Table("rm_past", (*columns_of(PAST_ROW), *_filtered), ("session_id", "valid_from"), rowid=True),
    Table("rm_usage", _usage_columns("rm_usage"), USAGE_KEY),
    Table("rm_usage_days", _usage_columns("rm_usage_days"), DAYS_KEY),
)
"""The tables every backend keeps: the current version of each session, the versions later events replaced (kept
for the window), the read model's own facts (``META_KEYS``), and the daily usage totals (``usage_tables``: rows
summed in place, by cwd and over all cwds)."""

INDEXES: Final = (
    Index("rm_sessions_order", "rm_sessions", ("archived", "rank", "session_id", "valid_from"), "live"),
    *(Index(f.index.name, "rm_sessions", f.index.columns, f.index.where) for f in FILTERS if f.index is not None),
    Index("rm_sessions_parent", "rm_sessions", ("parent",), "parent IS NOT NULL"),
    Index("rm_past_to", "rm_past", ("valid_to",)),
)
"""What the pages (one range of one index each: the list order's, or a list filter's, ``Filter.index``), ``show``'s
forks and the pruning of past versions read."""

META_KEYS: Final = ("version", "checkpoint", "floor", "live", "archived", "anchor", "seal")
"""The rows of ``rm_meta``: the version, the log position folded and its chain link (``anchor``), the window's
floor, the live sessions and how many of them are archived, the key the rows are sealed with
(``keys.Seal.key_id``)."""

STORED_COLUMNS: Final = {
    "rm_sessions": CURRENT_COLUMNS,
    "rm_past": PAST_COLUMNS,
    "rm_usage": USAGE_COLUMNS["rm_usage"],
    "rm_usage_days": USAGE_COLUMNS["rm_usage_days"],
}
"""Each table's columns as ``verify`` reads its rows back (``StoredTables.stored``): those of the rows the fold
writes."""


# -- rendering ------------------------------------------------------------------------------------------------


def _column(column: Column, dialect: Dialect) -> str:
    kind = _TYPES[column.kind][dialect == "postgresql"]
    return f"{column.name} {kind}{' NOT NULL' if column.required else ''}"


def _constraint(table: Table, dialect: Dialect) -> str:
    primary = dialect == "postgresql" or not table.rowid
    return f"{'PRIMARY KEY' if primary else 'UNIQUE'} ({', '.join(table.key)})"


def _table_ddl(table: Table, dialect: Dialect, prefix: str) -> str:
    parts = ["id INTEGER PRIMARY KEY"] if table.rowid and dialect == "sqlite" else []
    parts += [_column(column, dialect) for column in table.columns]
    parts.append(_constraint(table, dialect))
    without_rowid = " WITHOUT ROWID" if dialect == "sqlite" and not table.rowid else ""
    return f"CREATE TABLE {prefix}{table.name} ({', '.join(parts)}){without_rowid}"


def _index_ddl(index: Index, prefix: str) -> str:
    where = f" WHERE {index.where}" if index.where else ""
    return f"CREATE INDEX {index.name} ON {prefix}{index.table} ({', '.join(index.columns)}){where}"


def sqlite_ddl() -> list[str]:
    """The statements that make the tables in a SQLite file (exactly the text ``sqlite_master`` then holds)."""
    return [_table_ddl(table, "sqlite", "") for table in TABLES] + [_index_ddl(index, "") for index in INDEXES]


def postgres_ddl(prefix: str) -> list[str]:
    """The statements that make the tables in a PostgreSQL schema (``prefix``: the quoted schema and a dot, or a
    placeholder for it)."""
    return [_table_ddl(table, "postgresql", prefix) for table in TABLES] + [
        _index_ddl(index, prefix) for index in INDEXES
    ]


def insert_statement(
    table: Table,
    dialect: Dialect,
    prefix: str = "",
    names: str | None = None,
    computed: dict[str, str] | None = None,
    source: str = "",
) -> str:
    """The insert of one row of ``table``: positional parameters, or named ones (``%(<names><column>)s``) when
    ``names`` is given (PostgreSQL); a row whose key exists is replaced column by column (``replace``), or kept.
    ``computed``: the columns whose values are these expressions, over ``source`` (``FROM ...``: the statement then
    inserts what it selects there)."""
    columns = [column.name for column in table.columns]
    if names is not None:
        marks = [f"%({names}{name})s" for name in columns]
    else:
        marks = ["?" if dialect == "sqlite" else "%s"] * len(columns)
    if computed:
        marks = [computed.get(name, mark) for name, mark in zip(columns, marks, strict=True)]
    if table.replace:
        update = ", ".join(f"{name} = excluded.{name}" for name in columns if name not in table.key)
        conflict = f"ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {update}"
    else:
        conflict = "ON CONFLICT DO NOTHING"
    values = f"SELECT {', '.join(marks)} {source}" if source else f"VALUES ({', '.join(marks)})"
    return f"INSERT INTO {prefix}{table.name} ({', '.join(columns)}) {values} {conflict}"


# -- checking -------------------------------------------------------------------------------------------------


class FoundObject(msgspec.Struct, frozen=True):
    """An object on an ``rm_*`` table as the database reports it."""

    kind: str
    """``table``, ``index``, ``view``, ``trigger``, ``rule``...: what the database says it is."""
    table: str
    definition: str
    """SQLite: the text it was made by; PostgreSQL: a table's columns and constraints, an index's table, columns
    and predicate, in the form ``expected_objects`` renders."""
    columns: tuple[str, ...] = ()
    """A table's column names (to name a difference)."""


class FoundSchema(msgspec.Struct, frozen=True):
    """What a backend found in the store: the objects on ``rm_*`` tables by name, and ``rm_meta``'s rows (None
    when it cannot be read)."""

    objects: dict[str, FoundObject]
    meta: dict[str, int] | None

    @property
    def tables(self) -> list[str]:
        return [name for name, found in self.objects.items() if found.kind == "table"]


def _normal(predicate: str) -> str:
    """A predicate as PostgreSQL deparses it and as declared, compared alike (its parentheses and spacing aside)."""
    return " ".join(predicate.replace("(", " ").replace(")", " ").split())


def _postgres_definition(table: Table) -> str:
    return "; ".join([*(_column(column, "postgresql") for column in table.columns), _constraint(table, "postgresql")])


def _postgres_index(index: Index) -> str:
    return _normal(f"{index.table} ({', '.join(index.columns)}){' WHERE ' + index.where if index.where else ''}")


def expected_objects(dialect: Dialect) -> dict[str, FoundObject]:
    """What the declaration makes, as ``FoundSchema.objects`` reports it."""
    objects: dict[str, FoundObject] = {}
    for table in TABLES:
        sqlite = _table_ddl(table, "sqlite", "")
        definition = sqlite if dialect == "sqlite" else _postgres_definition(table)
        own = ("id",) if table.rowid and dialect == "sqlite" else ()
        objects[table.name] = FoundObject("table", table.name, definition, (*own, *(c.name for c in table.columns)))
    for index in INDEXES:
        definition = _index_ddl(index, "") if dialect == "sqlite" else _postgres_index(index)
        objects[index.name] = FoundObject("index", index.table, definition)
    return objects


def _found_normal(found: FoundObject, dialect: Dialect) -> str:
    return _normal(found.definition) if dialect == "postgresql" and found.kind == "index" else found.definition


def schema_problems(found: FoundSchema, dialect: Dialect, key_id: int | None = None) -> list[str]:
    """How ``found`` departs from the declared schema and the version (and, given ``key_id``, the key its rows are
    sealed with); [] when it is exactly what this version makes. A newer version is one problem, named first
    (``prepare_tables`` refuses it untouched)."""
    problems: list[str] = []
    meta = found.meta
    if meta is not None and "version" in meta and meta["version"] != READ_MODEL_VERSION:
        return [f"version {meta['version']} (this version of acp-session-registry writes {READ_MODEL_VERSION})"]
    expected = expected_objects(dialect)
    for name, want in expected.items():
        have = found.objects.get(name)
        if have is None:
            problems.append(f"{want.kind} {name} is missing")
        elif have.kind != want.kind:
            problems.append(f"{name} is a {have.kind}, not a {want.kind}")
        elif have.table != want.table:
            problems.append(f"{want.kind} {name} is on {have.table}, not on {want.table}")
        elif _found_normal(have, dialect) != want.definition:
            problems.append(_departure(name, have, want))
    for name in sorted(found.objects.keys() - expected.keys()):
        have = found.objects[name]
        on = f" on {have.table}" if have.table != name else ""
        problems.append(f"{have.kind} {name}{on} is not one this version makes")
    if found.objects.get("rm_meta", FoundObject("", "", "")).kind == "table":
        if meta is None:
            problems.append("rm_meta cannot be read")
        else:
            problems += [f"rm_meta has no {key} row" for key in META_KEYS if key not in meta]
            if any(meta.get(key, 0) < 0 for key in COUNTED):
                problems.append("rm_meta holds a negative position or count")
            if key_id is not None and "seal" in meta and meta["seal"] != key_id:
                problems.append("its rows are sealed with another key (the store's seal key was replaced or lost)")
    return problems


def _departure(name: str, have: FoundObject, want: FoundObject) -> str:
    """One line naming how an object differs from its declaration: its columns where they differ, else both
    definitions."""
    if want.kind == "table":
        missing = [c for c in want.columns if c not in have.columns]
        extra = [c for c in have.columns if c not in want.columns]
        if missing or extra:
            return "; ".join(
                [f"column {name}.{c} is missing" for c in missing]
                + [f"column {name}.{c} is not one this version makes" for c in extra]
            )
    return f"{want.kind} {name} is defined as {have.definition!r}, this version makes {want.definition!r}"


def _reached(found: FoundSchema) -> bool:
    """Whether the tables recorded how far they had seen the log reach (a checkpoint and its chain link)."""
    meta = found.meta or {}
    return meta.get("checkpoint", 0) > 0 and "anchor" in meta


def _quietly(matches_log: Callable[[], bool]) -> bool:
    """``matches_log()``, True when it cannot be told (tables too damaged to say where they reached)."""
    try:
        return matches_log()
    except Exception:
        return True


def newer_version(found: FoundSchema) -> int | None:
    """The version of tables a newer acp-session-registry made (to be left untouched), else None."""
    version = (found.meta or {}).get("version")
    return version if version is not None and version > READ_MODEL_VERSION else None


def prepare_tables(
    location: str,
    *,
    describe: Callable[[], FoundSchema],
    problems: Callable[[FoundSchema], list[str]],
    matches_log: Callable[[], bool],
    exclusively: Callable[[], AbstractContextManager[object]],
    create: Callable[[], None],
    repair: bool,
    before_rebuild: Callable[[], None] = lambda: None,
) -> bool:
    """Make the tables usable, the same way on every backend: create them when missing, rebuild tables whose
    schema is not exactly this version's (``problems``: every object's definition, ``rm_meta``'s rows, an older
    version) and tables whose checkpoint does not match the log (``before_rebuild`` first records
    that the log is shorter than they had seen) - all only with ``repair``: without it, existing tables are left as
    they are, for ``verify`` to report; refuse a newer version untouched, with one line. The decision is
    taken again ``exclusively`` (under the backend's lock), as another process may have just made them. Returns
    whether the tables were (re)made."""
    found = describe()
    newer = newer_version(found)
    if newer is not None:
        raise StoreFormatError(
            location,
            f"its read model has version {newer}; this version of acp-session-registry knows up to "
            f"{READ_MODEL_VERSION}. Upgrade it; the store was left untouched",
        )
    wrong = problems(found)
    if not repair and found.objects:
        return False  # looked at as they are (``verify`` reports what is wrong with them)
    if not wrong and (not repair or matches_log()):
        return False
    if not wrong or (_reached(found) and not _quietly(matches_log)):
        # Outside the lock: the evidence is kept before anything is rebuilt - also when the tables are rebuilt for
        # another reason (their seal key lost with a copy made without it, an older version) yet recorded where
        # the log reached, and it no longer does.
        before_rebuild()
    with exclusively():
        found = describe()
        wrong = problems(found)
        if not wrong and (not repair or matches_log()):
            return False
        if found.objects:
            if wrong:
                log.warning(
                    "%s: the read model's schema is not this version's (%s); rebuilding it from the log",
                    location,
                    "; ".join(wrong[:4]) + (f"; and {len(wrong) - 4} more" if len(wrong) > 4 else ""),
                )
            else:
                log.warning(
                    "%s: the read model's checkpoint does not match the log (a log cut short or replaced?); "
                    "rebuilding it from the log",
                    location,
                )
        create()
    return True
