"""The read model in the store: the tables equal the reference fold and the replay of the log, whoever wrote
the log and however it was cut into catch-ups; they survive restarts, upgrades, killed writers and other
processes; and a process answers its first page without folding the history.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import SessionCreated, SessionUpdated, SqliteStore, StoreFormatError, open_store
from events.model import Event, LogEntry
from events.store import EventStore
from registry import SessionRegistry
from registry.backends import backend_for
from registry.filters import ListFilter
from registry.model import SessionState
from registry.projection import Projection
from registry.readmodel import PAST_WINDOW, ReadModel
from registry.readmodel.check import check_read_model
from registry.readmodel.guard import open_read_model
from registry.readmodel.usage_tables import GROUPS, UsageQuery
from tests.test_projection_properties import history

FEW = settings(
    max_examples=40,
    deadline=None,
    # store_urls makes a new store per call: nothing carries over between examples.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _replay(store: EventStore, position: int) -> Projection:
    """The independent oracle: a fresh fold of the log up to ``position``."""
    projection = Projection(window=0)
    projection.load(r for r in store.read() if r.position <= position)
    return projection


def _walk(model: ReadModel, as_of: int, where: ListFilter, limit: int) -> tuple[list[str], bool]:
    pages = list(model.pages(as_of=as_of, where=where, limit=limit))
    return [s.session_id for page in pages for s in page.states], all(page.consistent for page in pages)


def _live(projection: Projection, where: ListFilter) -> list[str]:
    return [s.session_id for s in projection.sessions() if where.matches(s)]


_FILTERS = [
    ListFilter(),
    ListFilter(cwd="/a"),
    ListFilter(archived="include"),
    ListFilter(cwd="/a", archived="only"),
    ListFilter(archived="only"),
    ListFilter(agent="codex"),
    ListFilter(cwd="/a", archived="include", agent="codex"),
    ListFilter(archived="only", agent="claude-code"),
]


@FEW
@given(
    ops=history,
    cuts=st.lists(st.integers(1, 8), min_size=1, max_size=12),
    window=st.sampled_from([0, 3, 40, 100_000]),
    limit=st.integers(1, 4),
)
def test_the_tables_equal_the_reference_fold_and_the_replay(
    store_urls: Callable[[], str],
    ops: list[tuple[str, list[Event]]],
    cuts: list[int],
    window: int,
    limit: int,
) -> None:
    with open_store(store_urls()) as store:
        tables = open_read_model(backend_for(store), window=window, kind="tables")
        reference = open_read_model(backend_for(store), window=window, kind="memory")
        checkpoints = [tables.position]
        pending = iter(ops)
        for cut in cuts * 8:  # catch up after every few appends: checkpoints land in many places
            batch = [op for _, op in zip(range(cut), pending, strict=False)]
            if not batch:
                break
            for session_id, events in batch:
                store.append(session_id, events)
            checkpoints.append(tables.catch_up())
        for session_id, events in pending:
            store.append(session_id, events)
        head = tables.catch_up()
        reference.catch_up()
        checkpoints.append(head)
        assert head == store.head()

        everything = {s.session_id: s for s in reference.states()}
        assert {s.session_id: s for s in tables.states()} == everything
        assert tables.count() == reference.count() and tables.cwd_counts() == reference.cwd_counts()
        for cwd in (None, "/a", "/nowhere"):
            assert tables.archived_count(cwd) == reference.archived_count(cwd)
        assert check_read_model(backend_for(store), tables).mismatches == []
        for by in GROUPS:  # the daily usage totals, as the in-memory fold of the log has them
            assert tables.usage(UsageQuery(by)) == reference.usage(UsageQuery(by)), by

        floor = tables.window_floor()
        for position in sorted(set(checkpoints)):
            then = _replay(store, position)
            for where in _FILTERS:
                walked, consistent = _walk(tables, position, where, limit)
                assert consistent == (position >= floor)
                if consistent:
                    assert walked == _live(then, where), where  # exactly the list as of the walk's start
                else:  # the current order, without the sessions changed since (an ignored event changes nothing)
                    now = _replay(store, head)
                    kept = [s for s in _live(now, where) if now.get(s) == then.get(s)]
                    assert walked == kept, where
        for position in range(floor, head + 1):  # any position of the window, not only checkpoints
            then = _replay(store, position)
            for session_id in {*everything, "never"}:
                expected: SessionState | None = then.get(session_id)
                assert tables.state_at(session_id, position) == expected, (session_id, position)
        for position in range(floor):  # before the window: exact where the current row is that old, else unknown
            then = _replay(store, position)
            for session_id in everything:
                found = tables.state_at(session_id, position)
                assert found is PAST_WINDOW or found == then.get(session_id), (session_id, position)
        tables.close()
        reference.close()


def test_a_process_answers_its_first_page_without_folding_the_log(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    with SessionRegistry.open(url) as registry:
        for n in range(200):
            registry.create(f"/work/p{n % 3}", session_id=f"s{n:03d}", at=1_000_000 * (n + 1))
        first = registry.list()

    class Watched(SqliteStore):
        scanned = 0

        def scan(self, after: int = 0, *, until: int | None = None, batch: int = 10_000) -> Iterator[LogEntry]:
            Watched.scanned += 1
            return super().scan(after, until=until, batch=batch)

    with SessionRegistry(Watched(tmp_path / "log.db"), owns_store=True) as again:
        assert again.read_model.kind == "tables"
        assert again.list() == first
        assert again.get("s007").cwd == "/work/p1"
        assert Watched.scanned == 0, "opening and listing read the log"
        with SqliteStore(tmp_path / "log.db") as elsewhere:  # a write that bypassed the registry (another process)
            elsewhere.append("s999", [SessionCreated(cwd="/work/raw", at=5)])
        assert "s999" in {s.session_id for s in again.list(cwd="/work/raw").sessions}
        assert Watched.scanned == 1  # only the tail after the checkpoint was read
        again.create("/work/own", session_id="s1000")  # through the registry: folded in the append's transaction
        assert again.get("s1000").cwd == "/work/own" and Watched.scanned == 1


def test_a_store_written_before_the_read_model_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteStore(path) as store:  # what a version without read-model tables left behind
        for n in range(30):
            store.append(f"s{n}", [SessionCreated(cwd="/w", at=n * 1_000_000), SessionUpdated(at=n * 2_000_000)])
    with sqlite3.connect(path) as db:
        assert not db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'rm%'").fetchall()
    with SessionRegistry.open(f"sqlite://{path}", page_size=1000) as registry:
        assert len(registry) == 30
        assert [s.session_id for s in registry.list().sessions] == [f"s{n}" for n in reversed(range(30))]
        assert check_read_model(backend_for(registry.store), registry.read_model).mismatches == []


def test_an_older_read_model_is_rebuilt_and_a_newer_one_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    url = f"sqlite://{path}"
    with SessionRegistry.open(url) as registry:
        registry.create("/w", session_id="a")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE rm_meta SET value = 0 WHERE key = 'version'")
        db.execute("DELETE FROM rm_sessions")  # whatever an older version kept is thrown away and refolded
    with SessionRegistry.open(url) as registry:
        assert [s.session_id for s in registry.list().sessions] == ["a"]
    with sqlite3.connect(path) as db:
        db.execute("UPDATE rm_meta SET value = 99 WHERE key = 'version'")
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith("-shm")}
    with pytest.raises(StoreFormatError, match="read model has version 99"):
        SessionRegistry.open(url)
    # The database and its WAL are as they were (the -shm index is SQLite's scratch memory for readers).
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith("-shm")} == files


def test_postgres_tables_upgrade_and_refuse_like_sqlite(postgres_schemas: Callable[[], str]) -> None:
    url = postgres_schemas()
    with open_store(url) as store:
        store.append("old", [SessionCreated(cwd="/w", at=1)])  # before any read model existed
    with SessionRegistry.open(url) as registry:
        assert [s.session_id for s in registry.list().sessions] == ["old"]
        assert registry.read_model.kind == "tables"
        schema = registry.store.schema  # type: ignore[attr-defined]
        registry.store.run(  # type: ignore[attr-defined]
            lambda conn: conn.execute(f"UPDATE \"{schema}\".rm_meta SET value = 99 WHERE key = 'version'")
        )
    with pytest.raises(StoreFormatError, match="read model has version 99"):
        SessionRegistry.open(url)


_CHILD = """
import os, signal, sys
from events import SessionCreated, SessionUpdated, open_store
from registry import SessionRegistry
url, mode = sys.argv[1], sys.argv[2]
if mode == "append-then-die":  # the log has the event, the read model never folded it
    with open_store(url) as store:
        store.append("orphan", [SessionCreated(cwd="/w", at=7)])
        os.kill(os.getpid(), signal.SIGKILL)
