"""Checking a whole log: the invariants every store promises and its integrity chain, reported with positions."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from events.chain import GENESIS, ChainRule, StoredRecord
from events.codec import decode_event
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
    chained: bool = True  # False: the store keeps no integrity chain (a version-1 store opened read-only)

    @property
    def healthy(self) -> bool:
        return not self.problems


def verify_log(store: EventStore, *, batch: int = 10_000, progress: Callable[[int], None] | None = None) -> LogReport:
    """Read the whole log as stored: positions strictly increase, each session's versions run 1..n, every record
    decodes, and every record's integrity link is the hash of the record and the link before it.

    A changed record breaks its own link; a removed or reordered one breaks the link of the record after it: each
    is reported at that position, and the rest of the log is still checked (a record's link is checked against
    the *stored* link before it, so one edit is one problem, not one for every record after it). ``progress`` is
    called with the last position read after each batch.
    """
    report = LogReport()
    versions: dict[str, int] = {}
    last, previous = 0, GENESIS
    rule = store.chain_rule
    while True:
        chunk = store.stored_records(last, batch)
        for record in chunk:
            decodes, problems = _problems(record, last, previous, versions, rule)
            report.chained = report.chained and record.chain is not None
            if problems:
                report.problems.append(LogProblem(record.position, record.session_id, "; ".join(problems)))
            report.events += decodes
            last = record.position
            previous = record.chain or GENESIS
        if progress is not None:
            progress(last)
        if len(chunk) < batch:
            break
    report.head = last
    report.sessions = len(versions)
    return report


def _problems(
    record: StoredRecord, last: int, previous: bytes, versions: dict[str, int], rule: ChainRule
) -> tuple[bool, list[str]]:
    """Whether the record decodes, and what is wrong with it."""
    problems = []
    decodes = True
    try:
        decode_event(record.data, record.position, record.session_id, record.version)
    except CorruptEventError as exc:
        decodes = False
        problems.append(f"does not decode: {exc.reason}")
    if record.position <= last:
        problems.append(f"position does not increase (after {last})")
    expected = versions.get(record.session_id, 0) + 1
    if record.version != expected:
        problems.append(f"version {record.version} where {expected} was due (a gap or repeat)")
    versions[record.session_id] = record.version  # a record that does not decode still has its version
    if record.chain is not None:
        recomputed = rule.link(
            previous,
            record.position,
            record.session_id,
            record.version,
            record.event_id,
            record.recorded_at,
            record.data,
        )
        if recomputed != record.chain:
            problems.append(
                "its integrity link does not match: the record was changed, or one before it was removed or moved"
            )
    return decodes, problems
