"""Time travel from kept snapshots: the fold at any position, fast from the nearest snapshot, and snapshots that
are private, bound to their log, cheap to reject when hostile, thinned, and never trusted blindly."""

from __future__ import annotations

import itertools
import logging
import os
import stat
import time
import tracemalloc
from pathlib import Path

import pytest

from events import SessionCreated, SessionDeleted, SessionInfoChanged, SessionUpdated, SqliteStore
from registry import SessionRegistry
from registry.backends import backend_for
from registry.projection import Projection
from registry.snapshot import (
    KEEP,
    SnapshotError,
    kept_positions,
    load_snapshot,
    read_snapshot,
    save_snapshot,
    snapshots,
    thin,
)
from registry.timetravel import position_at, projection_at


def _fill(store: SqliteStore, events: int) -> None:
    for n in range(events):
        session = f"s{n % 37}"
        if n < 37:
            store.append(session, [SessionCreated(cwd=f"/w/{n % 3}", at=n * 1_000_000)])
        elif n % 11 == 0:
            store.append(session, [SessionInfoChanged(title=f"t{n}")])
        elif n % 97 == 0:
            store.append(session, [SessionDeleted()])
        else:
            store.append(session, [SessionUpdated(at=n * 1_000_000, messages=1)])


def _fold(store: SqliteStore, position: int) -> Projection:
    projection = Projection(window=0)
    projection.load(r for r in store.read() if r.position <= position)
    return projection


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    made = SqliteStore(tmp_path / "log.db", synchronous="off")
    _fill(made, 1_200)
    return made


def test_the_fold_at_any_position_from_kept_snapshots(store: SqliteStore) -> None:
    first = projection_at(backend_for(store), 1_000, every=100)  # leaves snapshots behind on its way
    assert first.snapshot is None and first.projection == _fold(store, 1_000) and first.events == 1_000
    kept = [position for position, _ in snapshots(backend_for(store))]
    assert kept and len(kept) <= KEEP and all(p < 1_000 for p in kept)
    for position in (1_000, 777, 1_200, 5):
        travel = projection_at(backend_for(store), position, every=100)
        assert travel.projection == _fold(store, position), position
        assert travel.events == position
        nearest = max((p for p in kept if p <= position), default=None)
        assert travel.snapshot == nearest  # started from the nearest kept snapshot at or before it


def test_snapshots_are_private_and_their_temporary_leftovers_are_cleaned(store: SqliteStore) -> None:
    old_umask = os.umask(0o022)
    try:
        folder = backend_for(store).snapshot_dir()
        assert folder is not None
        path = save_snapshot(backend_for(store), 100, _fold(store, 100).states().values(), events=100)
        assert path is not None
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        stale, fresh = folder / ".x.snap.1.tmp", folder / ".y.snap.2.tmp"  # what killed writers leave behind
        for leftover in (stale, fresh):
            leftover.write_bytes(b"partial")
        two_hours_ago = time.time() - 7_200
        os.utime(stale, (two_hours_ago, two_hours_ago))
        save_snapshot(backend_for(store), 200, _fold(store, 200).states().values(), events=200)
        assert not stale.exists() and fresh.exists()  # a writer may still be writing the fresh one
    finally:
        os.umask(old_umask)


def test_a_snapshot_is_bound_to_its_store_and_log(store: SqliteStore, tmp_path: Path) -> None:
    path = save_snapshot(backend_for(store), 300, _fold(store, 300).states().values(), events=300)
    assert path is not None
    assert read_snapshot(path, store).position == 300
    data = bytearray(path.read_bytes())

    forged = bytearray(data)
    forged[60] ^= 0x01  # a changed state in the body, and no secret to make the MAC match it again
    path.write_bytes(forged)
    with pytest.raises(SnapshotError, match="MAC does not match"):
        read_snapshot(path, store)

    with SqliteStore(tmp_path / "other.db") as other:  # a snapshot made with another store's secret
        _fill(other, 400)
        theirs = save_snapshot(backend_for(other), 300, _fold(other, 300).states().values(), events=300)
        assert theirs is not None
        path.write_bytes(theirs.read_bytes())
        with pytest.raises(SnapshotError, match="another store"):
            read_snapshot(path, store)

    path.write_bytes(data[:-10])  # cut short: its trailer no longer holds a header length and a MAC
    with pytest.raises(SnapshotError, match=r"damaged header|bytes long"):
        read_snapshot(path, store)
    path.write_bytes(b"garbage")
    with pytest.raises(SnapshotError, match="not a registry snapshot"):
        read_snapshot(path, store)


