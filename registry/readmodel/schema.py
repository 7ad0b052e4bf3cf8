"""The read model's schema, declared once: the tables every backend keeps, their columns and indexes, the rows of
``rm_meta``; and the one way every backend compares what it finds with it and makes the tables usable.

The columns are the fields of the rows the fold writes (``tables.CurrentRow``, ``tables.PastRow``), so a column
added there is checked at every open and by ``verify`` on every backend; each backend's ``CREATE`` statements
must make exactly these (plus its own, such as SQLite's rowids), which ``registry.testing.ReadModelContract``
checks on fresh tables.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Final, NamedTuple

from events.errors import StoreFormatError
from registry.readmodel.tables import READ_MODEL_VERSION, CurrentRow, PastRow

__all__ = [
    "INDEXES",
    "META_KEYS",
    "TABLES",
    "FoundSchema",
    "newer_version",
    "prepare_tables",
    "schema_problems",
]

log = logging.getLogger("registry.readmodel.tables")

TABLES: Final[Mapping[str, tuple[str, ...]]] = {
    "rm_meta": ("key", "value"),
    "rm_sessions": CurrentRow._fields,
    "rm_past": PastRow._fields,
}
"""The tables every backend keeps and their columns (the fields of the rows the fold writes): the schema a read
model is checked against at open. A backend's ``CREATE`` statements must make exactly these (plus its ``own``
columns, such as SQLite's rowid ``id``): ``ReadModelContract`` checks fresh tables against this declaration."""

INDEXES: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "rm_sessions_order": ("rm_sessions", ("archived", "rank", "session_id", "valid_from")),
    "rm_sessions_cwd": ("rm_sessions", ("cwd", "archived", "rank", "session_id", "valid_from")),
    "rm_sessions_agent": ("rm_sessions", ("agent", "archived", "rank", "session_id", "valid_from")),
    "rm_past_to": ("rm_past", ("valid_to",)),
}
"""The indexes the pages and the pruning rely on: index -> (table, columns)."""

META_KEYS: Final = ("version", "checkpoint", "floor", "live", "anchor")
"""The rows of ``rm_meta``."""


class FoundSchema(NamedTuple):
    """What a backend found in the store: tables with their columns, indexes with their table and columns, and
    ``rm_meta``'s rows (None when it cannot be read)."""

    tables: dict[str, tuple[str, ...]]
    indexes: dict[str, tuple[str, tuple[str, ...]]]
    meta: dict[str, int] | None


def schema_problems(
    found: FoundSchema,
    *,
    own_columns: Mapping[str, tuple[str, ...]] | None = None,
    own_indexes: Mapping[str, tuple[str, tuple[str, ...]]] | None = None,
) -> list[str]:
    """How ``found`` departs from the declared schema (``TABLES``, ``INDEXES``, ``META_KEYS``, the version) and the
    backend's own additions; [] when it is exactly what this version makes. A newer version is one problem,
    named first (``prepare_tables`` refuses it untouched)."""
    problems: list[str] = []
    meta = found.meta
    if meta is not None and "version" in meta and meta["version"] != READ_MODEL_VERSION:
        return [f"version {meta['version']} (this version of acp-session-registry writes {READ_MODEL_VERSION})"]
    for table, columns in TABLES.items():
        if table not in found.tables:
            problems.append(f"table {table} is missing")
            continue
        expected = set(columns) | set((own_columns or {}).get(table, ()))
        have = set(found.tables[table])
        problems += [f"column {table}.{name} is missing" for name in sorted(expected - have)]
        problems += [f"column {table}.{name} is not one this version makes" for name in sorted(have - expected)]
    for name in sorted(found.tables.keys() - TABLES.keys()):
        problems.append(f"table {name} is not one this version makes")
    for index, (table, columns) in {**INDEXES, **(own_indexes or {})}.items():
        got = found.indexes.get(index)
        if got is None:
            problems.append(f"index {index} is missing")
        elif got != (table, columns):
            problems.append(f"index {index} is on {got[0]} ({', '.join(got[1])}), not {table} ({', '.join(columns)})")
    if "rm_meta" in found.tables:
        if meta is None:
            problems.append("rm_meta cannot be read")
        else:
            problems += [f"rm_meta has no {key} row" for key in META_KEYS if key not in meta]
            if meta.get("checkpoint", 0) < 0 or meta.get("floor", 0) < 0 or meta.get("live", 0) < 0:
                problems.append("rm_meta holds a negative position or count")
    return problems


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
    schema is not exactly this version's (``problems``: tables, columns, indexes, ``rm_meta``'s rows, an older
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
    if not repair and found.tables:
        return False  # looked at as they are (``verify`` reports what is wrong with them)
    if not wrong and (not repair or matches_log()):
        return False
    if not wrong:
        before_rebuild()  # outside the lock: the evidence is kept before anything is rebuilt
    with exclusively():
        found = describe()
        wrong = problems(found)
        if not wrong and (not repair or matches_log()):
            return False
        if found.tables:
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
