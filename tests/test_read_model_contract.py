"""Each read-side backend held to ``registry.testing.ReadModelContract``."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from events.sqlite import SqliteStore
from events.store import EventStore
from registry.testing import ReadModelContract
from tests.conftest import POSTGRES


class TestSqliteReadModel(ReadModelContract):
    tables = True
    dialect = "sqlite"

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite://{tmp_path}/log.db?synchronous=off"

    def tamper(self, store: EventStore, statement: str) -> None:
        assert isinstance(store, SqliteStore)
        with contextlib.closing(sqlite3.connect(store.path, isolation_level=None)) as db:
            db.executescript(statement)


class TestPostgresReadModel(ReadModelContract):
    tables = True
    dialect = "postgresql"

    @pytest.fixture
    def store_url(self, postgres_schemas: Callable[[], str]) -> str:
        return postgres_schemas()

    def tamper(self, store: EventStore, statement: str) -> None:
        import psycopg  # noqa: PLC0415
        from psycopg import sql  # noqa: PLC0415

        from events.postgres import PostgresStore  # noqa: PLC0415

        assert isinstance(store, PostgresStore)
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
            conn.execute(statement.replace("INTEGER", "bigint"))


class TestMemoryReadModel(ReadModelContract):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"

    def test_a_second_read_model_sees_the_first_ones_writes(self, store_url: str, store: object) -> None:
        pytest.skip("memory:// is one log per open: nothing is shared between two")
