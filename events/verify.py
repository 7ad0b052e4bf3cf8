"""Checking a whole log: the invariants every store promises and its integrity chain, reported with positions."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from events.chain import GENESIS, ChainRule, StoredRecord
from events.codec import decode_event
from events.content import decode_body, digest
from events.errors import CorruptEventError
from events.model import ContentRef, Message, Role, SessionDeleted, SessionUpdated
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
    messages: int = 0  # messages kept beside the log, each checked against its event's digest
    erased: int = 0  # events whose messages a user's delete erased

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
    refs: dict[int, tuple[str, ContentRef]] = {}
    deleted: set[str] = set()
    last, previous = 0, GENESIS
    rule = store.chain_rule
    while True:
        chunk = store.stored_records(last, batch)
        for record in chunk:
            decodes, problems = _problems(record, last, previous, versions, rule, refs, deleted)
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
    _check_messages(store, refs, deleted, report, batch)
    return report


def _check_messages(
    store: EventStore, refs: dict[int, tuple[str, ContentRef]], deleted: set[str], report: LogReport, batch: int
) -> None:
    """Every event's messages against the digest its record carries: a changed, removed or planted message is a
    problem at its event's position; the messages of a deleted session may be gone (a user's delete erases them)."""
    after = 0
    while True:
        rows = store.stored_messages(after, batch)
        if not rows:
            break
        by_position: dict[int, list[Message | None]] = {}
        owners: dict[int, str] = {}
        for position, owner, stored in rows:
            owners[position] = owner
            try:
                message: Message | None = Message(role=Role(stored.role), text=decode_body(stored.body), at=stored.at)
            except (ValueError, UnicodeDecodeError):
                message = None
            by_position.setdefault(position, []).append(message)
        for position, messages in by_position.items():
            report.messages += len(messages)
            found = refs.pop(position, None)
            if found is None:
                report.problems.append(
                    LogProblem(
                        position, owners[position], "messages are kept for an event that refers to none (planted)"
                    )
                )
                continue
            session_id, ref = found
            if any(m is None for m in messages):
                problem = "a kept message does not decode (its body was changed)"
            elif ref.count != len(messages) or ref.digest != digest(m for m in messages if m is not None):
                problem = "its kept messages do not match the digest the log records (changed, added or removed)"
            else:
                continue
            report.problems.append(LogProblem(position, session_id, problem))
        after = rows[-1][0]
    for position, (session_id, ref) in sorted(refs.items()):
        if session_id in deleted:
            report.erased += 1
        else:
            report.problems.append(
                LogProblem(position, session_id, f"its {ref.count} kept messages are missing (removed from the store)")
            )


def _problems(
    record: StoredRecord,
    last: int,
    previous: bytes,
    versions: dict[str, int],
    rule: ChainRule,
    refs: dict[int, tuple[str, ContentRef]],
    deleted: set[str],
) -> tuple[bool, list[str]]:
    """Whether the record decodes, and what is wrong with it (noting the messages it refers to and deletions)."""
    problems = []
    decodes = True
    try:
        event = decode_event(record.data, record.position, record.session_id, record.version)
        if isinstance(event, SessionUpdated) and event.content is not None:
            refs[record.position] = (record.session_id, event.content)
        elif isinstance(event, SessionDeleted):
            deleted.add(record.session_id)
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
