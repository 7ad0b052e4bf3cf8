"""session/list exactly as the README promises: golden JSON, cursor errors, params, cwd, titles, delete."""

from __future__ import annotations

import base64
import hmac
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from events import MemoryStore, SessionCreated, TitleSource, open_store
from events.store import StoreIdentity
from events.testing import fake_clock
from registry import (
    InvalidCursor,
    InvalidParams,
    MethodNotFound,
    SessionDeletedError,
    SessionExists,
    SessionNotFound,
    SessionRegistry,
    rpc_error,
)
from registry.cursor import Cursor, CursorCodec
from registry.filters import ListFilter
from registry.model import META_MESSAGES, META_TITLE_SOURCE, format_time, parse_time

T0 = parse_time("2025-10-27T15:30:00Z")


@pytest.fixture
def registry() -> Iterator[SessionRegistry]:
    with SessionRegistry(MemoryStore(), clock=fake_clock(T0)) as registry:
        yield registry


_SPEC_SESSIONS: list[tuple[str, str, str, str | None, dict[str, Any] | None]] = [
    ("/home/user/project", "sess_uvw345rst678", "2025-10-27T15:30:00Z", None, None),
    ("/home/user/another-project", "sess_xyz789ghi012", "2025-10-28T16:45:30Z", "Debug authentication flow", None),
    (
        "/home/user/project",
        "sess_abc123def456",
        "2025-10-29T14:22:15Z",
        "Implement session list API",
        {"messageCount": 12, "hasErrors": False},
    ),
]
"""The three sessions of the ACP session-list page's example, oldest first: cwd, id, time, title (the agent's), the
agent's own ``_meta``."""


def _spec_sessions(registry: SessionRegistry) -> None:
    for cwd, session_id, at, title, meta in _SPEC_SESSIONS:
        source = TitleSource.USER if title is None else TitleSource.AGENT  # as create's default when untitled
        registry.create(cwd, session_id=session_id, title=title, title_source=source, meta=meta, at=parse_time(at))


def _meta(source: str | None, messages: int = 0, **own: Any) -> dict[str, Any]:
    meta = dict(own)
    if source is not None:
        meta[META_TITLE_SOURCE] = source
    meta[META_MESSAGES] = messages
    return meta


SPEC_PAGE = [
    {
        "sessionId": "sess_abc123def456",
        "cwd": "/home/user/project",
        "title": "Implement session list API",
        "updatedAt": "2025-10-29T14:22:15.000Z",
        "_meta": _meta("agent", messageCount=12, hasErrors=False),
    },
    {
        "sessionId": "sess_xyz789ghi012",
        "cwd": "/home/user/another-project",
        "title": "Debug authentication flow",
        "updatedAt": "2025-10-28T16:45:30.000Z",
        "_meta": _meta("agent"),
    },
    {
        "sessionId": "sess_uvw345rst678",
        "cwd": "/home/user/project",
        "updatedAt": "2025-10-27T15:30:00.000Z",
        "_meta": _meta(None),
    },
]


def test_the_spec_example_in_one_page(registry: SessionRegistry) -> None:
    _spec_sessions(registry)
    assert registry.handle("session/list", {}) == {"sessions": SPEC_PAGE}


def test_the_spec_example_in_pages_of_two(registry: SessionRegistry) -> None:
    _spec_sessions(registry)
    small = SessionRegistry(registry.store, page_size=2, follow=False)
    first = small.handle("session/list", {})
    assert first["sessions"] == SPEC_PAGE[:2]
    assert isinstance(first["nextCursor"], str) and set(first) == {"sessions", "nextCursor"}
    assert small.handle("session/list", {"cursor": first["nextCursor"]}) == {"sessions": SPEC_PAGE[2:]}


def test_cwd_filter_and_the_wire_bytes(registry: SessionRegistry) -> None:
    _spec_sessions(registry)
    result = registry.list(cwd="/home/user/project")
    assert [s.session_id for s in result.sessions] == ["sess_abc123def456", "sess_uvw345rst678"]
    wire = msgspec.json.encode(registry.list(cwd="/home/user/another-project"))
    assert wire == (
        b'{"sessions":[{"sessionId":"sess_xyz789ghi012","cwd":"/home/user/another-project",'
        b'"title":"Debug authentication flow","updatedAt":"2025-10-28T16:45:30.000Z",'
        b'"_meta":{"acp-session-registry/titleSource":"agent","acp-session-registry/messageCount":0}}]}'
    )