with SessionRegistry.open(url, follow=False) as registry:
    n = 0
    while True:
        registry.create(f"/w/{n % 4}", session_id=f"k{os.getpid()}-{n}", title=f"t{n}")
        registry.record_activity(f"k{os.getpid()}-{n}", messages=1)
        if n % 3 == 0:
            registry.delete(f"k{os.getpid()}-{n}")
        print(n, flush=True)
        n += 1
"""


@pytest.mark.slow
def test_writers_killed_at_any_point_never_leave_tables_that_disagree_with_the_log(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    subprocess.run([sys.executable, "-c", _CHILD, url, "append-then-die"], timeout=60, check=False)
    for kill in range(8):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, url, "loop"], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        for _ in range(3 + kill * 2):  # let it get going, then kill it wherever it is
            child.stdout.readline()
        time.sleep(0.001 * kill)  # not a wait: each kill lands a little later in the writer's work than the last
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        with open_store(url) as store:  # look before anything catches up: behind is fine, wrong is not
            tables = open_read_model(backend_for(store), kind="tables", catch_up=False)
            assert check_read_model(backend_for(store), tables).mismatches == []
            tables.close()
    with SessionRegistry.open(url, page_size=1000) as registry:
        assert registry.position == registry.store.head()
        assert "orphan" in {s.session_id for s in registry.list().sessions}
        assert check_read_model(backend_for(registry.store), registry.read_model).mismatches == []


_WRITER = """
import sys
from registry import SessionRegistry
with SessionRegistry.open(sys.argv[1], follow=False) as registry:
    for n in range(int(sys.argv[3])):
        registry.create("/w", session_id=f"{sys.argv[2]}-{n}", at=10_000_000_000 + n)
