"""Event ids: time-ordered UUIDv7 (RFC 9562), never repeated within a process, across threads or in a fork."""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid

from events.codec import new_event_id

_RAND_74 = (1 << 74) - 1


def _counter_bits(value: uuid.UUID) -> int:
    """The 74 bits below the millisecond count (rand_a and rand_b) that new_event_id counts up."""
    return (value.int >> 64 & 0xFFF) << 62 | value.int & ((1 << 62) - 1)


def test_ids_are_version_7_with_the_current_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_event_id() for _ in range(1000)]
    after = time.time_ns() // 1_000_000
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)
    assert all(before <= i.int >> 80 <= after for i in ids)


def test_ids_increase_in_the_order_they_were_made() -> None:
    ids = [new_event_id() for _ in range(100_000)]
    assert sorted(ids) == ids
    assert len(set(ids)) == len(ids)
    # Within one millisecond the order comes from the counter: consecutive ids differ by one there.
    same_ms = [(a, b) for a, b in itertools.pairwise(ids) if a.int >> 80 == b.int >> 80]
    assert same_ms
    assert all((_counter_bits(b) - _counter_bits(a)) & _RAND_74 == 1 for a, b in same_ms)


def test_threads_never_get_the_same_id() -> None:
    made: list[list[uuid.UUID]] = [[] for _ in range(8)]

    def make(n: int) -> None:
        made[n].extend(new_event_id() for _ in range(20_000))

    threads = [threading.Thread(target=make, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for ids in made for i in ids]
    assert len(set(every)) == len(every) == 160_000


def test_a_forked_child_counts_from_a_new_seed() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one id to the parent, then out without running the parent's cleanup
        os.write(write, new_event_id().bytes)
        os._exit(0)
    os.close(write)
    ours = new_event_id()
    child = uuid.UUID(bytes=os.read(read, 16))
    os.close(read)
    os.waitpid(pid, 0)
    # Without a reseed the child's counter would be a copy of ours: its first id would count on from the same
    # state as ours (equal counter bits, or one apart).
    distance = (_counter_bits(child) - _counter_bits(ours)) & _RAND_74
    assert min(distance, _RAND_74 + 1 - distance) > 1_000_000
