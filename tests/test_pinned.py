"""A session's ``pinned`` flag end to end: ``set_pinned`` / ``session/set_pinned`` through ``SessionRegistry`` on
the memory, SQLite and PostgreSQL stores, ``_meta``'s ``acp-session-registry/pinned``, the change stream's diff,
``list(pinned=...)`` with its cursor pages, and ``acp-registry pin`` / ``list --pinned`` on a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from msgspec import UNSET
from reactivex.testing import TestScheduler

from events import MemoryStore, SessionPinned
from registry import InvalidCursor, InvalidParams, SessionNotFound, SessionRegistry
from registry.cursor import Cursor, CursorCodec
from registry.diffs import ListChange, Updated
from registry.filters import ListFilter
from registry.model import META_PINNED
from registry.proxy.book import Book
from registry.proxy.identity import Identity
from registry.proxy.names import take_over
from registry.proxy.recorder import Recorder
from registry.proxy.titles import TitlePolicy
from tests.acp_wire import WireServer
from tests.cli_runner import Cli
from tests.proxy_wire import started
from tests.test_filters import IDENTITY, _version2_token

T0 = 1_700_000_000_000_000_000


@pytest.fixture(params=["memory", "sqlite", "sqlite-fold", "postgresql"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionRegistry]:
    """A registry of two-session pages on a new store of each backend (and the in-memory fold on a SQLite one)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param.startswith("sqlite"):
        url = f"sqlite://{tmp_path}/s.db"
    else:
        made: Callable[[], str] = request.getfixturevalue("postgres_schemas")
        url = made()
    read_model = "memory" if request.param == "sqlite-fold" else None
    with SessionRegistry.open(url, page_size=2, follow=False, read_model=read_model) as opened:
        yield opened


def _ids(registry: SessionRegistry, cwd: str | None = None, **filters: object) -> list[str]:
    """Every page of a walk, as a client walks them."""
    seen: list[str] = []
    page = registry.list(cwd, **filters)  # type: ignore[arg-type]
    while True:
        seen += [info.session_id for info in page.sessions]
        if page.next_cursor is UNSET:
            return seen
        assert isinstance(page.next_cursor, str)
        page = registry.list(cwd, page.next_cursor, **filters)  # type: ignore[arg-type]


def _five(registry: SessionRegistry) -> None:
    for n in range(5):  # s4 is the newest: the list is s4, s3, s2, s1, s0
        registry.create("/w", session_id=f"s{n}", at=T0 + n * 1_000_000_000)


def test_pin_and_unpin_show_in_meta_and_write_once(registry: SessionRegistry) -> None:
    _five(registry)
    assert registry.set_pinned("s1") is True
    shown = registry.get("s1").meta
    assert shown is not UNSET and shown[META_PINNED] is True
    other = registry.get("s2").meta
    assert other is not UNSET and META_PINNED not in other
    state = registry.state("s1")
    assert state is not None and state.pinned is True
    position = registry.position
    registry.set_pinned("s1", True)  # pinned already: nothing is written
    assert registry.position == position
    assert registry.set_pinned("s1", False) is False
    unpinned = registry.get("s1").meta
    assert unpinned is not UNSET and META_PINNED not in unpinned
    registry.set_pinned("s1", False)
    assert registry.position == position + 1
    # The method table's entry follows from the command's row: params, answer, errors.
    assert registry.handle("session/set_pinned", {"sessionId": "s3"}) == {}
    assert registry.handle("session/set_pinned", {"sessionId": "s3", "pinned": False}) == {}
    assert registry.handle("session/set_pinned", {"sessionId": "s0", "pinned": True}) == {}
    assert [registry.state(f"s{n}").pinned for n in range(5)] == [True, False, False, False, False]  # type: ignore[union-attr]
    with pytest.raises(InvalidParams) as wrong:
        registry.set_pinned("s1", "yes")  # type: ignore[arg-type]
    assert str(wrong.value) == "pinned must be a boolean, not a string" and wrong.value.field == "pinned"
    with pytest.raises(InvalidParams):
        registry.handle("session/set_pinned", {"sessionId": "s1", "pinned": "yes"})
    with pytest.raises(SessionNotFound):
        registry.set_pinned("nope")
    registry.delete("s2")
    with pytest.raises(SessionNotFound):
        registry.set_pinned("s2")


