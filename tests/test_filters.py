"""The list filters are declared once (``registry.filters``), and what follows from them holds.

* Each filter's normal form refuses what it must, with its message.
* A cursor's bytes are laid out from the declarations as version 2 laid them out by hand: a cursor of an earlier
  release still walks on (one made before a filter existed reads as the list without it), and a cursor carries each
  filter's part (another value is refused naming the filter).
* The written-out page check (``codegen.page_check``) is the filters' tests read one by one, for every list.
* The page statements of both dialects are built from the predicates the list applies, by name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools

import msgspec
import pytest

from events.store import StoreIdentity
from registry.cursor import CURSOR_VERSION, Cursor, CursorCodec
from registry.errors import InvalidCursor, InvalidParams
from registry.filters import ARCHIVED_FILTERS, FILTERS, Equals, ListFilter, bound, list_filter
from registry.model import SessionState
from registry.readmodel import sqlite_sql
from registry.readmodel.postgres_sql import PageShape, _page

IDENTITY = StoreIdentity(store_id="store-1", secret=b"s" * 32)


class _Version2Body(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    """The cursor body as ``registry/cursor.py`` declared it by hand at e20322d."""

    store: bytes
    scope: bytes
    position: int
    rank: int
    session_id: str
    archived: int = 0
    agent: bytes = b""


def _fingerprint(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:8]


def _version2_token(cursor: Cursor, cwd: str | None, archived: int, agent: str | None) -> str:
    body = msgspec.msgpack.encode(
        _Version2Body(
            _fingerprint(IDENTITY.store_id),
            _fingerprint("all" if cwd is None else f"cwd\x00{cwd}"),
            cursor.position,
            cursor.rank,
            cursor.session_id,
            archived,
            b"" if agent is None else _fingerprint(f"agent\x00{agent}"),
        )
    )
    data = bytes((2,)) + len(body).to_bytes(2, "big") + body
    mac = hmac.new(IDENTITY.secret, data, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(data + mac).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("cwd", "archived", "agent"),
    [(None, "exclude", None), ("/work/a", "exclude", None), (None, "only", "codex"), ("/w", "include", "gemini")],
)
def test_cursors_are_the_bytes_version_2_wrote(cwd: str | None, archived: str, agent: str | None) -> None:
    assert CURSOR_VERSION == 2
    codec = CursorCodec(IDENTITY)
    where = list_filter(cwd, archived=archived, agent=agent)
    cursor = Cursor(position=41, rank=-1_790_000_000_000, session_id="s-1")
    old = _version2_token(cursor, cwd, ARCHIVED_FILTERS.index(where.archived), agent)
    assert codec.decode(old, where) == cursor  # a cursor an earlier release made walks on
    if len(FILTERS) == 3:  # the filters version 2 knew: the very bytes (a filter added since adds its part)
        assert codec.encode(cursor, where) == old


def test_a_cursor_replayed_with_another_filter_is_refused_naming_it() -> None:
    codec = CursorCodec(IDENTITY)
    cursor = Cursor(position=7, rank=0, session_id="s")
    lists = {
        "cwd": (ListFilter(cwd="/a"), ListFilter(cwd="/b")),
        "archived": (ListFilter(), ListFilter(archived="only")),
        "agent": (ListFilter(agent="codex"), ListFilter()),
        "pinned": (ListFilter(pinned=True), ListFilter(pinned=False)),
    }
    assert set(lists) == {f.name for f in FILTERS}, "a new filter needs its case here"
    for name, (made, replayed) in lists.items():
        with pytest.raises(InvalidCursor) as caught:
            codec.decode(codec.encode(cursor, made), replayed)
        assert caught.value.reason == name
        assert str(caught.value) == f"invalid cursor ({name}): the cursor belongs to a walk with another {name} filter"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"archived": "all"}, 'archived must be one of "exclude", "include", "only", not \'all\''),
        ({"archived": 1}, 'archived must be one of "exclude", "include", "only", not 1'),
        ({"agent": ""}, "agent must be a non-empty string, not a string"),
        ({"agent": 3}, "agent must be a non-empty string, not a number"),
        ({"agent": "a\x00b"}, "agent must be printable and at most 200 characters long"),
        ({"pinned": 1}, "pinned must be a boolean or null, not a number"),
        ({"pinned": "true"}, "pinned must be a boolean or null, not a string"),
    ],
)
def test_each_filter_refuses_what_its_normal_form_refuses(given: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        list_filter(None, **given)
    assert str(caught.value) == message


def test_the_normal_forms() -> None:
    assert list_filter(None) == ListFilter()
    assert list_filter("/w", archived=None, agent="codex") == ListFilter(cwd="/w", agent="codex")
    assert list_filter(None, archived="only") == ListFilter(archived="only")
    for _ in range(2):  # the second time from what was made the first (kept by what was given, and its types)
        assert list_filter(None, archived="only") == ListFilter(archived="only")
        with pytest.raises(InvalidParams):
            list_filter(None, agent=1)
    list_filter(None, agent=None)
    with pytest.raises(InvalidParams):
        list_filter(None, agent=False)  # equal to 0, not to None: but a boolean is refused either way
    with pytest.raises(TypeError):
        list_filter(None, colour="red")  # not a filter: a caller's mistake, not a client's


def _state(n: int, **fields: object) -> SessionState:
    base = SessionState(f"s{n}", "/a", (), None, None, n, None, 0, n, 1)
    return msgspec.structs.replace(base, **fields)


STATES = [
    _state(n, cwd=cwd, archived=archived, agent=agent, deleted=deleted, pinned=pinned)
    for n, (cwd, archived, agent, deleted, pinned) in enumerate(
        itertools.product(("/a", "/b"), (False, True), (None, "codex", "gemini"), (False, True), (False, True))
    )
]
LISTS = [
    ListFilter(cwd=cwd, archived=archived, agent=agent, pinned=pinned)
    for cwd, archived, agent, pinned in itertools.product(
        (None, "/a", "/b"), ARCHIVED_FILTERS, (None, "codex"), (None, True, False)
    )
]


def _in_list(where: ListFilter, state: SessionState) -> bool:
    """The rule read from the declarations one test at a time."""
    if state.deleted:
        return False
    for f in FILTERS:
        test = f.keeps(getattr(where, f.name))
        if isinstance(test, Equals):
            if getattr(state, test.field) != test.value:
                return False
        elif test is not None and not test(state):
            return False
    return True


@pytest.mark.parametrize("where", LISTS)
def test_the_written_out_page_check_is_the_declarations(where: ListFilter) -> None:
    for state in STATES:
        assert where.matches(state) == _in_list(where, state), (where, state)
    listed = [state for state in STATES if _in_list(where, state)]
    assert where.outside(listed) is None
    for state in STATES:
        if not _in_list(where, state):
            assert where.outside([*listed, state]) is state


def test_the_page_statements_apply_each_narrowing_filters_predicate() -> None:
    for where in LISTS:
        filtered = bound(where)
        names = {f.name for f in FILTERS if f.sql is not None and f.keeps(getattr(where, f.name)) is not None}
        assert set(filtered.narrowing) == names
        params = sqlite_sql.page_params(where, 10, (1, "x"), 50)
        statement = sqlite_sql.page_statement(params, as_of=True)
        pg = _page(PageShape(narrowing=filtered.narrowing, after=True, include=filtered.include, kind="as_of"))
        for f in FILTERS:
            if f.sql is None:
                continue
            assert (f.sql["sqlite"] in statement) == (f.name in names), (where, statement)
            assert (f.sql["postgresql"] in pg) == (f.name in names), (where, pg)
        index = filtered.index_name or "rm_sessions_order"
        assert f"INDEXED BY {index} " in statement
        assert set(params.values) >= {"p", "n", "rank", "sid", "archived"}
