"""The store contract's tests across OS processes (two writers on one store, writers killed with SIGKILL), and
the child processes they start.

Run as ``python -m events.testing_processes writer URL ...`` it is the child process of the cross-process tests;
``python -m events.testing_processes follower URL COUNT`` prints what a subscription in another process sees.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from events.codec import encode_record_json
from events.factory import open_store
from events.model import RecordedEvent, SessionUpdated
from events.store import ANY, AppendRequest, EventStore
from events.verify import verify_log

__all__ = ["ProcessContract", "acknowledged_batches", "assert_no_partial_batches", "check_log"]


def check_log(store: EventStore) -> list[RecordedEvent]:
    """Read the whole log and assert the store's invariants; return it."""
    report = verify_log(store)
    assert report.healthy, report.problems
    log = store.read()
    positions = [r.position for r in log]
    assert positions == sorted(set(positions)), "positions must strictly increase"
    assert len({r.event_id for r in log}) == len(log), "an event id is stored twice"
    return log


def _activity(n: int, **payload: object) -> SessionUpdated:
    return SessionUpdated(at=1_000 + n, messages=1, payload=payload or None)


class ProcessContract:
    """The contract's tests that need other processes (a store that cannot be shared: ``store_url`` None, skip)."""

    def open(self, url: str | None) -> EventStore:
        raise NotImplementedError

    def test_two_processes_append_to_one_store(self, store_url: str | None, store: EventStore) -> None:
        if store_url is None:
            pytest.skip("this store cannot be shared between processes")
        children = [_spawn_writer(store_url, f"p{n}", batches=60) for n in range(2)]
        seen: list[RecordedEvent] = []
        with store.subscribe(after=0) as sub:
            deadline = time.monotonic() + 120
            while len(seen) < 2 * 60 * 3 and time.monotonic() < deadline:
                seen.extend(sub.poll(timeout=1))
        acknowledged = [acknowledged_batches(child.communicate(timeout=120)[0]) for child in children]
        assert [child.returncode for child in children] == [0, 0]
        log = check_log(store)
        assert len(log) == 2 * 60 * 3
        assert [r.position for r in seen] == [r.position for r in log], "a subscriber missed a remote append"
        batches = [b for child in acknowledged for b in child]
        assert sorted(p for b in batches for p in b) == [r.position for r in log]
        _assert_batches_do_not_interleave(batches)

    def test_acknowledged_appends_survive_sigkill(self, store_url: str | None) -> None:
        if store_url is None:
            pytest.skip("this store cannot be shared between processes")
        rng = random.Random(20261202)
        acknowledged: list[list[int]] = []
        for run in range(20):
            # Every other child appends from four threads: killed while a group commit is in flight.
            child = _spawn_writer(store_url, f"crash{run}", batches=100_000, threads=1 if run % 2 else 4)
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            # The kill waits for a first acknowledgement, then lands at a random point of the stream: on a busy
            # machine a child may take longer than any fixed delay to acknowledge its first batch.
            first = child.stdout.readline()
            assert first.startswith("ack "), f"the writer ended before acknowledging anything: {first!r}"
            time.sleep(rng.uniform(0.0, 0.25))
            child.send_signal(signal.SIGKILL)
            out, _ = child.communicate(timeout=30)
            acknowledged.extend(acknowledged_batches(first + out))
        store = self.open(store_url)
        try:
            log = check_log(store)
            by_position = {r.position: r for r in log}
            missing = [p for batch in acknowledged for p in batch if p not in by_position]
            assert not missing, f"acknowledged events lost: {missing[:10]}"
            assert_no_partial_batches(log)
            assert len(acknowledged) >= 20, "each child acknowledged a batch before it was killed"
        finally:
            store.close()


def _flat(kind: str, value: Any) -> list[int]:
    """The positions an append (``ok``: a list) or a batch (a list of lists) acknowledged."""
    return list(value) if kind == "ok" else [p for part in value for p in part]


