"""A PostgreSQL schema of a test's own, and the read model kept in it (the read-model tests on PostgreSQL use them)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from events.postgres import PostgresStore
from events.urls import split_postgres_url
from registry.backends import backend_for
from registry.readmodel.guard import GuardedReadModel, open_read_model
from registry.readmodel.postgres import PostgresReadModel

__all__ = ["Schema", "tables_of"]


@dataclass(frozen=True)
class Schema:
    """A PostgreSQL schema of the test's own: its store URL, and the connection string and schema name in it."""

    url: str
    conninfo: str
    name: str

    def checkpoint_and_head(self) -> tuple[int, int]:
        """The read model's checkpoint and the log's head, as the server has them."""
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            row = conn.execute(
                f"SELECT (SELECT value FROM {self.name}.rm_meta WHERE key = 'checkpoint'),"
                f" (SELECT coalesce(max(position), 0) FROM {self.name}.events)"
            ).fetchone()
            assert row is not None
            return row[0], row[1]

    @classmethod
    def of(cls, url: str) -> Schema:
        return cls(url, *split_postgres_url(url))


def tables_of(store: PostgresStore) -> PostgresReadModel:
    """The store's read model itself (``open_read_model`` wraps it in the guard), to reach what only it has."""
    guarded = open_read_model(backend_for(store))
    assert isinstance(guarded, GuardedReadModel)
    model = guarded.inner
    assert isinstance(model, PostgresReadModel)
    return model
