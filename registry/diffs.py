"""What a client must be told: the minimal ACP ``session_info_update`` between two states of a session.

``diff(position, before, after)`` compares two states as the client sees them (``updatedAt`` to the millisecond,
``_meta`` with the registry's own keys) and returns ``Added`` (a new session), ``Updated`` (the ``session/update``
params carrying only what changed: a new value, or an explicit ``null`` for a clear), ``Removed`` (deleted), or
None when nothing visible changed. Which state fields ``_meta`` shows is ``registry.model.SHOWN_IN_META``: the diff
compares by the same declaration, so a field shown there is never changed without an update. An archived session
is out of the default list: archiving is ``Removed`` and unarchiving ``Added`` there; with ``include_archived``
(the ``session/update`` notifications) both are an ``Updated`` whose ``_meta`` carries ``META_ARCHIVED``.
Pure and without reactivex, so the stdio agent can use it without loading the
stream machinery; ``registry.changes`` builds the live stream on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET, UnsetType

from registry.model import SessionInfo, SessionState, format_time, meta_changed, session_info, visible_meta

if TYPE_CHECKING:
    from registry.fold import Change

__all__ = [
    "Added",
    "ListChange",
    "Removed",
    "SessionInfoUpdate",
    "SessionNotification",
    "Updated",
    "diff",
    "encode_session_update",
    "meta_changed",
    "shown",
    "shown_as",
]


class SessionInfoUpdate(
    msgspec.Struct, omit_defaults=True, rename="camel", tag_field="sessionUpdate", tag="session_info_update", gc=False
):
    """ACP ``session_info_update``: UNSET fields are omitted (unchanged); ``None`` is sent as ``null`` (cleared)."""

    title: str | UnsetType | None = UNSET
    updated_at: str | UnsetType | None = UNSET
    meta: dict[str, Any] | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SessionNotification(msgspec.Struct, rename="camel", gc=False):
    """The params of an ACP ``session/update`` notification."""

    session_id: str
    update: SessionInfoUpdate


class _JsonRpcNotification(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: SessionNotification


class Added(msgspec.Struct, frozen=True, gc=False):
    position: int
    session_id: str
    info: SessionInfo


class Updated(msgspec.Struct, frozen=True, gc=False):
    position: int
    session_id: str
    notification: SessionNotification


class Removed(msgspec.Struct, frozen=True, gc=False):
    position: int
    session_id: str


ListChange = Added | Updated | Removed


_encoder = msgspec.json.Encoder()


def encode_session_update(notification: SessionNotification) -> bytes:
    """The JSON-RPC ``session/update`` message, with explicit nulls kept (the official SDK drops them)."""
    return _encoder.encode(_JsonRpcNotification(method="session/update", params=notification))


def shown(change: Change, *, additional_directories: bool = True, include_archived: bool = False) -> ListChange | None:
    """``diff`` of a fold's change as seen with these options, made once per view however many listeners
    (serve's agent, each stream subscriber) receive this very change object: kept on the change."""
    return shown_as(additional_directories, include_archived)(change)


@functools.cache
def shown_as(additional_directories: bool, include_archived: bool) -> Callable[[Change], ListChange | None]:
    """``shown`` for one view, as a function of the change (what a subscriber calls for each change it gets).

    The first view's diff is kept on the change as it is (``change.view`` says which view): no container per
    change, which would feed the cyclic GC at hundreds of thousands of changes a second; another view's go in
    ``change.views``, made only when a second view is asked for (serve's agent asks two).
    """
    view = 2 * additional_directories + include_archived

    def made(change: Change) -> ListChange | None:
        item: ListChange | None
        if change.view == view:
            item = change.shown
            return item
        views = change.views
        if views is not None and view in views:
            item = views[view]
            return item
        item = diff(
            change.position,
            change.before,
            change.after,
            additional_directories=additional_directories,
            include_archived=include_archived,
        )
        if change.view < 0:
            change.shown, change.view = item, view
        else:
            if views is None:
                views = change.views = {}
            views[view] = item
        return item

    return made


def diff(
    position: int,
    before: SessionState | None,
    after: SessionState | None,
    *,
    additional_directories: bool = True,
    include_archived: bool = False,
) -> ListChange | None:
    """What a client that saw ``before`` must be told to see ``after``; None when nothing visible changed.

    Fields are compared as the client sees them (``updatedAt`` to the millisecond, ``_meta`` with the
    registry's keys), and only changed ones are formatted: this runs once per change and view.
    """
    if (
        before is None
        or after is None
        or before.deleted
        or after.deleted
        or (not include_archived and (before.archived or after.archived))
    ):
        return _listed_or_not(position, before, after, additional_directories, include_archived)
    # Listed before and after (a turn, a title, an archive seen with archived sessions): only what changed.
    old_ms = None if before.updated_at is None else before.updated_at // 1_000_000
    new_ms = None if after.updated_at is None else after.updated_at // 1_000_000
    new_meta = meta_changed(before, after)
    same_title = before.title == after.title
    if same_title and old_ms == new_ms and not new_meta:
        return None
    update = SessionInfoUpdate(
        title=UNSET if same_title else after.title,
        updated_at=UNSET if old_ms == new_ms else (None if after.updated_at is None else format_time(after.updated_at)),
        meta=visible_meta(after) if new_meta else UNSET,
    )
    return Updated(position, after.session_id, SessionNotification(after.session_id, update))


def _listed_or_not(
    position: int,
    before: SessionState | None,
    after: SessionState | None,
    additional_directories: bool,
    include_archived: bool,
) -> ListChange | None:
    """``diff`` of a change that adds or removes a session from the list, or happens out of it."""
    was = before is not None and not before.deleted and (include_archived or not before.archived)
    now = after is not None and not after.deleted and (include_archived or not after.archived)
    if not now:
        return Removed(position, before.session_id) if was and before is not None else None
    assert after is not None and not was  # listed both times: diff's own case
    return Added(position, after.session_id, session_info(after, additional_directories=additional_directories))
