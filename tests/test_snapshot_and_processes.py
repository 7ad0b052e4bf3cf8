"""Cold start from a snapshot (never trusted blindly), and several processes on one store."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from events import SessionUpdated, open_store
from registry import SessionRegistry
from registry.snapshot import read_snapshot


def _fill(registry: SessionRegistry, count: int) -> None:
    for n in range(count):
        registry.create(f"/work/p{n % 3}", session_id=f"s{n:03d}", title=f"task {n}", at=1_000 + n)
        if n % 4 == 0:
            registry.record_activity(f"s{n:03d}", messages=2, at=5_000 + n)
        if n % 7 == 0:
            registry.delete(f"s{n:03d}")


def _listing(registry: SessionRegistry) -> list[object]:
    return [info for info in registry.list().sessions]


def test_a_restart_loads_the_snapshot_and_replays_only_the_tail(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    with SessionRegistry.open(url, page_size=1000) as registry:
        _fill(registry, 60)
        expected = _listing(registry)
        position = registry.position
    snapshot = read_snapshot(tmp_path / "log.db.snapshot")
    assert snapshot.position == position and len(snapshot.sessions) == 60
    with open_store(url) as store:
        store.append("s001", [SessionUpdated(at=9_999, messages=1)])  # the tail after the snapshot
    with SessionRegistry.open(url, page_size=1000) as registry:
        assert registry.loaded_from_snapshot
        assert registry.position == position + 1
        listing = _listing(registry)
    assert listing[0].session_id == "s001"  # type: ignore[attr-defined]
    assert sorted(listing, key=str) == sorted(
        [i for i in expected if i.session_id != "s001"] + [listing[0]],  # type: ignore[attr-defined]
        key=str,
    )


@pytest.mark.parametrize("damage", ["garbage", "truncate", "flip", "foreign", "restored-backup"])
def test_a_bad_snapshot_is_discarded_with_a_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    path = tmp_path / "log.db.snapshot"
    with SessionRegistry.open(url, page_size=1000) as registry:
        _fill(registry, 30)
        expected = _listing(registry)
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a snapshot at all")
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    elif damage == "foreign":
        with SessionRegistry.open(f"sqlite://{tmp_path}/other.db") as other:
            other.create("/elsewhere", session_id="alien")
        path.write_bytes((tmp_path / "other.db.snapshot").read_bytes())
    else:  # a backup of the log was restored: same store id, but the event at the snapshot's position differs
        backup = tmp_path / "backup.db"
        backup.write_bytes((tmp_path / "log.db").read_bytes())
        with SessionRegistry.open(url, page_size=1000) as registry:
            registry.create("/later", session_id="later", at=99)  # the snapshot now reflects this
        (tmp_path / "log.db").write_bytes(backup.read_bytes())
        with SessionRegistry.open(url, page_size=1000, snapshot_path=tmp_path / "unused") as restored:
            restored.create("/other", session_id="different", at=98)  # a different event at that position
            expected = _listing(restored)
    with caplog.at_level(logging.WARNING), SessionRegistry.open(url, page_size=1000) as registry:
        assert not registry.loaded_from_snapshot
        assert _listing(registry) == expected
    why = {
        "garbage": "is not a registry snapshot",
        "truncate": "is damaged",
        "flip": "is damaged",
        "foreign": "belongs to another store",
        "restored-backup": "does not match the log at position",
    }[damage]
    assert any(why in r.message and "rebuilding from the log" in r.message for r in caplog.records), caplog.text


def test_a_missing_snapshot_rebuilds_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    with SessionRegistry.open(url) as registry:
        _fill(registry, 10)
        expected = _listing(registry)
    (tmp_path / "log.db.snapshot").unlink()
    with caplog.at_level(logging.WARNING), SessionRegistry.open(url) as registry:
        assert _listing(registry) == expected and not registry.loaded_from_snapshot
    assert not caplog.records


_OTHER_PROCESS = """
import sys
from registry import SessionRegistry
with SessionRegistry.open(sys.argv[1], follow=False, snapshot_path=None) as registry:
    registry.create("/work/remote", session_id="from-child", title="made elsewhere")
    registry.change_info("seed", title="renamed elsewhere")
    registry.delete("doomed")
"""


def test_processes_on_one_store_see_each_others_changes(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    with SessionRegistry.open(url) as registry:
        registry.create("/work/here", session_id="seed", title="original")
        registry.create("/work/here", session_id="doomed")
        subprocess.run([sys.executable, "-c", _OTHER_PROCESS, url], check=True, timeout=60)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the follower thread picks the changes up on its own
            ids = {i.session_id: i for i in registry.list().sessions}
            if "from-child" in ids and "doomed" not in ids and ids["seed"].title == "renamed elsewhere":
                break
            time.sleep(0.01)
        assert set(ids) == {"seed", "from-child"}
        assert ids["seed"].title == "renamed elsewhere"
        assert ids["from-child"].cwd == "/work/remote"
