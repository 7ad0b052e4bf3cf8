"""Fault injection: random damage to everything derived from the log, and files of every type where the registry
reads (issue 24).

Each example builds a real SQLite store (and a PostgreSQL schema, where a server runs) from a random history,
keeps real snapshots beside it, then damages it at random: the read model's rows, columns, blobs, indexes, tables
and checkpoint, and the paths the registry reads (kept snapshots, their folder, the import state) replaced by a
FIFO, a directory, a symbolic link or a device. Then every command runs, each case under a time limit:

* reads (``session/list`` walked page by page, per cwd too; ``get``; time travel) answer exactly what the fold of
  the log says, or fail with one ``RegistryError`` line - never a traceback, never a hang;
* writes (create, activity, delete) succeed exactly once, and the log then holds every event acknowledged before
  the damage and each new one once;
* damage a page cannot see (a row deleted or moved out of its place) is found by ``verify`` and mended by
  ``rebuild``, after which reads answer the fold.

``make test`` runs a small budget; ``python -m benchmarks.fuzz_sweep -k derived`` runs many more under many seeds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.errors import RegistryError
from events.factory import open_store
from registry import SessionRegistry
from registry.backends import backend_for
from registry.readmodel.check import check_read_model
from registry.readmodel.guard import open_read_model
from registry.testing import reference_fold
from registry.timetravel import projection_at
from tests.fuzzing import fuzz_settings
from tests.test_derived_faults import listed

CASE_SECONDS = 60.0
"""A case that takes longer hangs (the time is generous: the machine may be loaded)."""

# Damage a read must find (and mend) by itself: ``(name, SQL)``; {sid} is a session id of the history.
SEEN_WHEN_READ = [
    ("drop rm_past", "DROP TABLE IF EXISTS rm_past"),
    ("drop rm_sessions", "DROP TABLE IF EXISTS rm_sessions"),
    ("drop rm_meta", "DROP TABLE IF EXISTS rm_meta"),
    ("drop the order index", "DROP INDEX IF EXISTS rm_sessions_order"),
    ("drop the cwd index", "DROP INDEX IF EXISTS rm_sessions_cwd"),
    ("drop the agent index", "DROP INDEX IF EXISTS rm_sessions_agent"),
    ("drop the past index", "DROP INDEX IF EXISTS rm_past_to"),
    ("no checkpoint row", "DELETE FROM rm_meta WHERE key = 'checkpoint'"),
    ("no floor row", "DELETE FROM rm_meta WHERE key = 'floor'"),
    ("no live row", "DELETE FROM rm_meta WHERE key = 'live'"),
    ("no version row", "DELETE FROM rm_meta WHERE key = 'version'"),
    ("text checkpoint", "UPDATE rm_meta SET value = 'x' WHERE key = 'checkpoint'"),
    ("older version", "UPDATE rm_meta SET value = 1 WHERE key = 'version'"),
    ("extra column", "ALTER TABLE rm_sessions ADD COLUMN extra INTEGER"),
    ("renamed table", "ALTER TABLE rm_past RENAME TO rm_past_old"),
    ("garbage blob", "UPDATE rm_sessions SET state = x'c1ff00' WHERE session_id = '{sid}'"),
    ("truncated blob", "UPDATE rm_sessions SET state = substr(state, 1, 5) WHERE session_id = '{sid}'"),
    ("empty blob", "UPDATE rm_sessions SET state = x'' WHERE session_id = '{sid}'"),
    ("text state", "UPDATE rm_sessions SET state = 'hello' WHERE session_id = '{sid}'"),
    ("flipped byte", "UPDATE rm_sessions SET state = x'00' || substr(state, 2) WHERE session_id = '{sid}'"),
    (
        "another's state",
        "UPDATE rm_sessions SET state = (SELECT state FROM rm_sessions WHERE session_id <> '{sid}' LIMIT 1)"
        " WHERE session_id = '{sid}'",
    ),
    ("garbage past rows", "UPDATE rm_past SET state = x'00'"),
    ("checkpoint past the head", "UPDATE rm_meta SET value = value + 1000 WHERE key = 'checkpoint'"),
    ("other anchor", "UPDATE rm_meta SET value = value + 1 WHERE key = 'anchor'"),
]
# Damage a page cannot see (the row is simply not there, or not where it looks): ``verify`` finds it.
SEEN_BY_VERIFY = [
    ("row deleted", "DELETE FROM rm_sessions WHERE session_id = '{sid}'"),
    ("live cleared", "UPDATE rm_sessions SET live = NOT live WHERE session_id = '{sid}'"),
    ("cwd changed", "UPDATE rm_sessions SET cwd = '/elsewhere' WHERE session_id = '{sid}'"),
    ("rank changed", "UPDATE rm_sessions SET rank = rank + 1000 WHERE session_id = '{sid}'"),
    ("archived flipped", "UPDATE rm_sessions SET archived = NOT archived WHERE session_id = '{sid}'"),
    ("valid_from moved", "UPDATE rm_sessions SET valid_from = valid_from + 1000 WHERE session_id = '{sid}'"),
    ("live count", "UPDATE rm_meta SET value = value + 3 WHERE key = 'live'"),
    ("past rows deleted", "DELETE FROM rm_past"),
]
FILE_KINDS = ["fifo", "directory", "symlink", "device", "empty file", "garbage file"]
FILE_PLACES = ["a kept snapshot", "the snapshot folder", "the import state"]


@dataclass
class Found:
    """What the suite saw, for the report (``-s`` prints it)."""

    cases: int = 0
    answered: int = 0
    refused: int = 0
    verify_found: int = 0


FOUND = Found()


def _plant(path: Path, kind: str) -> None:
    """Put a file of ``kind`` at ``path`` (whatever was there is removed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to("/dev/zero")
    elif kind == "device":
        try:
            os.mknod(path, 0o600 | 0o020000, os.makedev(1, 5))  # a character device: /dev/zero's numbers
        except (PermissionError, OSError):
            path.symlink_to("/dev/zero")
    elif kind == "empty file":
        path.touch(mode=0o600)
    else:
        path.write_bytes(b"\x00garbage" * 100)


def _tamper(path: Path, statement: str) -> None:
    # Damage that does not apply (a table already gone) is none.
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db, contextlib.suppress(sqlite3.Error):
        db.execute(statement)


def _bounded(work: Callable[[], None]) -> None:
    """Run ``work`` under the case's time limit: a hang fails the case instead of the whole run."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="fault case", daemon=True)
    thread.start()
    thread.join(CASE_SECONDS)
    assert not thread.is_alive(), f"the case did not finish within {CASE_SECONDS} s (a hang)"
    if failure:
        raise failure[0]


def _answers_the_fold(registry: SessionRegistry) -> None:
    """Every read equals the fold of the log, or fails with one clear line."""
    try:
        reference = reference_fold(registry.store)
        live = list(reference.sessions())
        assert listed(registry, None) == [s.session_id for s in live if not s.archived]
        for cwd in sorted({s.cwd for s in live}):
            assert listed(registry, cwd) == [s.session_id for s in live if s.cwd == cwd and not s.archived]
        for state in reference.states().values():
            assert registry.state(state.session_id) == state
        FOUND.answered += 1
    except RegistryError as exc:
        assert "\n" not in str(exc) and str(exc), repr(exc)
        FOUND.refused += 1


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, int]]:
    ops = st.tuples(st.sampled_from(["create", "activity", "title", "archive", "delete"]), st.integers(0, 7))
    return draw(st.lists(ops, min_size=3, max_size=25))


def _build(registry: SessionRegistry, history: list[tuple[str, int]]) -> list[str]:
    made: list[str] = []
    for op, n in history:
        sid = f"s{n}"
        with contextlib.suppress(RegistryError):
            if op == "create" or sid not in made:
                registry.create(f"/work/{n % 3}", session_id=sid, title=f"t{n}")
                made.append(sid)
            elif op == "activity":
                registry.record_activity(sid, messages=1)
            elif op == "title":
                registry.change_info(sid, title=f"title {len(made)}")
            elif op == "archive":
                registry.archive(sid)
            else:
                registry.delete(sid)
    return made


@given(
    history=histories(),
    seen_when_read=st.lists(st.sampled_from(SEEN_WHEN_READ), max_size=3),
    seen_by_verify=st.lists(st.sampled_from(SEEN_BY_VERIFY), max_size=2),
    files=st.lists(st.tuples(st.sampled_from(FILE_PLACES), st.sampled_from(FILE_KINDS)), max_size=2),
    target=st.integers(0, 7),
)
@fuzz_settings(24)
def test_damage_to_anything_derived_never_gives_a_wrong_answer_a_hang_or_a_lost_write(
    history: list[tuple[str, int]],
    seen_when_read: list[tuple[str, str]],
    seen_by_verify: list[tuple[str, str]],
    files: list[tuple[str, str]],
    target: int,
) -> None:
    FOUND.cases += 1
    with tempfile.TemporaryDirectory(prefix="fault-") as tmp:
        path = Path(tmp) / "log.db"
        url = f"sqlite://{path}"

        def case() -> None:
            with SessionRegistry.open(url, follow=False, page_size=2, window=1_000) as registry:
                made = _build(registry, history)
                with open_store(url) as store:
                    projection_at(backend_for(store), store.head(), every=3)  # kept snapshots, to be damaged too
                acknowledged = [(r.position, r.event_id) for r in registry.store.read()]
            sid = f"s{target}" if f"s{target}" in made else (made[0] if made else "none")
            for _name, statement in seen_by_verify:
                _tamper(path, statement.format(sid=sid))
            if seen_by_verify:  # verify finds it (before anything reads the tables) and rebuild mends it
                with open_store(url) as store:
                    model = open_read_model(backend_for(store), catch_up=False, window=1_000)
                    try:
                        found = check_read_model(backend_for(store), model).mismatches
                        if found:
                            FOUND.verify_found += 1
                        model.rebuild()
                        assert check_read_model(backend_for(store), model).mismatches == []
                    finally:
                        model.close()
            for _name, statement in seen_when_read:
                _tamper(path, statement.format(sid=sid))
            for place, kind in files:
                store_folder = Path(f"{path}.snapshots")
                if place == "a kept snapshot":
                    if store_folder.is_dir() and not store_folder.is_symlink():
                        kept = sorted(store_folder.glob("*.snap"))
                        _plant(kept[-1] if kept else store_folder / f"{1:020d}.snap", kind)
                elif place == "the snapshot folder":
                    _plant(store_folder, kind)
                else:
                    _plant(Path(f"{path}.import-state"), kind)
            with SessionRegistry.open(url, follow=False, page_size=2, window=1_000) as registry:
                _answers_the_fold(registry)
                head = registry.store.head()
                made_now = registry.create("/work/9", session_id="new", title="new")  # each answers success, once
                assert made_now.session_id == "new"
                registry.record_activity("new", messages=1)
                registry.delete("new")
                assert registry.store.head() == head + 3
                assert [r.event.__class__.__name__ for r in registry.store.read_stream("new")] == [
                    "SessionCreated",
                    "SessionUpdated",
                    "SessionDeleted",
                ]
                _answers_the_fold(registry)
                stored = {(r.position, r.event_id) for r in registry.store.read()}
                assert set(acknowledged) <= stored  # nothing acknowledged is lost
                for position in (0, head // 2, head):  # time travel past whatever the snapshots became
                    travelled = projection_at(backend_for(registry.store), position, keep=False)
                    assert travelled.projection.states() == reference_fold(registry.store, position).states()
            with open_store(url) as store:  # verify never hangs or raises, whatever is planted
                model = open_read_model(backend_for(store), catch_up=False, window=1_000)
                try:
                    check_read_model(backend_for(store), model)
                finally:
                    model.close()

        _bounded(case)


@pytest.fixture(scope="module", autouse=True)
def _report(request: pytest.FixtureRequest) -> Iterator[None]:
    """What the cases found, said once this module's tests are done in this process (with pytest-xdist, the
    worker that ran the property). A report, not a test: it cannot fail, so it is not written as one."""
    yield
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if FOUND.cases and capture is not None:
        with capture.global_and_fixture_disabled():
            print(
                f"\nfault injection: {FOUND.cases} cases, {FOUND.answered} reads answered the fold, "
                f"{FOUND.refused} refused with one line, {FOUND.verify_found} damages found by verify"
            )