"""


def test_a_walk_started_in_one_process_goes_on_exactly_in_another(store_urls: Callable[[], str]) -> None:
    url = store_urls()
    with SessionRegistry.open(url, page_size=5, follow=False) as registry:
        for n in range(23):
            registry.create("/w", session_id=f"s{n:02d}", at=1_000_000_000 * (n + 1))
        first = registry.list()
        expected = [s.session_id for s in first.sessions]
    # Meanwhile other processes add sessions that sort first and change or delete some of the walk's.
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, url, f"w{n}", "20"]) for n in range(2)]
    for writer in writers:
        assert writer.wait(60) == 0
    with SessionRegistry.open(url, page_size=5, follow=False) as other:
        other.change_info("s03", title="renamed later")
        other.delete("s10")
        page = first
        while isinstance(page.next_cursor, str):
            page = other.list(cursor=page.next_cursor)
            expected.extend(s.session_id for s in page.sessions)
        assert expected == [f"s{n:02d}" for n in reversed(range(23))]
        assert len(other) == 23 + 40 - 1


def test_a_warm_reader_lists_what_another_wrote_and_walks_on_as_of_its_start(tmp_path: Path) -> None:
    """Pages answered in one statement while the tables are where this process saw them: a write by another
    registry is on the next first page, and a walk begun before it goes on as of its start."""
    url = f"sqlite://{tmp_path}/log.db"
    with SessionRegistry.open(url, page_size=3, follow=False) as reader, SessionRegistry.open(url) as writer:
        for n in range(8):
            writer.create("/w", session_id=f"s{n}", at=1_000_000_000 * (n + 1))
        first = reader.list()
        assert reader.list() == first and [s.session_id for s in first.sessions] == ["s7", "s6", "s5"]
        writer.create("/w", session_id="s8", at=9_000_000_000)
        writer.delete("s2")
        walked, page = [s.session_id for s in first.sessions], first
        while isinstance(page.next_cursor, str):  # its next page finds the tables moved on: read as of its start
            page = reader.list(cursor=page.next_cursor)
            walked += [s.session_id for s in page.sessions]
        assert walked == [f"s{n}" for n in reversed(range(8))]
        assert [s.session_id for s in reader.list().sessions] == ["s8", "s7", "s6"]


def test_concurrent_writers_in_threads_and_processes_leave_exact_tables(store_urls: Callable[[], str]) -> None:
    import threading  # noqa: PLC0415

    url = store_urls()
    with SessionRegistry.open(url, follow=False) as registry:
        children = [subprocess.Popen([sys.executable, "-c", _WRITER, url, f"p{n}", "30"]) for n in range(2)]

        def write(name: str) -> None:
            for n in range(30):
                info = registry.create("/w", session_id=f"{name}-{n}")
                registry.record_activity(info.session_id, messages=1)

        threads = [threading.Thread(target=write, args=(f"t{n}",)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for child in children:
            assert child.wait(60) == 0
        registry.sync()
        assert len(registry) == 5 * 30
        assert check_read_model(backend_for(registry.store), registry.read_model).mismatches == []


def test_long_session_ids_page_and_walk(store_urls: Callable[[], str]) -> None:
    long_ids = [("x" * 1000) + f"{n:04d}" + "é" * 10 for n in range(7)]  # 1,024 bytes, the documented maximum
    with SessionRegistry.open(store_urls(), page_size=2) as registry:
        for session_id in long_ids:
            registry.create("/w", session_id=session_id, at=5_000_000)  # one millisecond: ids decide the order
        seen: list[str] = []
        page = registry.list()
        while True:
            seen.extend(s.session_id for s in page.sessions)
            if not isinstance(page.next_cursor, str):
                break
            page = registry.list(cursor=page.next_cursor)
        assert seen == sorted(long_ids)
        with pytest.raises(ValueError, match="at most 1024"):
            registry.create("/w", session_id="y" * 1025)


def _first_ids(registry: SessionRegistry) -> list[Any]:
    return [s.session_id for s in registry.list().sessions]


def test_the_order_is_the_order_of_what_the_wire_shows(store_urls: Callable[[], str]) -> None:
    """Two sessions updated within one millisecond show the same updatedAt: sessionId ascending decides."""
    with SessionRegistry.open(store_urls()) as registry:
        registry.create("/w", session_id="b", at=1_764_000_000_000_000_001)
        registry.create("/w", session_id="a", at=1_764_000_000_000_999_000)  # later, but in the same millisecond
        registry.create("/w", session_id="c", at=1_764_000_000_001_000_000)  # the next millisecond
        page = registry.list()
        assert [s.session_id for s in page.sessions] == ["c", "a", "b"]
        shown = [(s.updated_at, s.session_id) for s in page.sessions]
        assert shown == sorted(shown, key=lambda pair: (-_ms(str(pair[0])), pair[1]))


def _ms(stamp: str) -> int:
    from registry.model import parse_time  # noqa: PLC0415

    return parse_time(stamp) // 1_000_000


def test_a_read_only_fold_when_tables_cannot_be_written(tmp_path: Path) -> None:
    """Without tables (e.g. ``kind="memory"``) the same answers come from the in-memory fold."""
    url = f"sqlite://{tmp_path}/log.db"
    with SessionRegistry.open(url) as registry:
        for n in range(12):
            registry.create("/w", session_id=f"s{n}", at=n * 1_000_000)
        expected = registry.list()
    with SessionRegistry.open(url, read_model="memory") as folded:
        assert folded.read_model.kind == "memory" and folded.list() == expected
    assert os.path.exists(tmp_path / "log.db")


def test_a_commit_hook_that_fails_never_costs_the_append(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        committed_calls = 0

        def in_transaction(self, db: sqlite3.Connection, scan: Callable[[int], Iterator[LogEntry]]) -> None:
            db.execute("CREATE TABLE half_done (x)")  # work the savepoint must undo
            raise RuntimeError("a derived table's bug")

        def committed(self) -> None:
            Broken.committed_calls += 1

    with SqliteStore(tmp_path / "log.db") as store:
        store.add_commit_hook(Broken())
        with caplog.at_level("WARNING"):
            positions = store.append("s", [SessionCreated(cwd="/w", at=1)])
        assert store.read()[0].position == positions[0]  # the append committed
        assert "commit hook failed" in caplog.text and Broken.committed_calls == 0
    with sqlite3.connect(tmp_path / "log.db") as db:
        assert not db.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchall()
    with SessionRegistry.open(f"sqlite://{tmp_path}/log.db") as registry:  # the tables catch up on their own
        assert [s.session_id for s in registry.list().sessions] == ["s"]


_READ_ONLY_LISTER = """
import json, sys
from registry import SessionRegistry
with SessionRegistry.open(sys.argv[1], create=False, follow=False) as registry:
    ids = [s.session_id for s in registry.list().sessions]  # first: the list may find the tables broken
    print(json.dumps({"kind": registry.read_model.kind, "ids": ids}))
