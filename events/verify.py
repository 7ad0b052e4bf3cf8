"""Checking a whole log: the invariants every store promises, reported with positions."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from events.errors import CorruptEventError
from events.store import EventStore

__all__ = ["LogProblem", "LogReport", "verify_log"]


class LogProblem(msgspec.Struct, frozen=True):
    """One broken invariant, at the position where it shows."""

    position: int
    session_id: str | None
    problem: str


class LogReport(msgspec.Struct):
    events: int = 0
    sessions: int = 0
    head: int = 0
    problems: list[LogProblem] = msgspec.field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems


def verify_log(store: EventStore, *, batch: int = 10_000, progress: Callable[[int], None] | None = None) -> LogReport:
    """Read the whole log: positions strictly increase, each session's versions run 1..n, every record decodes.

    A record that does not decode is reported and skipped over; the rest of the log is still checked.
    ``progress`` is called with the last position read after each batch.
    """
    report = LogReport()
    versions: dict[str, int] = {}
    last = 0
    while True:
        try:
            chunk = store.read(last, batch)
        except CorruptEventError as exc:
            report.problems.append(LogProblem(exc.position, exc.session_id, f"does not decode: {exc.reason}"))
            # Read up to the bad record one by one, then step over it.
            while True:
                try:
                    good = store.read(last, 1)
                except CorruptEventError:
                    last = exc.position
                    break
                if not good or good[0].position >= exc.position:
                    last = exc.position
                    break
                _check(good[0].position, good[0].session_id, good[0].version, last, versions, report)
                last = good[0].position
            if exc.session_id is not None and exc.version is not None:
                versions[exc.session_id] = exc.version  # its version is known; only its body is lost
            continue
        for record in chunk:
            _check(record.position, record.session_id, record.version, last, versions, report)
            last = record.position
        if progress is not None:
            progress(last)
        if len(chunk) < batch:
            break
    report.head = last
    report.sessions = len(versions)
    return report


def _check(
    position: int, session_id: str, version: int, last: int, versions: dict[str, int], report: LogReport
) -> None:
    report.events += 1
    if position <= last:
        report.problems.append(LogProblem(position, session_id, f"position does not increase (after {last})"))
    expected = versions.get(session_id, 0) + 1
    if version != expected:
        report.problems.append(
            LogProblem(position, session_id, f"version {version} where {expected} was due (a gap or repeat)")
        )
    versions[session_id] = version
