"""A registry's search index, made the first time something needs it: a search, or a user's delete taking the
words out of it. A registry that only lists (``acp-registry list``, a proxy's pages) never loads the search code."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.search.index import SearchIndex

__all__ = ["IndexOnDemand"]


class IndexOnDemand:
    """The store's erase hook (``EventStore.add_erase_hook``) and the search's index, made by ``make`` on first use."""

    def __init__(self, make: Callable[[], SearchIndex]) -> None:
        self._make = make
        self._index: SearchIndex | None = None
        self._lock = threading.Lock()

    @property
    def index(self) -> SearchIndex:
        with self._lock:
            if self._index is None:
                self._index = self._make()
            return self._index

    def erasing(self, conn: Any, session_id: str, messages: Any) -> None:
        """An erasure's hook: the index takes the session's messages out, in the erasure's transaction."""
        self.index.erasing(conn, session_id, messages)  # type: ignore[attr-defined] # each backend's index has it

    def vacuum(self, conn: Any, stream: int) -> None:
        """After an erasure's commit: the index's own tables let go of what was taken out."""
        self.index.vacuum(conn, stream)  # type: ignore[attr-defined]

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close()