def test_no_match_and_empty_registry_give_an_empty_list(registry: SessionRegistry) -> None:
    assert registry.handle("session/list", {}) == {"sessions": []}
    _spec_sessions(registry)
    assert registry.handle("session/list", {"cwd": "/nowhere"}) == {"sessions": []}


def test_params_absent_null_or_with_unknown_keys(registry: SessionRegistry) -> None:
    _spec_sessions(registry)
    expected = {"sessions": SPEC_PAGE}
    assert registry.handle("session/list") == expected
    assert registry.handle("session/list", None) == expected
    assert registry.handle("session/list", {"cwd": None, "cursor": None}) == expected
    assert registry.handle("session/list", {"_meta": {"x": 1}, "pageSize": 2, "sort": "title"}) == expected


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ([], "params must be an object, not an array"),
        ("x", "params must be an object, not a string"),
        ({"cwd": 7}, "cwd must be a string, not a number"),
        ({"cwd": ["/a"]}, "cwd must be a string, not an array"),
        ({"cursor": 1}, "cursor must be a string, not a number"),
        ({"cwd": "relative/dir"}, "cwd must be an absolute path"),
        ({"cwd": ""}, "cwd must be an absolute path, got an empty string"),
        ({"cwd": "~/project"}, "cwd must be an absolute path"),
    ],
)
def test_wrong_params_are_invalid_params(registry: SessionRegistry, params: Any, message: str) -> None:
    with pytest.raises(InvalidParams, match=message) as caught:
        registry.handle("session/list", params)
    error = rpc_error(caught.value)
    assert error.code == -32602 and message in error.message


def test_unknown_method(registry: SessionRegistry) -> None:
    with pytest.raises(MethodNotFound) as caught:
        registry.handle("session/rename", {})
    assert rpc_error(caught.value).code == -32601


# -- cursors ---------------------------------------------------------------------------------------------


def _walk_cursor(registry: SessionRegistry, cwd: str | None = None) -> str:
    for n in range(5):
        registry.create("/work/a" if n % 2 else "/work/b", session_id=f"s{n}", at=T0 + n)
    small = SessionRegistry(registry.store, page_size=1, follow=False)
    cursor = small.list(cwd=cwd).next_cursor
    assert isinstance(cursor, str)
    return cursor