def test_the_list_filters_by_pinned_and_its_cursor_pages(registry: SessionRegistry) -> None:
    _five(registry)
    for name in ("s4", "s2", "s1"):
        registry.set_pinned(name)
    assert _ids(registry) == ["s4", "s3", "s2", "s1", "s0"]
    assert _ids(registry, pinned=None) == ["s4", "s3", "s2", "s1", "s0"]
    assert _ids(registry, pinned=True) == ["s4", "s2", "s1"]  # two pages of two
    assert _ids(registry, pinned=False) == ["s3", "s0"]
    first = registry.list(pinned=True)
    assert [info.session_id for info in first.sessions] == ["s4", "s2"] and isinstance(first.next_cursor, str)
    for other in (None, False):  # a cursor is bound to the filter
        with pytest.raises(InvalidCursor) as caught:
            registry.list(None, first.next_cursor, pinned=other)
        assert caught.value.reason == "pinned"
    # A walk goes on as of where it started: a pin after its first page does not move it.
    registry.set_pinned("s3")
    rest = registry.list(None, first.next_cursor, pinned=True)
    assert [info.session_id for info in rest.sessions] == ["s1"]
    assert _ids(registry, pinned=True) == ["s4", "s3", "s2", "s1"]
    # It combines with the other filters.
    registry.archive("s2")
    assert _ids(registry, pinned=True) == ["s4", "s3", "s1"]
    assert _ids(registry, pinned=True, archived="only") == ["s2"]
    assert _ids(registry, pinned=True, archived="include") == ["s4", "s3", "s2", "s1"]
    assert _ids(registry, "/w", pinned=True) == ["s4", "s3", "s1"]
    assert _ids(registry, "/elsewhere", pinned=True) == []
    with pytest.raises(InvalidParams) as wrong:
        registry.list(pinned="yes")  # type: ignore[arg-type]
    assert str(wrong.value) == "pinned must be a boolean or null, not a string"
    with pytest.raises(InvalidParams) as unsearched:  # a search does not take it: refused, never dropped
        registry.list(query="login", pinned=True)
    assert unsearched.value.field == "pinned"


def test_a_cursor_made_before_the_filter_existed_walks_on_as_the_list_without_it() -> None:
    codec = CursorCodec(IDENTITY)
    cursor = Cursor(position=41, rank=-1_790_000_000_000, session_id="s-1")
    old = _version2_token(cursor, "/w", 0, "codex")  # the bytes a release without the filter wrote
    where = ListFilter(cwd="/w", agent="codex")
    assert codec.decode(old, where) == cursor
    assert codec.decode(codec.encode(cursor, where), where) == cursor
    with pytest.raises(InvalidCursor) as caught:
        codec.decode(old, ListFilter(cwd="/w", agent="codex", pinned=True))
    assert caught.value.reason == "pinned"


def _collect(registry: SessionRegistry, scheduler: TestScheduler, **options: object) -> list[ListChange]:
    items: list[ListChange] = []
    registry.list_changes(scheduler=scheduler, **options).subscribe(items.append)  # type: ignore[arg-type]
    scheduler.advance_by(1)
    return items


def test_the_change_stream_carries_pinned_in_meta() -> None:
    with SessionRegistry(MemoryStore(), follow=False) as registry:
        registry.create("/w", session_id="a", at=T0)
        scheduler = TestScheduler()
        items = _collect(registry, scheduler)
        updates: list[object] = []
        registry.changes(scheduler=scheduler).subscribe(updates.append)
        scheduler.advance_by(1)
        registry.set_pinned("a")
        registry.set_pinned("a")  # nothing written: nothing sent
        registry.set_pinned("a", False)
        scheduler.advance_by(1)
        assert [type(item) for item in items] == [Updated, Updated]  # a pin stays in the list: an update
        pinned, unpinned = items
        assert isinstance(pinned, Updated) and isinstance(unpinned, Updated)
        meta = pinned.notification.update.meta
        assert isinstance(meta, dict) and meta[META_PINNED] is True
        cleared = unpinned.notification.update.meta
        assert isinstance(cleared, dict) and META_PINNED not in cleared
        assert len(updates) == 2
        assert [type(entry.event) for entry in registry.store.read_stream("a")][1:] == [SessionPinned, SessionPinned]


def test_a_proxy_neither_retires_a_pinned_session_nor_drops_the_pin_when_it_takes_one_over() -> None:
    with SessionRegistry(MemoryStore(), follow=False) as registry:
        identity = Identity(["agent"])
        recorder = Recorder(registry, identity, Book(registry.read_model, identity), TitlePolicy(lambda _line: None))
        registry.create("/w", session_id="agent:a", agent="agent", at=T0)
        state = registry.state("agent:a")
        assert state is not None and not recorder.touched(state)  # no turn, nothing the user did: retirable
        registry.set_pinned("agent:a")
        state = registry.state("agent:a")
        assert state is not None and recorder.touched(state)  # pinned by the user: kept
        registry.create("/w", session_id="fast-agent-acp:p", agent="fast-agent-acp", at=T0)
        registry.set_pinned("fast-agent-acp:p")
        assert take_over(registry, "fast-agent", ("fast-agent-acp",)) == 1
        moved = registry.state("fast-agent:p")
        assert moved is not None and moved.pinned and not moved.deleted
        assert sorted(_ids(registry, pinned=True)) == ["agent:a", "fast-agent:p"]


