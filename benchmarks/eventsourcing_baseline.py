# mypy: disallow-subclassing-any=False, disallow-untyped-decorators=False, warn-return-any=False
# (CI installs only the dev extra: there eventsourcing is missing, its names are Any, and subclassing its
# Aggregate with decorated commands is the whole point of this module. With the bench extra it is typed.)
"""The library users would reach for: ``eventsourcing`` 9.5 with its SQLite persistence, fed the same history.

Each session is an aggregate whose events mirror ours. Appends time only ``Application.save`` (building the
aggregates is left out, which flatters the library). Replay is measured two ways: reading every stored event
through the application recorder and decoding it with the application mapper (what a projection would
consume), and ``repository.get`` of aggregates (reconstruct each one, as a command handler does).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from msgspec import UNSET

from benchmarks.figures import Stopwatch, Timer
from benchmarks.generate import History
from events import Event, SessionArchived, SessionCreated, SessionDeleted, SessionInfoChanged, SessionUpdated

__all__ = ["EventsourcingLog", "SessionAggregate"]


class SessionAggregate(Aggregate):
    """A session as an eventsourcing aggregate: one decorated command per event type of ours."""

    @event("Created")
    def __init__(self, id: uuid.UUID, cwd: str, at: int, title: str | None, meta: dict[str, Any] | None) -> None:
        self.cwd = cwd
        self.updated_at = at
        self.title = title
        self.meta = meta
        self.deleted = False
        self.archived = False

    @event("Updated")
    def record_activity(self, at: int, messages: int) -> None:
        self.updated_at = at

    @event("InfoChanged")
    def change_info(self, changes: dict[str, Any]) -> None:
        # The library has no "unset": only the fields that changed are carried, which keeps None = cleared.
        self.title = changes.get("title", self.title)
        self.meta = changes.get("meta", self.meta)

    @event("Deleted")
    def delete(self, reason: str | None) -> None:
        self.deleted = True

    @event("Archived")
    def archive(self) -> None:
        self.archived = True


class _Sessions(Application[uuid.UUID]):
    name = "Sessions"


def _apply(aggregate: SessionAggregate, ev: Event) -> None:
    if isinstance(ev, SessionUpdated):
        aggregate.record_activity(at=ev.at, messages=ev.messages)
    elif isinstance(ev, SessionInfoChanged):
        changes: dict[str, Any] = {}
        if ev.title is not UNSET:
            changes["title"] = ev.title
        if ev.title_source is not UNSET:
            changes["title_source"] = ev.title_source.value
        if ev.meta is not UNSET:
            changes["meta"] = ev.meta
        aggregate.change_info(changes=changes)
    elif isinstance(ev, SessionDeleted):
        aggregate.delete(reason=ev.reason)
    elif isinstance(ev, SessionArchived):
        aggregate.archive()


def _aggregate(session_id: str, events: Sequence[Event]) -> SessionAggregate:
    created = events[0]
    if not isinstance(created, SessionCreated):
        raise ValueError(f"session {session_id} does not start with SessionCreated")
    aggregate = SessionAggregate(
        id=uuid.UUID(session_id), cwd=created.cwd, at=created.at, title=created.title, meta=created.meta
    )
    for ev in events[1:]:
        _apply(aggregate, ev)
    return aggregate


class EventsourcingLog:
    """An eventsourcing application on a SQLite file (``PERSISTENCE_MODULE=eventsourcing.sqlite``; the
    library leaves SQLite's default ``synchronous=FULL`` in WAL mode, so every save is durable)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.app = _Sessions(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})
        self.loaded = Stopwatch()

    def load(self, histories: Sequence[History]) -> None:
        """Many aggregates per ``save`` (one transaction, one fsync): the library's fastest way in."""
        aggregates = [_aggregate(sid, events) for sid, events in histories]
        with self.loaded:
            self.app.save(*aggregates)
        self.loaded.count += sum(len(events) for _, events in histories)

    @contextlib.contextmanager
    def saves(self) -> Iterator[Timer[History]]:
        """Times one ``save`` per aggregate (its events in one transaction), as an application saves after a
        command; building the aggregate is left out of the time."""

        def save(history: History) -> float:
            aggregate = _aggregate(*history)
            start = time.perf_counter()
            self.app.save(aggregate)
            return time.perf_counter() - start

        yield save

    @contextlib.contextmanager
    def commands(self) -> Iterator[Timer[tuple[str, Event]]]:
        """Times one event on an existing session the library's way: get the aggregate, command, save."""

        def command(item: tuple[str, Event]) -> float:
            start = time.perf_counter()
            aggregate: SessionAggregate = self.app.repository.get(uuid.UUID(item[0]))
            _apply(aggregate, item[1])
            self.app.save(aggregate)
            return time.perf_counter() - start

        yield command

    def read_notifications(self, batch: int = 10_000) -> int:
        """Every stored event in notification order, decoded to a domain event; returns how many."""
        recorder = self.app.recorder
        to_domain_event = self.app.mapper.to_domain_event
        count = 0
        start = 1
        while True:
            notifications = recorder.select_notifications(start, batch)
            for notification in notifications:
                to_domain_event(notification)
            count += len(notifications)
            if len(notifications) < batch:
                return count
            start = notifications[-1].id + 1

    def reconstruct(self, session_ids: Sequence[str]) -> int:
        """``repository.get`` each session's aggregate; returns how many events were replayed."""
        get = self.app.repository.get
        count = 0
        for session_id in session_ids:
            aggregate: SessionAggregate = get(uuid.UUID(session_id))
            count += aggregate.version
        return count

    def close(self) -> None:
        self.app.close()