def _flip(token: str, index: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw[index] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def _cursor_error(registry: SessionRegistry, cursor: str, cwd: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"cursor": cursor}
    if cwd is not None:
        params["cwd"] = cwd
    with pytest.raises(InvalidCursor) as caught:
        registry.handle("session/list", params)
    return msgspec.to_builtins(rpc_error(caught.value))  # type: ignore[no-any-return]


def test_every_cursor_error_says_which(registry: SessionRegistry, tmp_path: Path) -> None:
    good = _walk_cursor(registry)
    cases = {
        "garbled": ["!!not base64!!", "eyJwYWdlIjogMn0=", good + "AAAA", "ünïcode"],
        "truncated": [good[:-6], good[:3]],
        "tampered": [_flip(good, len(base64.urlsafe_b64decode(good + "==")) - 20), _flip(good, -1)],
        "version": ["Bw" + good[2:]],
    }
    for reason, cursors in cases.items():
        for cursor in cursors:
            error = _cursor_error(registry, cursor)
            assert error["code"] == -32602
            assert error["data"] == {"field": "cursor", "reason": reason}, (cursor, error)
            assert error["message"].startswith(f"invalid cursor ({reason})")
    with SessionRegistry(open_store(f"sqlite://{tmp_path}/other.db"), owns_store=True) as other:
        assert _cursor_error(other, good)["data"] == {"field": "cursor", "reason": "foreign"}
    from_elsewhere = _walk_cursor(SessionRegistry(MemoryStore()), cwd="/work/a")
    assert _cursor_error(registry, from_elsewhere, cwd="/work/a")["data"] == {"field": "cursor", "reason": "foreign"}
    own = SessionRegistry(registry.store, page_size=1, follow=False)
    bound = own.list(cwd="/work/a").next_cursor
    assert isinstance(bound, str)
    assert _cursor_error(own, bound)["data"] == {"field": "cursor", "reason": "cwd"}
    assert _cursor_error(own, bound, cwd="/work/b")["data"] == {"field": "cursor", "reason": "cwd"}
    assert own.list(cwd="/work/a/", cursor=bound).sessions  # the same filter, spelled differently


def test_a_garbled_cursor_never_restarts_the_walk(registry: SessionRegistry) -> None:
    good = _walk_cursor(registry)
    for cursor in ("", "A", "AQ", good[::-1]):
        with pytest.raises(InvalidCursor):
            registry.list(cursor=cursor)


@pytest.mark.parametrize("secret_bytes", [0, 1, 32, 64, 65, 200])
def test_a_cursor_is_signed_with_hmac_sha256_of_the_stores_secret(secret_bytes: int) -> None:
    """The codec keys its MAC once and copies it per cursor; the tag is HMAC-SHA256's (keys longer than a block too)."""
    identity = StoreIdentity("store", os.urandom(secret_bytes))
    codec = CursorCodec(identity)
    for n in range(3):
        where = ListFilter(cwd=None if n == 0 else f"/work/{n}")
        token = codec.encode(Cursor(position=n + 7, rank=-n, session_id=f"s{n}" * (n + 1)), where)
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        assert raw[-16:] == hmac.digest(identity.secret, raw[:-16], "sha256")[:16]
        assert codec.decode(token, where) == Cursor(n + 7, -n, f"s{n}" * (n + 1))


# -- order, time, titles ---------------------------------------------------------------------------------


def test_order_is_updated_at_descending_then_id_with_cleared_last(registry: SessionRegistry) -> None:
    for sid, at in [("b", 5), ("a", 5), ("c", 9), ("d", 1), ("e", 9)]:
        registry.create("/w", session_id=sid, at=T0 + at * 1_000_000_000)
    registry.change_info("c", updated_at=None)
    registry.change_info("d", updated_at=None)
    assert [s.session_id for s in registry.list().sessions] == ["e", "a", "b", "c", "d"]
    infos = registry.list().sessions
    assert [i.updated_at for i in infos][-2:] == [UNSET, UNSET]
    registry.record_activity("b", at=T0 + 10_000_000_000, messages=3)
    first = registry.list().sessions[0]
    assert first.session_id == "b" and first.updated_at == "2025-10-27T15:30:10.000Z"
    assert isinstance(first.meta, dict) and first.meta[META_MESSAGES] == 3


def test_updated_at_is_rfc3339_utc_with_milliseconds() -> None:
    assert format_time(parse_time("2026-12-02T10:00:00.123456+01:00")) == "2026-12-02T09:00:00.123Z"
    assert format_time(0) == "1970-01-01T00:00:00.000Z"
    with pytest.raises(InvalidParams, match="needs a time zone"):
        parse_time("2026-12-02T10:00:00")
    with pytest.raises(InvalidParams, match="not an RFC 3339"):
        parse_time("yesterday")


def test_a_user_title_is_never_replaced_by_a_generated_one(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s")
    registry.change_info("s", title="Auto title", title_source=TitleSource.AGENT)
    registry.change_info("s", title="My name for it")  # a user rename (the default source)
    head = registry.store.head()
    info = registry.change_info("s", title="Later auto title", title_source=TitleSource.AGENT)
    assert info.title == "My name for it" and registry.store.head() == head  # nothing written
    info = registry.change_info("s", title="From the prompt", title_source=TitleSource.PROMPT)
    assert info.title == "My name for it"
    assert isinstance(info.meta, dict) and info.meta[META_TITLE_SOURCE] == "user"
    assert registry.change_info("s", title=None).title is UNSET  # the user may clear it...
    assert registry.change_info("s", title="Auto", title_source=TitleSource.AGENT).title == "Auto"  # ...then AI may


def test_titles_longer_than_500_characters_are_refused(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s", title="x" * 500)
    with pytest.raises(InvalidParams, match="501 characters long; at most 500"):
        registry.change_info("s", title="x" * 501)
    with pytest.raises(InvalidParams, match="at most 500"):
        registry.create("/w", title="y" * 1000)
    assert registry.get("s").title == "x" * 500


def test_meta_set_replace_and_clear(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s", meta={"a": 1})
    registry.change_info("s", meta={"b": [1, 2]})
    assert registry.get("s").meta == _meta(None, b=[1, 2])
    registry.change_info("s", meta=None)
    assert registry.get("s").meta == _meta(None)
    with pytest.raises(InvalidParams, match="_meta must"):
        registry.change_info("s", meta={"bad": object()})
    with pytest.raises(InvalidParams, match="_meta must be a JSON object"):
        registry.change_info("s", meta={1: "x"})  # type: ignore[dict-item]


# -- cwd ---------------------------------------------------------------------------------------------------


def test_cwd_is_normalised_on_write_and_read(registry: SessionRegistry) -> None:
    info = registry.create("/work//app/./src/../", session_id="s")
    assert info.cwd == "/work/app"
    for spelling in ("/work/app", "/work/app/", "//work///app", "/work/app/x/..", "/work/./app"):
        assert [s.session_id for s in registry.list(cwd=spelling).sessions] == ["s"], spelling
    assert registry.list(cwd="/work").sessions == []
    assert registry.list(cwd="/Work/App").sessions == []  # case is kept


def test_symlinks_resolve_only_when_asked(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    os.symlink(real, link)
    with SessionRegistry(MemoryStore(), resolve_symlinks=True) as resolving:
        assert resolving.create(str(link), session_id="s").cwd == str(real)
        assert [s.session_id for s in resolving.list(cwd=str(link)).sessions] == ["s"]
    with SessionRegistry(MemoryStore()) as literal:
        assert literal.create(str(link), session_id="s").cwd == str(link)
        assert literal.list(cwd=str(real)).sessions == []


def test_additional_directories_only_with_the_capability() -> None:
    for advertised in (True, False):
        with SessionRegistry(MemoryStore(), additional_directories=advertised) as registry:
            registry.create("/w", session_id="s", additional_directories=["/lib/", "/docs"])
            registry.create("/w", session_id="t")
            infos = {i.session_id: i for i in registry.list().sessions}
            assert infos["s"].additional_directories == (["/lib", "/docs"] if advertised else UNSET)
            assert infos["t"].additional_directories is UNSET  # omitted == empty
    with SessionRegistry(MemoryStore()) as registry, pytest.raises(InvalidParams, match=r"additionalDirectories\[1\]"):
        registry.create("/w", additional_directories=["/ok", "relative"])


# -- delete ------------------------------------------------------------------------------------------------


def test_delete_is_idempotent_and_final(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s")
    registry.create("/w", session_id="t")
    assert registry.handle("session/delete", {"sessionId": "s"}) == {}
    assert registry.handle("session/delete", {"sessionId": "s"}) == {}
    assert registry.handle("session/delete", {"sessionId": "never-existed"}) == {}
    assert [i.session_id for i in registry.list().sessions] == ["t"]
    with pytest.raises(SessionDeletedError, match="was deleted"):
        registry.record_activity("s")
    with pytest.raises(SessionDeletedError) as caught:
        registry.change_info("s", title="back?")
    assert rpc_error(caught.value).code == -32002
    with pytest.raises(SessionExists):
        registry.create("/w", session_id="s")  # the id stays taken by its tombstone
    tombstones = [r for r in registry.store.read_stream("s") if type(r.event).__name__ == "SessionDeleted"]
    assert len(tombstones) == 1
    with pytest.raises(InvalidParams, match="sessionId must be a non-empty string"):
        registry.handle("session/delete", {"sessionId": 5})


def test_writes_to_unknown_sessions_are_refused(registry: SessionRegistry) -> None:
    with pytest.raises(SessionNotFound) as caught:
        registry.record_activity("ghost")
    assert msgspec.to_builtins(rpc_error(caught.value)) == {
        "code": -32002,
        "message": "session 'ghost' not found",
        "data": {"sessionId": "ghost"},
    }


def test_a_deleted_session_never_comes_back_even_from_raw_appends(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s")
    registry.delete("s")
    registry.store.append("s", [SessionCreated(cwd="/w", at=T0)])  # e.g. a buggy importer
    registry.sync()
    assert registry.list().sessions == []


def test_page_size_is_bounded() -> None:
    for bad in (0, 1001, True, "50"):
        with pytest.raises(ValueError, match="page_size"):
            SessionRegistry(MemoryStore(), page_size=bad)  # type: ignore[arg-type]