def test_set_pinned_over_the_wire_of_serve_and_of_a_proxy(tmp_path: Path) -> None:
    """The method table's entry on both surfaces: ``serve`` answers it from the registry; a proxy answers it in front
    of an agent that has no such method (checked from memory, written by its recorder) and never forwards it."""
    with WireServer(f"sqlite://{tmp_path}/serve.db") as server:
        assert "result" in server.call(0, "initialize", {"protocolVersion": 1})
        made = server.call(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        assert server.call(2, "session/set_pinned", {"sessionId": made}) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        (listed,) = server.call(3, "session/list", {})["result"]["sessions"]
        assert listed["_meta"][META_PINNED] is True
        refused = server.call(4, "session/set_pinned", {"sessionId": made, "pinned": "yes"})["error"]
        assert refused["code"] == -32602
        assert server.call(5, "session/set_pinned", {"sessionId": "nope"})["error"]["code"] == -32002
        assert server.call(6, "session/set_pinned", {"sessionId": made, "pinned": False})["result"] == {}
        (listed,) = server.call(7, "session/list", {})["result"]["sessions"]
        assert META_PINNED not in listed.get("_meta", {})
    url = f"sqlite://{tmp_path}/proxy.db"
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    with proxy:
        assert proxy.result(2, "session/set_pinned", {"sessionId": session}) == {}
        assert proxy.result(3, "session/list", {})["sessions"][0]["_meta"][META_PINNED] is True
        assert proxy.call(4, "session/set_pinned", {"sessionId": session, "pinned": 1})["error"]["code"] == -32602
        assert proxy.call(5, "session/set_pinned", {"sessionId": "nobody"})["error"]["code"] == -32002
        assert proxy.close() == 0
    assert "session/set_pinned" not in log.read_text()
    with SessionRegistry.open(url) as registry:  # recorded under the agent's name: ``agent:<its id>``
        (stored,) = _ids(registry, pinned=True)
        state = registry.state(stored)
        assert stored.endswith(f":{session}") and state is not None and state.pinned


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        for n, name in enumerate(("a", "codex:b", "c")):
            registry.create("/w", session_id=name, title=f"Session {name}", at=T0 + n * 1_000_000_000)
    return path


def _listed(run: Cli, path: Path, *args: str) -> list[str]:
    result = run("list", "--all", "--json", *args, store=path)
    assert result.returncode == 0, result.stderr
    return [info["sessionId"] for info in json.loads(result.stdout)]


def test_pin_and_list_pinned_on_the_command_line(run: Cli, tmp_path: Path) -> None:
    path = _store(tmp_path)
    pinned = run("pin", "a", store=path)
    assert pinned.returncode == 0 and pinned.stdout.strip() == "a: pinned", pinned
    shown = run("pin", "b", "true", "--json", store=path)  # the agent's own id names the session too
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    assert info["sessionId"] == "codex:b" and info["_meta"]["acp-session-registry/pinned"] is True
    assert _listed(run, path, "--pinned") == ["codex:b", "a"]
    assert _listed(run, path, "--no-pinned") == ["c"]
    assert _listed(run, path) == ["c", "codex:b", "a"]
    table = run("list", "--pinned", store=path, env={"COLUMNS": "160"})
    assert table.returncode == 0 and "(pinned)" in table.stdout.splitlines()[0], table.stdout
    unpinned = run("pin", "a", "false", store=path)
    assert unpinned.returncode == 0 and unpinned.stdout.strip() == "a: unpinned", unpinned
    assert _listed(run, path, "--pinned") == ["codex:b"]
    history = run("history", "a", store=path, env={"COLUMNS": "200"})
    assert history.stdout.count("pinned") == 2 and "unpinned" in history.stdout, history.stdout
    bad = run("pin", "a", "maybe", store=path)
    assert bad.returncode == 2 and "'maybe' is not true or false" in bad.stderr, bad.stderr
    missing = run("pin", "nope", store=path)
    assert missing.returncode == 2 and "no session 'nope' in this store" in missing.stderr
    # The log carries the events whole: an export imported elsewhere lists the same, and both verify.
    exported = run("export", store=path)
    assert exported.returncode == 0
    assert [json.loads(line)["event"]["type"] for line in exported.stdout.splitlines()].count("pinned") == 3
    dump = tmp_path / "log.jsonl"
    dump.write_text(exported.stdout)
    target = tmp_path / "target.db"
    assert run("import", str(dump), store=target).returncode == 0
    for store in (path, target):
        verified = run("verify", store=store)
        assert verified.returncode == 0, verified.stdout + verified.stderr
    assert _listed(run, target, "--pinned") == ["codex:b"]
