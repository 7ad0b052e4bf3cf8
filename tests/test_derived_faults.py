"""Derived state is checked, never trusted: a read model broken in any of the ways found so far never serves a
wrong page, never turns a committed write into a failure, and is mended from the log (issue 24).

Each damage is applied from outside (a second connection, as a hand edit or a damaged disk would) to a real
SQLite file - and to a PostgreSQL schema where a server runs - while a registry is open on it, and again before one
opens. Every command must then answer exactly once what the fold of the log says, and the log must hold each
command's events exactly once (a client never sees a committed write fail, so never retries it).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from events.store import EventStore
from registry import SessionRegistry
from registry.readmodel.tables import CURRENT_COLUMNS
from registry.testing import reference_fold
from tests.test_read_model import list_read_only

DAMAGE = {
    "rm_past dropped": "DROP TABLE IF EXISTS rm_past",
    "rm_sessions dropped": "DROP TABLE IF EXISTS rm_sessions",
    "rm_meta dropped": "DROP TABLE IF EXISTS rm_meta",
    "cwd index dropped": "DROP INDEX IF EXISTS rm_sessions_cwd",
    "order index dropped": "DROP INDEX IF EXISTS rm_sessions_order",
    "checkpoint row missing": "DELETE FROM rm_meta WHERE key = 'checkpoint'",
    "floor row missing": "DELETE FROM rm_meta WHERE key = 'floor'",
    "garbage state blob": "UPDATE rm_sessions SET state = x'c1ff00'",
    "truncated state blob": "UPDATE rm_sessions SET state = substr(state, 1, 3)",
    "past rows garbage": "UPDATE rm_past SET state = x'00'",
    # Rows edited apart from their state, or a state edited inside its blob: found when read (the seal, the key
    # columns, the filters each row must match), never served. (A row deleted, or its live flag cleared, is not
    # visible to a page, nor a row moved out of a filter or past a cursor: verify finds it, rebuild mends it.)
    "title edited in a blob": "UPDATE rm_sessions SET state = replace(state, CAST('t5' AS BLOB), CAST('zz' AS BLOB))",
    "cwd column changed": "UPDATE rm_sessions SET cwd = '/work/1' WHERE session_id = 's0'",
    "deleted row made live": "UPDATE rm_sessions SET live = NOT live WHERE session_id = 's3'",
    "state of another": "UPDATE rm_sessions SET state = (SELECT state FROM rm_sessions WHERE session_id = 's0')"
    " WHERE session_id = 's5'",
}


def tamper(url: str, statement: str) -> None:
    """Run ``statement`` on the store's tables behind the registry's back."""
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://").split("?")[0]
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            db.execute(statement)
        return
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    from events.urls import split_postgres_url  # noqa: PLC0415

    conninfo, schema = split_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        statement = statement.replace("x'c1ff00'", "'\\xc1ff00'::bytea").replace("x'00'", "'\\x00'::bytea")
        statement = statement.replace(
            "replace(state, CAST('t5' AS BLOB), CAST('zz' AS BLOB))",
            "decode(replace(encode(state, 'hex'), encode('t5', 'hex'), encode('zz', 'hex')), 'hex')",
        )
        conn.execute(statement)


def listed(registry: SessionRegistry, cwd: str | None = None) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = registry.list(cwd, cursor)
        ids.extend(s.session_id for s in page.sessions)
        if not isinstance(page.next_cursor, str):
            return ids
        cursor = page.next_cursor


def expected(store: EventStore, cwd: str | None = None) -> list[str]:
    return [s.session_id for s in reference_fold(store).sessions() if cwd is None or s.cwd == cwd]


def _fill(registry: SessionRegistry) -> None:
    for n in range(6):
        registry.create(f"/work/{n % 2}", session_id=f"s{n}", title=f"t{n}")
    registry.record_activity("s1", messages=2)
    registry.change_info("s2", title="renamed")
    registry.delete("s3")


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_commands_succeed_once_and_answer_the_fold_while_the_tables_are_broken(
    store_urls: Callable[[], str], damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = store_urls()
    with SessionRegistry.open(url, follow=False, page_size=2) as registry:
        _fill(registry)
        assert listed(registry) == expected(registry.store)  # rows served once: their blobs known as checked
        tamper(url, DAMAGE[damage])
        head = registry.store.head()
        made = registry.create("/work/0", session_id="new", title="new")  # answers success, once
        assert made.session_id == "new" and registry.store.head() == head + 1
        registry.record_activity("s0", messages=1)
        registry.delete("s4")
        assert registry.store.head() == head + 3
        assert len(registry.store.read_stream("new")) == 1  # created once, never twice
        assert listed(registry) == expected(registry.store)
        assert listed(registry, "/work/1") == expected(registry.store, "/work/1")
        assert registry.get("new").title == "new"
        assert len(registry) == len(reference_fold(registry.store))
    tamper(url, DAMAGE[damage])  # broken before a registry opens
    with SessionRegistry.open(url, follow=False, page_size=2) as registry:
        assert listed(registry, "/work/1") == expected(registry.store, "/work/1")
        assert listed(registry, "/work/0") == expected(registry.store, "/work/0")
        registry.create("/work/1", session_id="after")
        assert listed(registry) == expected(registry.store)
        assert registry.read_model.tables is None or registry.read_model.tables.schema_problems() == []
    assert "Traceback" not in caplog.text


def test_tables_that_cannot_be_rebuilt_are_replaced_by_the_fold_in_memory(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite://{folder}/log.db"
    with SessionRegistry.open(url, follow=False) as registry:
        _fill(registry)
        want = expected(registry.store)
    tamper(url, "UPDATE rm_sessions SET state = x'c1ff00'")
    done = list_read_only(folder, url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"kind": "memory", "ids": want}
    assert "Traceback" not in done.stderr and "folded in memory" in done.stderr


EDITS = {
    "archived set": ("UPDATE rm_sessions SET archived = NOT archived WHERE session_id = 's1'", "rm_sessions.archived"),
    "agent set": ("UPDATE rm_sessions SET agent = 'x' WHERE session_id = 's1'", "rm_sessions.agent"),
    "cwd changed": ("UPDATE rm_sessions SET cwd = '/elsewhere' WHERE session_id = 's1'", "rm_sessions.cwd"),
    "rank changed": ("UPDATE rm_sessions SET rank = rank + 1 WHERE session_id = 's1'", "rm_sessions.rank"),
    "live cleared": ("UPDATE rm_sessions SET live = NOT live WHERE session_id = 's1'", "rm_sessions.live"),
    "valid_from changed": ("UPDATE rm_sessions SET valid_from = 1 WHERE session_id = 's1'", "rm_sessions.valid_from"),
    "row deleted": ("DELETE FROM rm_sessions WHERE session_id = 's1'", "rm_sessions lacks"),
    "fake row": (  # a copy of a row (whatever its columns) under another id
        f"INSERT INTO rm_sessions ({', '.join(CURRENT_COLUMNS)}) SELECT 'fake', {', '.join(CURRENT_COLUMNS[1:])}"
        " FROM rm_sessions WHERE session_id = 's0'",
        "rm_sessions holds a row",
    ),
    "state of another": (
        "UPDATE rm_sessions SET state = (SELECT state FROM rm_sessions WHERE session_id = 's0')"
        " WHERE session_id = 's1'",
        "rm_sessions.state differs",
    ),
    "garbage blob": ("UPDATE rm_sessions SET state = x'c1ff00' WHERE session_id = 's1'", "rm_sessions.state cannot be"),
    "past row edited": ("UPDATE rm_past SET cwd = '/elsewhere'", "rm_past.cwd"),
    "past range edited": ("UPDATE rm_past SET valid_to = valid_to + 1", "rm_past"),
    "past rows deleted": ("DELETE FROM rm_past", "rm_past lacks"),
    "live count": ("UPDATE rm_meta SET value = value + 1 WHERE key = 'live'", "rm_meta.live"),
    "archived count": ("UPDATE rm_meta SET value = value + 1 WHERE key = 'archived'", "rm_meta.archived"),
    "floor past the checkpoint": ("UPDATE rm_meta SET value = 1000 WHERE key = 'floor'", "rm_meta.floor"),
    "checkpoint missing": ("DELETE FROM rm_meta WHERE key = 'checkpoint'", "rm_meta has no checkpoint row"),
    "cwd index dropped": ("DROP INDEX rm_sessions_cwd", "index rm_sessions_cwd is missing"),
    "order index dropped": ("DROP INDEX rm_sessions_order", "index rm_sessions_order is missing"),
    "rm_past dropped": ("DROP TABLE rm_past", "table rm_past is missing"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_verify_names_every_edit_of_the_derived_tables_and_rebuild_mends_it(
    store_urls: Callable[[], str], edit: str
) -> None:
    from registry.backends import backend_for  # noqa: PLC0415
    from registry.readmodel.check import check_read_model  # noqa: PLC0415
    from registry.readmodel.guard import open_read_model  # noqa: PLC0415

    url = store_urls()
    with SessionRegistry.open(url, follow=False, window=1_000) as registry:
        registry.create("/work/0", session_id="early")
        registry.close()
    with SessionRegistry.open(url, follow=False, window=1_000) as registry:  # versions replaced after the build
        _fill(registry)
        registry.record_activity("s1", messages=1)
    statement, named = EDITS[edit]
    tamper(url, statement)
    from events.factory import open_store  # noqa: PLC0415

    with open_store(url, create=False) as store:
        backend = backend_for(store)
        model = open_read_model(backend, catch_up=False, window=1_000)
        try:
            found = check_read_model(backend, model).mismatches
        finally:
            model.close()
        assert any(named in m.problem for m in found), found
        model = open_read_model(backend, catch_up=False, window=1_000)
        try:
            model.rebuild()
            assert check_read_model(backend, model).mismatches == []
        finally:
            model.close()


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``acp-registry ARGS`` in a process of its own; the test reads its exit code (``check=False``)."""
    return subprocess.run(
        [sys.executable, "-m", "registry.cli", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_a_log_cut_short_is_recorded_before_the_read_model_forgets_it(tmp_path: Path) -> None:
    """Records cut from the log's end: the first read that finds it states it and records it in the store before
    rebuilding; verify and stats report it until acknowledged (issue 24, "evidence kept")."""
    path = tmp_path / "log.db"
    url = f"sqlite://{path}"
    with SessionRegistry.open(url, follow=False) as registry:
        for n in range(5):  # a second apart: the list's newest-first order is not a tie broken by id
            registry.create("/w", session_id=f"s{n}", at=(n + 1) * 1_000_000_000)
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM events WHERE position > 3")
        db.execute("UPDATE streams SET version = 0 WHERE session_id IN ('s3', 's4')")
    listed = cli("--store", url, "list", "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert "integrity: " in listed.stderr and "position 5" in listed.stderr and "recorded in the store" in listed.stderr
    assert [s["sessionId"] for s in json.loads(listed.stdout)["sessions"]] == ["s2", "s1", "s0"]
    for _ in range(2):  # every later verify says so, though the read model was rebuilt meanwhile
        verified = cli("--store", url, "verify", "--json")
        assert verified.returncode == 1
        (problem,) = json.loads(verified.stdout)["problems"]
        assert problem["position"] == 5 and "integrity" in problem["problem"]
    stats = cli("--store", url, "stats", "--json")
    (event,) = json.loads(stats.stdout)["integrityEvents"]
    assert (event["seenBy"], event["position"], event["head"]) == ("read model", 5, 3)
    acknowledged = cli("--store", url, "verify", "--acknowledge")
    assert acknowledged.returncode == 0 and "acknowledged 1 integrity event" in acknowledged.stderr
    assert cli("--store", url, "verify").returncode == 0
    assert json.loads(cli("--store", url, "stats", "--json").stdout)["integrityEvents"] == []


def test_a_registry_that_is_serving_records_a_cut_log_before_rebuilding(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}", follow=False) as registry:
        for n in range(5):  # a second apart: the list's newest-first order is not a tie broken by id
            registry.create("/w", session_id=f"s{n}", at=(n + 1) * 1_000_000_000)
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("DELETE FROM events WHERE position > 3")
            db.execute("UPDATE streams SET version = 0 WHERE session_id IN ('s3', 's4')")
        assert [s.session_id for s in registry.list().sessions] == ["s2", "s1", "s0"]
        (event,) = registry.backend.integrity_events()
        assert (event.seen_by, event.position, event.head, event.acknowledged) == ("read model", 5, 3, False)


@pytest.mark.parametrize("damage", ["DROP TABLE rm_meta", "DELETE FROM rm_meta WHERE key = 'checkpoint'", None])
def test_rebuild_works_from_any_state_of_the_tables_and_says_what_it_replaced(
    tmp_path: Path, damage: str | None
) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    with SessionRegistry.open(url, follow=False) as registry:
        _fill(registry)
    if damage is not None:
        tamper(url, damage)
    done = cli("--store", url, "rebuild")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = " ".join(done.stdout.split())
    assert "it replaced tables at" in said
    if damage is not None:
        assert "schema was not this version's" in said
    assert cli("--store", url, "verify").returncode == 0


def test_a_position_edited_in_a_blob_is_found_before_anything_is_decided_from_it(
    store_urls: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    # A state's position is outside its seal (the server writes it): where a state is read to decide what to
    # append - here the position a fork is taken at - it must be its row's valid_from, else the tables are rebuilt.
    url = store_urls()
    with SessionRegistry.open(url, follow=False) as writer:
        writer.create("/w", session_id="s")
        writer.record_activity("s", messages=1)
    at = "length(state) - 7"
    tamper(
        url,
        f"UPDATE rm_sessions SET state = CAST(substr(state, 1, {at} - 1) || x'0000000000000001' AS BLOB)"
        " WHERE session_id = 's'"
        if url.startswith("sqlite://")
        else f"UPDATE rm_sessions SET state = overlay(state placing '\\x0000000000000001'::bytea from {at})"
        " WHERE session_id = 's'",
    )
    with SessionRegistry.open(url, follow=False) as registry:
        fork = registry.fork("s", "/w")
        parent = registry.state(fork.session_id).parent  # type: ignore[union-attr]
        assert parent is not None and parent.position == 2  # the source's last event, not the edited 1
    assert "does not match its state" in caplog.text