def test_a_bad_snapshot_only_costs_time(store: SqliteStore, caplog: pytest.LogCaptureFixture) -> None:
    good = save_snapshot(backend_for(store), 400, _fold(store, 400).states().values(), events=400, every=100)
    path = save_snapshot(backend_for(store), 500, _fold(store, 500).states().values(), events=500, every=100)
    assert good is not None and path is not None
    path.write_bytes(b"ACPRSNAP" + b"\x03" + b"\xff" * 64)
    with caplog.at_level(logging.WARNING):
        travel = projection_at(backend_for(store), 600, keep=False)
    assert travel.snapshot == 400 and travel.projection == _fold(store, 600)
    assert "ignoring it" in caplog.text and str(path) in caplog.text


def test_a_huge_file_is_rejected_by_its_header_without_being_read(store: SqliteStore) -> None:
    folder = backend_for(store).snapshot_dir()
    assert folder is not None
    folder.mkdir(mode=0o700, exist_ok=True)
    huge = folder / f"{600:020d}.snap"
    with huge.open("wb") as out:  # 2 GB, sparse: a valid-looking start, then nothing
        out.write(b"ACPRSNAP\x02\x00\x00\x00\x10" + b"\x00" * 16)
        out.truncate(2 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(SnapshotError):
            read_snapshot(huge, store)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
    assert load_snapshot(backend_for(store), 1_200) is None


def test_symlinks_are_refused(store: SqliteStore, tmp_path: Path) -> None:
    folder = backend_for(store).snapshot_dir()
    assert folder is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.symlink_to(elsewhere)
    with pytest.raises(SnapshotError, match="symlink"):
        save_snapshot(backend_for(store), 100, [], events=100)
    assert not any(elsewhere.iterdir())
    folder.unlink()
    real = save_snapshot(backend_for(store), 100, _fold(store, 100).states().values(), events=100)
    assert real is not None
    planted = folder / f"{200:020d}.snap"
    planted.symlink_to(real)
    with pytest.raises(SnapshotError, match="symlink"):
        read_snapshot(planted, store)


def test_thinning_keeps_a_grid_over_the_log_and_more_near_the_head() -> None:
    assert kept_positions(99, every=100) == []
    for head in (1_000_000, 5_000_000, 5_123_456):
        wanted = kept_positions(head)
        assert len(wanted) <= KEEP and wanted == sorted(wanted, reverse=True)
        assert all(p % 100_000 == 0 and 0 < p <= head for p in wanted)
        points = [0, *sorted(wanted)]
        assert max(b - a for a, b in itertools.pairwise(points)) <= -(-head // 8 // 100_000) * 100_000
        assert head - wanted[0] < 100_000  # the newest is less than one step behind the head
    existing = list(range(100_000, 5_000_001, 100_000))
    assert len(thin(existing, 5_000_000)) <= KEEP


def test_a_moment_is_the_last_event_recorded_at_or_before_it(tmp_path: Path) -> None:
    clock = iter(range(1_000, 10**9, 1_000))
    with SqliteStore(tmp_path / "t.db", clock=lambda: next(clock)) as store:
        _fill(store, 50)
        stamps = [(r.position, r.recorded_at) for r in store.read()]
        for moment in (0, 999, 1_000, 1_500, 25_000, 50_000, 10**12):
            expected = max((p for p, at in stamps if at <= moment), default=0)
            assert position_at(store, moment) == expected, moment


def test_a_table_build_leaves_snapshots_for_time_travel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("registry.snapshot.EVERY", 100)  # a small log, scaled like a large one
    monkeypatch.setattr("registry.snapshot.kept_positions", lambda head, every=100: kept_positions(head, every=every))
    monkeypatch.setattr("registry.readmodel.tables.CHUNK", 50)
    with SqliteStore(tmp_path / "log.db") as raw:
        _fill(raw, 1_000)  # appended without a registry: the first registry builds the tables from the log
    with SessionRegistry.open(f"sqlite://{tmp_path}/log.db") as registry:
        kept = [p for p, _ in snapshots(backend_for(registry.store))]
        assert kept, "the build kept no snapshot"
        for position in kept:
            snapshot = load_snapshot(backend_for(registry.store), position)
            assert snapshot is not None and snapshot.position == position
            assert {s.session_id: s for s in snapshot.sessions} == _fold(registry.store, position).states()  # type: ignore[arg-type]
