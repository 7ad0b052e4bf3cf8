"""``session/list`` pages: cut from the read model as of the walk's position, with the cursor to the next one.

A walk starts at the read model's checkpoint, caught up to the log's head (so a process always lists what any
process has written), and every later page is served as of that position - exactly within the window, else in
the current order without the sessions changed since, which the page's ``_meta`` says.
"""

from __future__ import annotations

import itertools
from typing import Final

from registry.cursor import Cursor, CursorCodec
from registry.errors import InvalidCursor
from registry.filters import ListFilter
from registry.model import (
    META_CONSISTENCY,
    ListSessionsResult,
    SessionInfo,
    SessionState,
    session_info,
    sort_key,
)
from registry.readmodel import ReadModel

__all__ = ["Renderer", "list_page"]

_PAST_WINDOW_META: Final = {
    META_CONSISTENCY: "current",
    f"{META_CONSISTENCY}Note": "this walk started before the consistency window: it goes on in the current order "
    "and leaves out sessions changed since it began",
}


class Renderer:
    """The ACP ``SessionInfo`` of a state, made once per version of a session: a version is named by the session's
    id and the position of its last event, and never changes, so a page asked for again costs a dict look-up per
    session instead of building its times and ``_meta`` again. Bounded (the oldest half goes when it is full)."""

    def __init__(self, *, additional_directories: bool, size: int = 20_000) -> None:
        self._directories = additional_directories
        self._size = size
        self._made: dict[str, tuple[int, SessionInfo]] = {}

    def __call__(self, state: SessionState) -> SessionInfo:
        made = self._made.get(state.session_id)
        if made is not None and made[0] == state.position:
            return made[1]
        info = session_info(state, additional_directories=self._directories)
        if len(self._made) >= self._size:
            for key in list(itertools.islice(self._made, self._size // 2)):
                del self._made[key]
        self._made[state.session_id] = (state.position, info)
        return info

    def page(self, states: list[SessionState]) -> list[SessionInfo]:
        """``self(state)`` of each state, with the look-ups in one loop (a page is 50 of them)."""
        made = self._made
        infos = []
        for state in states:
            found = made.get(state.session_id)
            infos.append(found[1] if found is not None and found[0] == state.position else self(state))
        return infos


def list_page(
    read_model: ReadModel,
    cursors: CursorCodec,
    *,
    where: ListFilter,
    cursor: str | None,
    page_size: int,
    render: Renderer,
) -> ListSessionsResult:
    """One page of the sessions ``where`` selects (its ``cwd`` canonical), after ``cursor`` (None: the first
    page). The filters apply before pagination; the cursor is bound to them."""
    if cursor is None:
        as_of, page = read_model.first_page(where=where, limit=page_size)
    else:
        walk = cursors.decode(cursor, where)
        if walk.position > read_model.position and walk.position > read_model.catch_up():
            raise InvalidCursor("foreign", "the cursor is ahead of this store's log")
        as_of = walk.position
        after = (walk.rank, walk.session_id)
        page = read_model.page(as_of=as_of, after=after, where=where, limit=page_size)
    result = ListSessionsResult(render.page(page.states))
    if page.more:
        rank, last = sort_key(page.states[-1])
        result.next_cursor = cursors.encode(Cursor(as_of, rank, last), where)
    if not page.consistent:
        result.meta = dict(_PAST_WINDOW_META)
    return result
