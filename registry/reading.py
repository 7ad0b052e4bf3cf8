"""``SessionPages``: the read side of the facade - ``session/list`` pages from a store's read model, and nothing
that writes, follows or searches. ``SessionRegistry`` is a ``SessionPages`` (its ``list`` adds the search); a
process that only reads pages (``acp-registry list``) makes this alone and loads none of the rest: the checks and
decisions of commands, the writer, the follower, forks, turns, the search.

The page rules are ``pages.py``'s; the cursor is signed with the store's identity (``cursor.py``); every page
catches the read model up to the log's head first, so it sees every process's writes.
"""

from __future__ import annotations

from typing import Self, TypedDict, Unpack

from events.store import EventStore
from registry.backend import Backend
from registry.backends import backend_for
from registry.commands import json_type
from registry.cursor import CursorCodec
from registry.errors import InvalidParams
from registry.filters import Filters, list_filter
from registry.limits import MAX_PAGE_SIZE
from registry.model import ListSessionsResult
from registry.pages import Renderer, list_page
from registry.paths import normalise_cwd
from registry.readmodel import DEFAULT_WINDOW, ReadModel
from registry.readmodel.guard import open_read_model

__all__ = ["PageOptions", "SessionPages", "check_cursor"]


class PageOptions(TypedDict, total=False):
    """The keywords that shape a facade's pages, as a subclass or ``open`` passes them on (defaults:
    ``SessionPages.__init__``)."""

    page_size: int
    window: int
    resolve_symlinks: bool
    additional_directories: bool
    read_model: str | None


def check_cursor(cursor: object) -> None:
    """A page's cursor is a string or None (what it says is the codec's to check)."""
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidParams(f"cursor must be a string, not {json_type(cursor)}", field="cursor")


class SessionPages:
    """``session/list`` pages of a store's sessions from its read model. ``page_size`` is how many sessions a page
    holds (1 to 1000); ``window`` is how many log positions a walk may span and still be exact (see the README);
    ``read_model`` forces ``"memory"`` (the in-memory fold) or ``"tables"``; ``owns_store``: ``close`` closes the
    store too."""

    def __init__(
        self,
        store: EventStore,
        *,
        page_size: int = 50,
        window: int = DEFAULT_WINDOW,
        resolve_symlinks: bool = False,
        additional_directories: bool = True,
        read_model: str | None = None,
        owns_store: bool = False,
    ) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be an int from 1 to {MAX_PAGE_SIZE}, got {page_size!r}")
        self._store = store
        self.page_size = page_size
        self.resolve_symlinks = resolve_symlinks
        self._additional_directories = additional_directories
        self._owns_store = owns_store
        self._cursors = CursorCodec(store.identity)
        self._render = Renderer(additional_directories=additional_directories)
        self._backend = backend_for(store)
        self._read_model = open_read_model(self._backend, window=window, kind=read_model)
        self._closed = False

    @property
    def store(self) -> EventStore:
        return self._store

    @property
    def backend(self) -> Backend:
        """What the registry keeps beside the store's log (the read model's tables, kept snapshots, evidence)."""
        return self._backend

    @property
    def read_model(self) -> ReadModel:
        """Where the answers come from (tables in the store, or the in-memory fold)."""
        return self._read_model

    @property
    def additional_directories(self) -> bool:
        """Whether the ``additionalDirectories`` capability is advertised (and the field shown)."""
        return self._additional_directories

    @property
    def position(self) -> int:
        """The log position the registry's answers last reflected (``sync()`` brings it to the head)."""
        return self._read_model.position

    def list(self, cwd: str | None = None, cursor: str | None = None, **filters: Unpack[Filters]) -> ListSessionsResult:
        """One ``session/list`` page: most recent activity first; ``nextCursor`` only when more follow.

        The list filters (``registry.filters``) by keyword: ``archived``: ``"exclude"`` (the default; None is the
        same), ``"include"`` or ``"only"``; ``agent``: only that agent's sessions. They apply before pagination,
        and a cursor is bound to them and to ``cwd`` (another value -> ``InvalidCursor``)."""
        check_cursor(cursor)
        where = list_filter(
            None if cwd is None else normalise_cwd(cwd, resolve_symlinks=self.resolve_symlinks), **filters
        )
        return list_page(
            self._read_model, self._cursors, where=where, cursor=cursor, page_size=self.page_size, render=self._render
        )

    def __len__(self) -> int:
        """Live sessions."""
        self._read_model.catch_up()
        return self._read_model.count()

    def close(self) -> None:
        """Release the read model, close an owned store."""
        if self._closed:
            return
        self._closed = True
        try:
            self._release()
            self._read_model.close()
        finally:
            if self._owns_store:
                self._store.close()

    def _release(self) -> None:
        """What a subclass holds beside the read model, let go before it (nothing here)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