"""


def list_read_only(folder: Path, url: str) -> subprocess.CompletedProcess[str]:
    """The first page of the list, read by another process as a user who cannot write ``folder`` (the store's,
    made read-only for the run): it prints its read model's kind and the ids as JSON."""
    from tests.test_sqlite_store import _without_root_overrides  # noqa: PLC0415 - a user who cannot write

    for item in (*folder.iterdir(), folder):
        item.chmod(0o555 if item.is_dir() else 0o444)
    try:
        return subprocess.run(
            [sys.executable, "-c", _READ_ONLY_LISTER, url],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_without_root_overrides,
            check=False,
        )
    finally:
        for item in (folder, *folder.iterdir()):
            item.chmod(0o700 if item.is_dir() else 0o600)


def test_a_read_only_store_is_listed_from_its_tables_or_folded_in_memory_when_they_lag(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        for n in range(3):
            registry.create("/w", session_id=f"s{n}", at=(n + 1) * 1_000_000)

    def listed() -> tuple[dict[str, Any], str]:
        done = list_read_only(folder, f"sqlite://{path}")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout), done.stderr

    result, _ = listed()
    assert result == {"kind": "tables", "ids": ["s2", "s1", "s0"]}
    with SqliteStore(path) as store:  # a write that the tables have not seen (made without the registry)
        store.append("s3", [SessionCreated(cwd="/w", at=9_000_000)])
    result, err = listed()
    assert result == {"kind": "memory", "ids": ["s3", "s2", "s1", "s0"]}
    assert "read-only and its read model is missing or behind its log" in err


