"""Files that cannot hang or flood a read, and stores that are not one's own (issue 24, "files").

Real files of every type at the paths the registry reads: a FIFO, a directory, a symbolic link, a device where
one can be made, a file of another user; a zstd bomb. Each read either refuses with one clear line or skips and
names what it skipped, in bounded time (each case under a process timeout) and bounded memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from events.errors import StoreError
from registry import SessionRegistry
from registry.importers.lines import TailRead, compressed_lines, open_regular
from tests.test_derived_faults import cli


def _kinds(tmp_path: Path) -> dict[str, Path]:
    """A path of each file type that must never be read as a file."""
    kinds = {}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    kinds["fifo"] = fifo
    folder = tmp_path / "folder"
    folder.mkdir()
    kinds["directory"] = folder
    target = tmp_path / "target.jsonl"
    target.write_bytes(b'{"a": 1}\n')
    link = tmp_path / "link"
    link.symlink_to(target)
    kinds["symlink"] = link
    kinds["device"] = Path("/dev/zero")  # endless: read as a file it would never end
    return kinds


def test_only_regular_files_of_this_user_are_opened_and_nothing_blocks(tmp_path: Path) -> None:
    for kind, path in _kinds(tmp_path).items():
        with pytest.raises(OSError) as found:
            open_regular(str(path)).close()
        assert "regular file" in str(found.value) or "symbolic link" in str(found.value), kind
        with pytest.raises(OSError):
            TailRead(str(path), None, cap=1 << 20)
        with pytest.raises(OSError):
            list(compressed_lines(str(path), cap=1 << 20))


def test_a_file_of_another_user_is_not_read(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    path = tmp_path / "theirs.jsonl"
    path.write_bytes(b'{"a": 1}\n')
    os.chown(path, 65534, 65534)
    with pytest.raises(OSError, match="another user"):
        open_regular(str(path))


_BOMB_READER = """
import resource, sys
from registry.importers.lines import compressed_lines
lines = list(compressed_lines(sys.argv[1], cap=16 << 20))
print(sum(line is None for line in lines), len(lines), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_a_zstd_bomb_costs_at_most_the_line_cap(tmp_path: Path) -> None:
    """512 MiB of one line compressed into a few KiB: the line is skipped (named as over the cap), and the
    reader's peak memory stays near a small file's (before: the whole line in memory)."""
    bomb = tmp_path / "bomb.jsonl.zst"
    small = tmp_path / "small.jsonl.zst"
    block = b"a" * (1 << 20)
    with bomb.open("wb") as out, zstandard.ZstdCompressor(level=3).stream_writer(out) as writer:
        writer.write(b'{"first": 1}\n')
        for _ in range(512):
            writer.write(block)
        writer.write(b'\n{"last": 2}\n')
    small.write_bytes(zstandard.ZstdCompressor().compress(b'{"first": 1}\n{"last": 2}\n'))
    assert bomb.stat().st_size < 1 << 20

    def peak(path: Path) -> tuple[int, int, int]:
        done = subprocess.run(
            [sys.executable, "-c", _BOMB_READER, str(path)], capture_output=True, text=True, timeout=120, check=True
        )
        skipped, count, rss = map(int, done.stdout.split())
        return skipped, count, rss

    skipped, count, bomb_rss = peak(bomb)
    assert (skipped, count) == (1, 3)  # the first and last records are read, the bomb's line skipped
    _, _, small_rss = peak(small)
    assert bomb_rss - small_rss < 96 * 1024, (bomb_rss, small_rss)  # KiB: well under the 512 MiB line


def test_snapshots_that_are_not_files_are_ignored_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    with SessionRegistry.open(f"sqlite://{path}", follow=False) as registry:
        for n in range(4):
            registry.create("/w", session_id=f"s{n}")
    folder = Path(f"{path}.snapshots")
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / f"{2:020d}.snap")
    (folder / f"{3:020d}.snap").mkdir()
    (folder / f"{1:020d}.snap").symlink_to("/dev/zero")
    url = f"sqlite://{path}"
    for command in (["replay", "--at", "3"], ["verify"], ["stats"]):
        done = cli("--store", url, *command)
        assert "Traceback" not in done.stderr, (command, done.stderr)
        assert done.returncode in (0, 1), (command, done.stderr)
    verified = cli("--store", url, "verify")
    assert "not a regular file" in verified.stdout and "symlink" in verified.stdout


def test_a_store_file_others_can_write_or_of_another_user_is_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "planted.db"
    path.touch()
    path.chmod(0o666)  # as another user would plant it in a shared sticky directory
    with pytest.raises(StoreError, match="other users can write it"):
        SessionRegistry.open(f"sqlite://{path}")
    assert path.stat().st_size == 0  # left as it was
    done = subprocess.run(
        [sys.executable, "-m", "registry.cli", "--store", f"sqlite://{path}", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "ACP_REGISTRY_FOREIGN_STORE=allow" in done.stderr
    allowed = {**os.environ, "ACP_REGISTRY_FOREIGN_STORE": "allow"}
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from registry import SessionRegistry; SessionRegistry.open('sqlite://{path}').close()",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=allowed,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs.db"
        theirs.touch(mode=0o600)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(StoreError, match="belongs to another user"):
            SessionRegistry.open(f"sqlite://{theirs}")


def test_a_full_disk_serves_an_old_store_read_only_from_the_fold(tmp_path: Path) -> None:
    """An old store whose read model was never built, on a full disk: list, verify and stats answer from the log
    folded in memory (the tables cannot be made), with one line saying so."""
    import shutil  # noqa: PLC0415

    from events import SessionCreated, SqliteStore  # noqa: PLC0415

    source = tmp_path / "old.db"
    with SqliteStore(source) as store:  # appended without a registry: no read model
        for n in range(2000):
            store.append(f"s{n:04d}", [SessionCreated(cwd=f"/w/{n % 3}", at=(n + 1) * 1_000_000, title="x" * 100)])
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True)  # noqa: PLW1510
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {mounted.stderr.decode().strip()}")
    try:
        shutil.copy(source, disk / "old.db")
        (disk / "old.db").chmod(0o600)
        (disk / "old.db-shm").write_bytes(b"\0" * 32768)  # as a store that was open before the disk filled
        (disk / "old.db-wal").touch(mode=0o600)
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as filler:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        url = f"sqlite://{disk}/old.db"
        for command in (["list", "--json"], ["verify"], ["stats"]):
            done = cli("--store", url, *command, timeout=120)
            assert done.returncode == 0, (command, done.stderr)
            assert "Traceback" not in done.stderr and "in memory" in done.stderr, (command, done.stderr)
        listed = cli("--store", url, "list", "--json", timeout=120)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["sessions"][0]["sessionId"] == "s1999"
    finally:
        subprocess.run(["umount", str(disk)], check=False)
