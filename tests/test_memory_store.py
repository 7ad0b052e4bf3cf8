"""The memory store keeps the store contract (the cross-process tests do not apply and skip)."""

from __future__ import annotations

import pytest

from events.testing import StoreContract


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store_url(self) -> str | None:
        return None