def test_verify_notices_records_cut_from_the_end_of_the_log(tmp_path: Path) -> None:
    """A removed tail leaves a valid, shorter hash chain; what is derived from the log still remembers it."""
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        for n in range(5):
            registry.create("/w", session_id=f"s{n}")
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM events WHERE position > 3")
        db.execute("UPDATE streams SET version = 0 WHERE session_id IN ('s3', 's4')")
    with SqliteStore(path) as store:
        tables = open_read_model(backend_for(store), kind="tables", catch_up=False)
        problems = check_read_model(backend_for(store), tables).mismatches
        tables.close()
    assert problems and "records at the log's end were removed" in problems[0].problem


def test_tables_that_do_not_match_the_log_are_rebuilt_from_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A checkpoint beyond the head, or whose chain link is not the log's (a cut or replaced log), never answers:
    the tables are refolded from the log at open."""
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        for n in range(5):
            registry.create("/w", session_id=f"s{n}", at=(n + 1) * 1_000_000)
    with sqlite3.connect(path) as db:  # the last two records cut away, as a hand or a bad restore might
        db.execute("DELETE FROM events WHERE position > 3")
        db.execute("DELETE FROM streams WHERE session_id IN ('s3', 's4')")
    with caplog.at_level("WARNING"), SessionRegistry.open(f"sqlite://{path}") as registry:
        assert [s.session_id for s in registry.list().sessions] == ["s2", "s1", "s0"]
        assert check_read_model(backend_for(registry.store), registry.read_model).mismatches == []
    assert "does not match the log" in caplog.text
