"""Waiting in tests: on a condition, with a bound, never for a fixed time.

A test that sleeps for "long enough" passes on an idle machine and fails on a busy one (a process that has not
yet parsed its arguments, a thread that has not yet reached its lock). These wait for the thing itself; the
bound is a deadline only, generous so that a loaded machine passes, and failing it says what did not happen.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

__all__ = [
    "async_wait_until",
    "catches_signal",
    "children",
    "ignores_signal",
    "loaded",
    "next_millisecond",
    "thread_waits_in",
    "wait_until",
]

T = TypeVar("T")

_POLL = 0.01
"""Seconds between two looks: short enough not to slow a test, long enough not to hog a core."""


def wait_until(predicate: Callable[[], T | None], timeout: float = 30.0, what: str = "the condition") -> T:
    """``predicate()`` once it is truthy (its value is returned); fails the test, naming ``what``, after ``timeout``
    seconds."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(_POLL)
    return value


async def async_wait_until(
    predicate: Callable[[], Awaitable[T | None]], timeout: float = 30.0, what: str = "the condition"
) -> T:
    """``wait_until`` for an asynchronous predicate, without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while not (value := await predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        await asyncio.sleep(_POLL)
    return value


def next_millisecond() -> None:
    """Returns once the wall clock is in a millisecond after the one it was in (lists order by the millisecond:
    two writes that must be told apart by time are made in two)."""
    now = time.time_ns() // 1_000_000
    wait_until(lambda: time.time_ns() // 1_000_000 > now, 5, "the clock to reach the next millisecond")


def thread_waits_in(thread: threading.Thread, function: str) -> bool:
    """Whether ``thread`` is now inside a call of ``function`` (a name, e.g. the one that waits for a lock): what a
    test waits for before it acts on a thread that must be blocked there."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def children(pid: int) -> list[int]:
    """The process ids of ``pid``'s children (Linux: /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def ignores_signal(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has set ``signum`` to be ignored (Linux: its SigIgn mask in /proc)."""
    return _in_signal_mask(pid, "SigIgn:", signum)


def catches_signal(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (Linux: its SigCgt mask in /proc)."""
    return _in_signal_mask(pid, "SigCgt:", signum)


def _in_signal_mask(pid: int, mask_line: str, signum: int) -> bool:
    """Whether ``signum`` is set in the mask that ``/proc/<pid>/status`` gives on its ``mask_line`` (False for a
    process that is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith(mask_line))
    return bool(mask >> (signum - 1) & 1)


def loaded(pid: int, name: str) -> bool:
    """Whether process ``pid`` has mapped a file whose path contains ``name`` (an extension module it imported)."""
    try:
        return name in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
