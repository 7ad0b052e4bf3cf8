"""Fuzzing `SessionRegistry`'s public methods: any argument of any type, in any order, on a real SQLite file.

Each call either works or raises one of the library's own errors (``InvalidParams`` - a ``ValueError`` -
``SessionNotFound``, ``SessionExists``, ``MethodNotFound``), never something else; a refused call writes
nothing; and at the end a registry opened afresh on the same file answers exactly as the one that made it.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import hypothesis.strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from msgspec import UNSET
from reactivex.testing import TestScheduler

from events.errors import RegistryError
from events.model import TitleSource
from events.sqlite import SqliteStore
from registry import SessionRegistry
from registry.limits import MAX_PATH_BYTES
from tests.fuzzing import fuzz_settings, json_values, nested, texts

T = TypeVar("T")


class _Deep(list[Any]):
    """100,000 nested lists that hypothesis can print (the repr of the real thing would recurse)."""

    def __repr__(self) -> str:
        return "nested(100_000)"


# Python values no JSON holds: a host's mistakes, not a client's.
oddities: st.SearchStrategy[Any] = st.sampled_from(
    [
        object(),
        b"/bytes",
        float("nan"),
        float("inf"),
        dt.datetime(2026, 1, 1),  # naive
        dt.datetime(1969, 12, 31, tzinfo=dt.UTC),
        dt.datetime(9999, 1, 1, tzinfo=dt.UTC),
        TitleSource.AGENT,
        {1: "int key"},
        ("tuple",),
        {"set"},
        "\udcff",
        _Deep([nested(100_000)]),
    ]
)
anything: st.SearchStrategy[Any] = st.one_of(json_values, oddities)
paths: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(["/work/a", "/work/a/", "/work//b/./c/..", "/", "relative", "", "/x\x00y", "~/p"]),
    st.builds(lambda n: "/" + "p" * n, st.sampled_from([MAX_PATH_BYTES - 1, MAX_PATH_BYTES])),
    anything,
)
times: st.SearchStrategy[Any] = st.one_of(
    st.integers(min_value=0, max_value=2**63 - 1),
    st.sampled_from(["2026-12-02T10:00:00Z", "2026-12-02T10:00:00", "yesterday", -1, 2**63, 2**64]),
    anything,
)
sources: st.SearchStrategy[Any] = st.one_of(st.sampled_from(list(TitleSource)), anything)
titles: st.SearchStrategy[Any] = st.one_of(texts, st.sampled_from(["t" * 500, "t" * 501]), anything)
metas: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.dictionaries(texts, json_values, max_size=3),
    st.just({"k": "v" * 70_000}),
    st.just({"k": nested(40)}),
    anything,
)


class RegistryCalls(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="fuzz-registry-"))
        self.store = SqliteStore(str(self.folder / "log.db"))
        self.registry = SessionRegistry(self.store, follow=False, page_size=3)
        self.sessions: list[str] = []
        self.cursors: list[str] = []

    def _call(self, call: Callable[[], T]) -> T | None:
        head = self.store.head()
        try:
            return call()
        except (RegistryError, ValueError) as exc:
            assert isinstance(exc, RegistryError | ValueError)
            assert self.store.head() == head, f"refused ({exc}) but the log moved"
            assert str(exc), "an error without a message"
            return None

    def _session(self, data: st.DataObject) -> Any:
        known = st.sampled_from(self.sessions) if self.sessions else st.nothing()
        return data.draw(st.one_of(known, known, texts, anything))

    @rule(data=st.data(), cwd=paths, directories=st.one_of(st.lists(paths, max_size=3), anything))
    def create(self, data: st.DataObject, cwd: Any, directories: Any) -> None:
        session_id = data.draw(st.one_of(st.none(), texts, anything))
        info = self._call(
            lambda: self.registry.create(
                cwd,
                session_id=session_id,
                additional_directories=directories,
                title=data.draw(st.one_of(st.none(), titles)),
                title_source=data.draw(sources),
                meta=data.draw(metas),
                at=data.draw(st.one_of(st.none(), times)),
            )
        )
        if info is not None:
            self.sessions.append(info.session_id)

    @rule(data=st.data(), messages=st.one_of(st.integers(min_value=0, max_value=10), anything))
    def record_activity(self, data: st.DataObject, messages: Any) -> None:
        payload = data.draw(st.one_of(st.none(), json_values, st.just(b"x" * (5 * 1024 * 1024)), anything))
        at = data.draw(st.one_of(st.none(), times))
        self._call(
            lambda: self.registry.record_activity(self._session(data), messages=messages, payload=payload, at=at)
        )

    @rule(data=st.data())
    def change_info(self, data: st.DataObject) -> None:
        options = {
            "title": data.draw(st.one_of(st.just(UNSET), st.none(), titles)),
            "title_source": data.draw(sources),
            "updated_at": data.draw(st.one_of(st.just(UNSET), st.none(), times)),
            "meta": data.draw(st.one_of(st.just(UNSET), metas)),
        }
        self._call(lambda: self.registry.change_info(self._session(data), **options))

    @rule(data=st.data(), reason=st.one_of(st.none(), texts, anything))
    def delete(self, data: st.DataObject, reason: Any) -> None:
        self._call(lambda: self.registry.delete(self._session(data), reason=reason))

    @rule(data=st.data())
    def read_one(self, data: st.DataObject) -> None:
        session_id = self._session(data)
        self._call(lambda: self.registry.get(session_id))
        self._call(lambda: self.registry.state(session_id))

    @rule(data=st.data(), cwd=st.one_of(st.none(), paths))
    def list(self, data: st.DataObject, cwd: Any) -> None:
        known = st.sampled_from(self.cursors) if self.cursors else st.nothing()
        cursor = data.draw(st.one_of(st.none(), known, texts, anything))
        page = self._call(lambda: self.registry.list(cwd=cwd, cursor=cursor))
        if page is not None and isinstance(page.next_cursor, str):
            self.cursors.append(page.next_cursor)

    @rule(
        method=st.one_of(st.sampled_from(["session/list", "session/delete", "session/new"]), anything),
        params=st.one_of(
            st.none(), st.dictionaries(st.sampled_from(["cwd", "cursor", "sessionId"]), anything), anything
        ),
    )
    def handle(self, method: Any, params: Any) -> None:
        self._call(lambda: self.registry.handle(method, params))

    @rule(after=st.one_of(st.none(), st.integers(min_value=-1, max_value=10**6), anything))
    def follow_changes(self, after: Any) -> None:
        def subscribe() -> None:
            scheduler = TestScheduler()
            self.registry.list_changes(after=after, scheduler=scheduler).subscribe(lambda _: None).dispose()

        self._call(subscribe)

    @precondition(lambda self: bool(self.sessions))
    @rule()
    def sync(self) -> None:
        assert self.registry.sync() == self.store.head()

    @invariant()
    def answers_reflect_the_log(self) -> None:
        assert self.registry.position == self.store.head()

    def teardown(self) -> None:
        try:
            fresh = SessionRegistry(self.store, follow=False, page_size=3)
            assert _walk(fresh) == _walk(self.registry)
            for session_id in self.sessions:
                assert fresh.state(session_id) == self.registry.state(session_id)
            fresh.close()
        finally:
            self.registry.close()
            self.store.close()
            shutil.rmtree(self.folder, ignore_errors=True)


def _walk(registry: SessionRegistry) -> list[Any]:
    pages, cursor = [], None
    while True:
        page = registry.list(cursor=cursor)
        pages += page.sessions
        if not isinstance(page.next_cursor, str):
            return pages
        cursor = page.next_cursor


RegistryCalls.TestCase.settings = fuzz_settings(60)
test_any_call_works_or_says_why = RegistryCalls.TestCase
