"""Each read-side backend held to ``registry.testing.ReadModelContract``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from registry.testing import ReadModelContract


class TestSqliteReadModel(ReadModelContract):
    tables = True

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite://{tmp_path}/log.db?synchronous=off"


class TestPostgresReadModel(ReadModelContract):
    tables = True

    @pytest.fixture
    def store_url(self, postgres_schemas: Callable[[], str]) -> str:
        return postgres_schemas()


class TestMemoryReadModel(ReadModelContract):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"

    def test_a_second_read_model_sees_the_first_ones_writes(self, store_url: str, store: object) -> None:
        pytest.skip("memory:// is one log per open: nothing is shared between two")
