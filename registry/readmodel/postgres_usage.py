"""The PostgreSQL read model's statements on ``rm_usage`` (``usage_tables.py`` has the table and its rule), built
once per schema: the fold's additions - queued after a fold's rows, or written into an append's one statement as
one more CTE gated as the rest of its writes are - and the totals a query asks for."""

from __future__ import annotations

from typing import Final

from psycopg import sql

from registry.readmodel.usage_tables import COLUMNS, UsageQuery, UsageRow, query_statement, select_add

__all__ = ["USAGE_NAMES", "UsageStatements", "usage_params"]

USAGE_NAMES: Final = "rm_u_"
"""The parameters of a usage row written into an append's one statement: ``USAGE_NAMES + column``."""


def usage_params(row: UsageRow) -> dict[str, object]:
    """A usage row as the named parameters of the CTE ``UsageStatements.with_usage`` adds."""
    return {USAGE_NAMES + name: value for name, value in zip(COLUMNS["rm_usage"], row, strict=True)}


class UsageStatements:
    """Every statement on ``rm_usage`` of one schema (identifiers quoted by psycopg)."""

    def __init__(self, schema: str) -> None:
        self._schema = schema
        # Both tables in one statement (a row's named parameters, ``usage_params``): one statement to queue a row.
        both = (
            f"WITH rm_use AS ({select_add('rm_usage', '{s}.', USAGE_NAMES, '')})"
            f" {select_add('rm_usage_days', '{s}.', USAGE_NAMES, '')}"
        )
        self.add = self._q(both)
        self._parts: dict[tuple[bytes, str], bytes] = {}

    def _q(self, template: str) -> bytes:
        return sql.SQL(template).format(s=sql.Identifier(self._schema)).as_bytes(None)  # declared text, never a user's

    def with_usage(self, writes: bytes, source: str) -> bytes:
        """An append's CTEs (``writes``) with two more that add the usage row of ``usage_params`` to the totals,
        writing only what ``source`` (``FROM`` a CTE of the statement: its guard) selects; the same bytes object
        for the same pieces, as the store builds a statement once per set of pieces."""
        key = (writes, source)
        found = self._parts.get(key)
        if found is None:
            ctes = (
                f"rm_use AS ({select_add('rm_usage', '{s}.', USAGE_NAMES, source)}),"
                f" rm_use_days AS ({select_add('rm_usage_days', '{s}.', USAGE_NAMES, source)})"
            )
            found = self._parts[key] = writes + b", " + self._q(ctes)
        return found

    def query(self, query: UsageQuery) -> tuple[bytes, list[object]]:
        """``usage_tables.query_statement`` in this schema."""
        statement, params = query_statement(query, "postgresql", "{s}.")
        return self._q(statement), params