def _assert_batches_do_not_interleave(batches: list[list[int]]) -> None:
    spans = sorted((min(b), max(b)) for b in batches)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end < start, f"two batches interleave their positions: ...{end} and {start}..."


def _spawn_writer(url: str, prefix: str, batches: int, threads: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "events.testing_processes",
            "writer",
            url,
            prefix,
            str(batches),
            "--threads",
            str(threads),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def acknowledged_batches(out: str) -> list[list[int]]:
    """Positions of each batch a writer child acknowledged (a line cut short by the kill is not one)."""
    batches = []
    for line in out.splitlines(keepends=True):
        if line.startswith("ack ") and line.endswith("\n"):
            batches.append([int(p) for p in line.split()[1:]])
    return batches


def assert_no_partial_batches(log: list[RecordedEvent]) -> None:
    """Every batch a writer child appended is in ``log`` whole or not at all (its events carry the batch's size)."""
    sizes: dict[str, int] = defaultdict(int)
    expected: dict[str, int] = {}
    for record in log:
        assert isinstance(record.event, SessionUpdated) and isinstance(record.event.payload, dict)
        sizes[record.event.payload["batch"]] += 1
        expected[record.event.payload["batch"]] = record.event.payload["size"]
    partial = {batch: n for batch, n in sizes.items() if n != expected[batch]}
    assert not partial, f"partial batches in the log: {partial}"


def _writer(url: str, prefix: str, batches: int, threads: int = 1) -> None:
    """Append batches of 1-5 events (each knowing its batch and size) and print every acknowledgement, from
    ``threads`` threads at once (then the store commits them in groups); every 7th batch goes to two sessions in
    one ``append_batch`` in the crash tests (``batches`` over 1000)."""
    store = open_store(url)
    printing = threading.Lock()
    print("ready", flush=True)

    crash = batches > 1000  # the crash tests: random sizes, and some batches across sessions

    def write(thread: int) -> None:
        rng = random.Random(f"{prefix}{os.getpid()}-{thread}")
        for n in range(batches):
            batch_id = f"{prefix}-{os.getpid()}-{thread}-{n}"
            size = rng.randint(1, 5) if crash else 3
            sessions = [f"{prefix}-{thread}-{rng.randrange(5)}" for _ in range(2 if crash and n % 7 == 6 else 1)]
            events = [_activity(n, batch=batch_id, size=size * len(sessions), i=i) for i in range(size)]
            if len(sessions) == 1:
                positions = store.append(sessions[0], events, ANY)
            else:
                split = store.append_batch([AppendRequest(session, events) for session in sessions])
                positions = [p for part in split for p in part]
            with printing:
                print("ack", *positions, flush=True)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    store.close()


def _follower(url: str, count: int, timeout: float) -> None:
    """Subscribe from the start, say "ready", then print every event as it arrives ("event" and its JSON line)
    until ``count`` events have come or ``timeout`` seconds have passed."""
    store = open_store(url)
    seen = 0
    deadline = time.monotonic() + timeout
    with store.subscribe(after=0) as sub:
        print("ready", flush=True)
        while seen < count and time.monotonic() < deadline:
            records = sub.poll(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
            for record in records:
                print("event", encode_record_json(record).decode())
            seen += len(records)
            sys.stdout.flush()
    store.close()


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m events.testing_processes")
    sub = parser.add_subparsers(dest="command", required=True)
    writer = sub.add_parser("writer", help="append batches and acknowledge each on stdout")
    writer.add_argument("url")
    writer.add_argument("prefix")
    writer.add_argument("batches", type=int)
    writer.add_argument("--threads", type=int, default=1)
    follower = sub.add_parser("follower", help="subscribe from the start and print every event seen")
    follower.add_argument("url")
    follower.add_argument("count", type=int)
    follower.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if args.command == "follower":
        _follower(args.url, args.count, args.timeout)
    else:
        _writer(args.url, args.prefix, args.batches, args.threads)


if __name__ == "__main__":
    _main()
