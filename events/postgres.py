"""PostgreSQL: a store shared by any number of processes and hosts, in one schema of one database.

Writers take a transaction-level advisory lock (one key per schema) before they read the head, so positions are
assigned and committed in one order: a reader that has seen position P never later finds a committed event below
P. A position is the head + 1 under that lock; readers still ask for ``> last``, never ``last + 1``.

Live tail: an append NOTIFYs the schema's channel inside its transaction, and one listener thread per store (on
its own connection, outside the pool, started by the first subscription; ``events.listener``) rings the doorbell
on every notification.

Failures: psycopg's errors become the library's in one place (``_run``). A transient one - a dropped connection,
a server restarting - is retried with backoff for up to ``retry_timeout`` seconds: reads always, and appends
too, with the same event ids, so an append whose commit was acknowledged but lost in flight returns its
original positions instead of writing twice.

URL: ``postgresql://user[:password]@host[:port]/dbname[?schema=NAME&...]`` (or ``postgres://``). ``schema``
(default ``acp_registry``) is this library's option; a schema is a store. Every other query parameter must be one
of libpq's own connection parameters (``sslmode``, ``connect_timeout``, ``application_name``...) and passes to
libpq unchanged: such a URL is libpq's format, and managed servers are unusable without e.g. ``sslmode``.
Anything else is refused with a ``ValueError`` naming it (``events.urls.split_postgres_url``), so a typo never
silently falls back to a default.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Literal, LiteralString, TypeVar

import msgspec
import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.rows import TupleRow

from events.chain import GENESIS, StoredRecord, links
from events.codec import decode_event, encode_event
from events.errors import ConcurrencyError, StoreClosedError, StoreError, StoreFormatError
from events.group_commit import GroupCommit
from events.listener import FIRST_DELAY, MAX_DELAY, Listener
from events.model import Event, LogEntry, RecordedEvent
from events.schema import (
    CHAIN_SINCE,
    RECORD_COLUMNS,
    SCHEMA_VERSION,
    TABLES,
    identity_from_meta,
    new_meta,
    postgres_ddl,
)
from events.store import (
    ANY,
    Clock,
    EventStore,
    PreparedAppend,
    StoreIdentity,
    Subscription,
    Tip,
    _check_position,
    record_from_row,
    retried_positions,
)
from events.urls import DEFAULT_SCHEMA, check_schema, postgres_location, split_postgres_url

__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "PostgresStore"]

_Connection = psycopg.Connection[TupleRow]
_T = TypeVar("_T")

_LAST_POSITION: Final = 2**63 - 1
_event_decoder = msgspec.msgpack.Decoder(Event)
_TABLES = tuple(table.name for table in TABLES)
_Unit = list[tuple[PreparedAppend, list[bytes]]]  # one append or append_batch, its events encoded
# Failures after which running the same operation again is worth it: the connection broke (class 08, or no
# SQLSTATE at all), the server is shutting down or starting up, too many connections, a rolled-back transaction.
_TRANSIENT_STATES: Final = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})


class PostgresStore(EventStore):
    """An event store in one schema of a PostgreSQL database; any number of processes may append at once.

    ``conninfo`` is a libpq connection string or URL; ``create`` makes the store's tables (and schema) when there
    are none, False for callers that only read; ``pool_size`` caps this store's pooled connections (a
    subscribing store holds one more, for LISTEN); ``poll_interval`` is how often subscriptions look at the log
    when no notification comes; ``retry_timeout`` bounds the retries of transient failures; an append waits at
    most ``lock_timeout`` seconds for another writer's transaction.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = 10,
        poll_interval: float = 0.5,
        retry_timeout: float = 30.0,
        lock_timeout: float = 30.0,
        create: bool = True,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(clock)
        if not isinstance(conninfo, str):
            raise TypeError(f"conninfo must be a str, not {type(conninfo).__name__}")
        self.schema = check_schema(schema)
        self.location = postgres_location(conninfo, self.schema)
        self.poll_interval = poll_interval
        self._conninfo = conninfo
        self._retry_timeout = retry_timeout
        self._lock_timeout = lock_timeout
        self._sql = _Statements(self.schema)
        self._create = create
        self._read_only = False  # a standby, a read-only default, or no INSERT privilege: found by _prepare
        self._chained = True  # False only for a version-1 store that could not be upgraded (read-only)
        self._identity = self._run(self._prepare, connect=self._connect_directly, retry=False)
        self._pool: psycopg_pool.ConnectionPool[_Connection] = psycopg_pool.ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            name=f"acp-registry {self.schema}",
            timeout=retry_timeout,
            open=True,
        )
        self._group: GroupCommit[_Unit, list[list[int]]] = GroupCommit(self._commit_group)
        self._listener: Listener | None = None  # started by the first subscription that waits
        self._listener_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, *, create: bool = True, clock: Clock | None = None) -> PostgresStore:
        """Open the store a ``postgresql://`` URL names (see the module's docstring for its options)."""
        conninfo, schema = split_postgres_url(url)
        return cls(conninfo, schema=schema, create=create, clock=clock)

    @property
    def read_only(self) -> bool:
        return self._read_only

    def __repr__(self) -> str:
        return f"PostgresStore({self.location!r})"

    # -- opening --------------------------------------------------------------------------------------

    def _connect_directly(self, timeout: float) -> _Connection:
        # Opening does not go through the pool: a wrong host or password is reported at once, in libpq's words.
        return psycopg.connect(self._conninfo, autocommit=True)

    def _configure(self, conn: _Connection) -> None:
        # A server or URL default of another isolation level would break position assignment (see _commit_once).
        conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{round(self._lock_timeout * 1000)}ms",))

    def _prepare(self, conn: _Connection) -> StoreIdentity:
        """Create the schema on first use, once, under a lock, or upgrade an older one in place; or check that it
        is ours and not newer."""
        state, version = self._inspect(conn)
        self._read_only = bool(_one(conn.execute(self._sql.read_only, (state == "ready",)))[0])
        if state == "ready" and (version == SCHEMA_VERSION or self._read_only):
            self._chained = version >= CHAIN_SINCE
            return identity_from_meta(dict(conn.execute(self._sql.select_meta).fetchall()), self.location)
        if state != "ready" and (not self._create or self._read_only):
            why = "the server or this user is read-only" if self._read_only else "opened only to read"
            raise StoreError(
                f"{self.location}: no store in schema {self.schema!r} ({why}; a store is created only by an "
                "opener that writes)"
            )
        with conn.transaction():
            conn.execute(self._sql.lock, (_lock_key("create", self.schema),))
            state, version = self._inspect(conn)  # another process may have created it while we waited
            if state != "ready":
                if state == "missing":
                    conn.execute(self._sql.create_schema)
                for statement in self._sql.create_tables:
                    conn.execute(statement)
                conn.cursor().executemany(
                    self._sql.insert_meta, [("schema_version", str(SCHEMA_VERSION).encode()), *new_meta()]
                )
            elif version < CHAIN_SINCE:
                self._add_chain(conn)
        return identity_from_meta(dict(conn.execute(self._sql.select_meta).fetchall()), self.location)

    def _add_chain(self, conn: _Connection) -> None:
        """Version 1 to 2: every record gets its link, in position order, inside the caller's transaction and
        under the append lock (no append interleaves; an interrupted upgrade leaves a version-1 store)."""
        conn.execute(self._sql.lock, (self._sql.append_key,))
        conn.execute(self._sql.add_chain)
        previous, after = GENESIS, 0
        while True:
            rows = conn.execute(self._sql.read_rows, (after, 10_000), binary=True).fetchall()
            if not rows:
                break
            chain = links(previous, [(p, s, v, i.bytes, t, d) for p, s, v, i, t, d in rows])
            conn.execute(self._sql.set_chain, ([r[0] for r in rows], chain))
            previous, after = chain[-1], rows[-1][0]
        conn.execute(self._sql.set_version, (str(SCHEMA_VERSION).encode(),))

    def _inspect(self, conn: _Connection) -> tuple[Literal["missing", "empty", "ready"], int]:
        """The schema's state and version; a schema that is not ours, or newer, raises (and is left untouched)."""
        exists = conn.execute("SELECT oid FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone()
        if exists is None:
            return "missing", 0
        relations = {
            name: kind
            for name, kind in conn.execute(
                "SELECT relname, relkind FROM pg_class WHERE relnamespace = %s", (exists[0],)
            ).fetchall()
        }
        if not relations:
            return "empty", 0
        if relations.get("registry_meta") != "r" or self._meta_columns(conn) != [("key", "text"), ("value", "bytea")]:
            tables = sorted(name for name, kind in relations.items() if kind in ("r", "p", "v", "m", "f"))
            raise StoreFormatError(
                self.location,
                f"schema {self.schema!r} is not an acp-session-registry store (it holds {', '.join(tables[:8])}"
                f"{'...' if len(tables) > 8 else ''}); left untouched",
            )
        row = conn.execute(self._sql.select_version).fetchone()
        try:
            version = int(bytes(row[0]).decode("ascii")) if row else 0
        except ValueError:
            version = 0
        if version < 1:
            raise StoreFormatError(self.location, "registry_meta holds no valid schema_version; left untouched")
        if version > SCHEMA_VERSION:
            raise StoreFormatError(
                self.location,
                f"written by a newer schema (version {version}); this version of acp-session-registry reads up to "
                f"version {SCHEMA_VERSION}. Upgrade it; the schema was left untouched",
            )
        missing = [name for name in _TABLES if relations.get(name) != "r"]
        if missing:
            raise StoreFormatError(self.location, f"the store is damaged: table {', '.join(missing)} is missing")
        return "ready", version

    def _meta_columns(self, conn: _Connection) -> list[tuple[str, str]]:
        return [
            (name, kind)
            for name, kind in conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
                " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                (f'"{self.schema}".registry_meta',),
            ).fetchall()
        ]

    # -- writing --------------------------------------------------------------------------------------

    def _append(
        self, session_id: str, events: list[Event], expected_version: int, event_ids: list[uuid.UUID]
    ) -> list[int]:
        request = PreparedAppend(session_id, events, expected_version, event_ids)
        return self._group.submit([(request, [encode_event(e) for e in events])])[0]

    def _append_batch(self, requests: list[PreparedAppend]) -> list[list[int]]:
        return self._group.submit([(r, [encode_event(e) for e in r.events]) for r in requests])

    def _commit_group(self, units: list[_Unit]) -> list[list[list[int]] | BaseException]:
        # Safe to run again after a lost connection: if the first attempt committed, its ids are stored and the
        # retry returns their positions.
        if len(units) == 1 and len(units[0]) == 1:
            request, blobs = units[0][0]
            args = (request.session_id, request.events, request.expected_version, request.event_ids, blobs)
            return [[self._run(lambda conn: self._append_alone(conn, *args))]]
        return self._run(lambda conn: self._commit_once(conn, units))

    def _append_alone(
        self,
        conn: _Connection,
        session_id: str,
        events: list[Event],
        expected_version: int,
        event_ids: list[uuid.UUID],
        blobs: list[bytes],
    ) -> list[int]:
        """A lone append (the common case: no other thread appending): two round trips, optimistic about ids
        (a duplicate id shows as a unique violation, and only then are the stored ids looked up)."""
        conflict: ConcurrencyError | None = None
        positions: list[int] = []
        try:
            # Two round trips: the pipeline sends BEGIN, the lock and the look-up together, then the writes, the
            # NOTIFY and COMMIT together.
            with conn.pipeline(), conn.transaction():
                # READ COMMITTED: the look-up's snapshot is taken after the lock is granted, so it sees every
                # append committed before; positions are therefore assigned and committed in one order.
                conn.execute(self._sql.lock, (self._sql.append_key,))
                head, previous, next_stream, stream, actual = _one(
                    conn.execute(self._sql.tip_and_stream, (session_id,), binary=True)
                )
                actual = actual or 0
                if expected_version != ANY and expected_version != actual:
                    conflict = ConcurrencyError(session_id, expected_version, actual)
                    raise psycopg.Rollback
                last = actual + len(events)
                positions = list(range(head + 1, head + 1 + len(events)))
                if stream is None:
                    stream = next_stream
                    conn.execute(self._sql.insert_stream, (session_id, stream, last))
                else:
                    conn.execute(self._sql.update_stream, (last, session_id))
                at = self._clock()
                chain = links(
                    previous or GENESIS,
                    [
                        (position, session_id, actual + n, event_id.bytes, at, blob)
                        for n, (position, event_id, blob) in enumerate(zip(positions, event_ids, blobs, strict=True), 1)
                    ],
                )
                conn.execute(
                    self._sql.insert_lone,
                    {
                        "head": head,
                        "stream": stream,
                        "actual": actual,
                        "at": at,
                        "session": session_id,
                        "ids": event_ids,
                        "blobs": blobs,
                        "chain": chain,
                    },
                )
                conn.execute(self._sql.notify)
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "events_event_id":
                raise
            # Some ids are stored already: a retried batch, or a conflict (below). Nothing was written.
        else:
            if conflict is None:
                return positions
        retried = self._stored_positions(conn, session_id, events, event_ids)
        if retried is not None:
            return retried
        if conflict is not None:
            raise conflict
        raise StoreError(f"{self.location}: an append collided with stored event ids that cannot be read back")

    def _stored_positions(
        self, conn: _Connection, session_id: str, events: Sequence[Event], event_ids: Sequence[uuid.UUID]
    ) -> list[int] | None:
        """Positions of a retried batch; None when none of its ids is stored."""
        rows = conn.execute(self._sql.select_ids, (list(event_ids),), binary=True).fetchall()
        found = {record.event_id: record for record in map(record_from_row, rows)}
        return retried_positions(session_id, events, event_ids, found)

    def _commit_once(self, conn: _Connection, units: list[_Unit]) -> list[list[list[int]] | BaseException]:
        """One transaction and one commit for every unit the group commit queued (``events.group_commit``); each
        unit (an append or an ``append_batch``) runs in a savepoint of its own when there are several, so a unit
        that fails writes nothing and gets its error while the others commit."""
        outcomes: list[list[list[int]] | BaseException] = []
        # The pipeline sends the statements whose results are not needed at once with the next that is.
        with conn.pipeline(), conn.transaction():
            # READ COMMITTED: the look-ups' snapshots are taken after the lock is granted, so they see every
            # append committed before; positions are therefore assigned and committed in one order.
            conn.execute(self._sql.lock, (self._sql.append_key,))
            head, previous, next_stream = _one(conn.execute(self._sql.tip, binary=True))
            tip = Tip(head, previous or GENESIS, next_stream)
            if len(units) == 1:
                outcomes.append(self._write_unit(conn, tip, units[0]))  # its error rolls back the transaction
            else:
                for unit in units:
                    mark = tip.saved()
                    try:
                        with conn.transaction():
                            outcomes.append(self._write_unit(conn, tip, unit))
                    except (StoreError, ValueError) as exc:
                        tip.restore(mark)
                        outcomes.append(exc)
            conn.execute(self._sql.notify)
        return outcomes

    def _write_unit(self, conn: _Connection, tip: Tip, unit: _Unit) -> list[list[int]]:
        """Write one unit's requests with two look-ups (stored ids, streams) and two bulk statements."""
        stored_rows = conn.execute(self._sql.select_ids, ([i for r, _ in unit for i in r.event_ids],), binary=True)
        stream_rows = conn.execute(self._sql.select_streams, (list({r.session_id for r, _ in unit}),), binary=True)
        stored = {record.event_id: record for record in map(record_from_row, stored_rows.fetchall())}
        streams: dict[str, tuple[int | None, int]] = {sid: (n, v) for sid, n, v in stream_rows.fetchall()}
        changed: dict[str, tuple[int, int]] = {}
        columns: tuple[list[object], ...] = ([], [], [], [], [], [], [], [])
        results = []
        at = self._clock()
        for request, blobs in unit:
            session_id = request.session_id
            known = {i: stored[i] for i in request.event_ids if i in stored}
            retried = retried_positions(session_id, request.events, request.event_ids, known)
            if retried is not None:
                results.append(retried)
                continue
            stream, actual = streams.get(session_id, (None, 0))
            if request.expected_version != ANY and request.expected_version != actual:
                raise ConcurrencyError(session_id, request.expected_version, actual)
            if stream is None:
                assert tip.next_stream is not None
                stream, tip.next_stream = tip.next_stream, tip.next_stream + 1
            head, count = tip.head, len(blobs)
            rows = [
                (head + n, session_id, actual + n, event_id.bytes, at, blob)
                for n, (event_id, blob) in enumerate(zip(request.event_ids, blobs, strict=True), 1)
            ]
            chain = links(tip.previous, rows)
            values: tuple[Sequence[object], ...] = (
                [head + n for n in range(1, count + 1)],
                [stream] * count,
                [actual + n for n in range(1, count + 1)],
                request.event_ids,
                [at] * count,
                [session_id] * count,
                blobs,
                chain,
            )
            for column, more in zip(columns, values, strict=True):
                column.extend(more)
            streams[session_id] = changed[session_id] = (stream, actual + count)
            tip.head, tip.previous = head + count, chain[-1]
            results.append(list(range(head + 1, head + count + 1)))
        if changed:
            conn.execute(
                self._sql.upsert_streams,
                (list(changed), [n for n, _ in changed.values()], [v for _, v in changed.values()]),
            )
            conn.execute(self._sql.insert_events, columns)
        return results

    # -- reading --------------------------------------------------------------------------------------

    def read(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        rows = self._run(lambda conn: conn.execute(self._sql.read, (after, limit), binary=True).fetchall())
        return [record_from_row(r) for r in rows]

    def read_stream(self, session_id: str, after_version: int = 0) -> list[RecordedEvent]:
        rows = self._run(
            lambda conn: conn.execute(self._sql.read_stream, (session_id, after_version), binary=True).fetchall()
        )
        return [record_from_row(r) for r in rows]

    def head(self) -> int:
        return int(self._run(lambda conn: _one(conn.execute(self._sql.head))[0]))

    def scan(self, after: int = 0, *, until: int | None = None, batch: int = 10_000) -> Iterator[LogEntry]:
        # The fold's read path: four columns in binary, one prebuilt decoder, no envelope; keyset batches, each
        # its own (retried) query, so a long fold holds no transaction open on the server.
        _check_position("after", after)
        upper = _LAST_POSITION if until is None else _check_position("until", until)
        decode = _event_decoder.decode
        while True:
            rows = self._run(functools.partial(self._scan_rows, (after, upper, batch)))
            try:
                chunk = [LogEntry(p, s, v, decode(d)) for p, s, v, d in rows]
            except (msgspec.DecodeError, TypeError, ValueError):
                chunk = [LogEntry(p, s, v, decode_event(d, p, s, v)) for p, s, v, d in rows]
            yield from chunk
            if len(chunk) < batch:
                return
            after = chunk[-1].position

    def _scan_rows(self, params: tuple[int, int, int], conn: _Connection) -> list[TupleRow]:
        return conn.execute(self._sql.scan, params, binary=True).fetchall()

    def chain_at(self, position: int) -> bytes | None:
        if position == 0:
            return GENESIS
        if not self._chained:
            return None
        row = self._run(lambda conn: conn.execute(self._sql.chain_at, (position,), binary=True).fetchone())
        return None if row is None or row[0] is None else bytes(row[0])

    def stored_records(self, after: int = 0, limit: int = 10_000) -> list[StoredRecord]:
        statement = self._sql.stored if self._chained else self._sql.read_rows
        rows = self._run(lambda conn: conn.execute(statement, (after, limit), binary=True).fetchall())
        return [StoredRecord(p, s, v, i.bytes, t, d, c[0] if c else None) for p, s, v, i, t, d, *c in rows]

    # -- the live tail -------------------------------------------------------------------------------

    def subscribe(self, after: int | None = None, *, batch: int = 1000) -> Subscription:
        subscription = super().subscribe(after, batch=batch)
        self._listen()
        return subscription

    def _wait_for_change(self, token: object, timeout: float | None) -> None:
        self._listen()
        super()._wait_for_change(token, timeout)

    def _listen(self) -> None:
        """Start the listener: a store that only appends never holds a listening connection.

        Appends committed before it listens are not missed: it rings once it does.
        """
        if self._listener is None:
            with self._listener_lock:
                if self._listener is None and not self._closed:
                    self._listener = Listener(self._conninfo, self._sql.listen, self._doorbell.ring)

    # -- closing and errors ---------------------------------------------------------------------------

    def _close(self) -> None:
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        self._pool.close()

    def run(self, operation: Callable[[_Connection], _T]) -> _T:
        """Run ``operation`` on a pooled connection (autocommit; open a transaction inside it as needed), with the
        store's retries of transient failures and its translation of psycopg's errors. For tables derived from the
        log in the same schema (the registry's read model); ``operation`` must be safe to run again."""
        return self._run(operation)

    def _run(
        self,
        operation: Callable[[_Connection], _T],
        *,
        connect: Callable[[float], contextlib.AbstractContextManager[_Connection]] | None = None,
        retry: bool = True,
    ) -> _T:
        """Run ``operation`` on a connection: the one place psycopg's errors become the library's.

        A transient failure is retried with backoff until ``retry_timeout`` has passed; ``operation`` must be safe
        to run again (reads are; an append is, since its event ids make a repeat return the original positions).
        """
        deadline = time.monotonic() + self._retry_timeout
        delay = FIRST_DELAY
        while True:
            self._check_open()
            try:
                timeout = max(deadline - time.monotonic(), 0.1)
                with (connect or self._pool.connection)(timeout) as conn:
                    return operation(conn)
            except psycopg.Error as exc:
                if self._closed:
                    raise StoreClosedError(f"{self!r} is closed") from exc
                transient = _transient(exc)
                if not retry or not transient or time.monotonic() + delay > deadline:
                    reason = str(exc).strip() or type(exc).__name__
                    if isinstance(exc, psycopg.errors.LockNotAvailable):
                        reason = f"another writer held the append lock for over {self._lock_timeout:g} s ({reason})"
                    elif transient and retry:
                        reason = f"{reason} (still failing after {self._retry_timeout:g} s of retries)"
                    raise StoreError(f"{self.location}: {reason}") from exc
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY)
            self._pool.check()  # drop the other connections the same outage broke


class _Statements:
    """Every statement, built once for one schema (identifiers quoted by psycopg, never by hand)."""

    def __init__(self, schema: str) -> None:
        def q(template: LiteralString, **names: str) -> bytes:
            identifiers = {k: sql.Identifier(v) for k, v in names.items()}
            return sql.SQL(template).format(s=sql.Identifier(schema), **identifiers).as_bytes()

        self.append_key = _lock_key("append", schema)
        # Channel names are identifiers (63 bytes at most); one shared by two schemas only wakes readers needlessly.
        channel = f"{schema}_appended"[:63]
        self.listen = q("LISTEN {channel}", channel=channel)
        self.notify = q("NOTIFY {channel}", channel=channel)
        self.create_schema = q("CREATE SCHEMA IF NOT EXISTS {s}")
        self.create_tables = [q(statement) for statement in postgres_ddl("{s}")]
        self.insert_meta = q("INSERT INTO {s}.registry_meta (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING")
        self.select_meta = q("SELECT key, value FROM {s}.registry_meta WHERE key IN ('store_id', 'secret')")
        self.select_version = q("SELECT value FROM {s}.registry_meta WHERE key = 'schema_version'")
        self.lock = b"SELECT pg_advisory_xact_lock(%s)"
        self.tip = q(
            "SELECT coalesce(h.position, 0), h.chain, (SELECT coalesce(max(stream), 0) + 1 FROM {s}.streams)"
            " FROM (VALUES (1)) AS one (x)"
            " LEFT JOIN LATERAL (SELECT position, chain FROM {s}.events ORDER BY position DESC LIMIT 1) AS h ON true"
        )
        self.tip_and_stream = q(
            "SELECT coalesce(h.position, 0), h.chain, (SELECT coalesce(max(stream), 0) + 1 FROM {s}.streams),"
            " st.stream, st.version FROM (VALUES (1)) AS one (x)"
            " LEFT JOIN LATERAL (SELECT position, chain FROM {s}.events ORDER BY position DESC LIMIT 1) AS h ON true"
            " LEFT JOIN {s}.streams AS st ON st.session_id = %s"
        )
        self.insert_stream = q("INSERT INTO {s}.streams (session_id, stream, version) VALUES (%s, %s, %s)")
        self.update_stream = q("UPDATE {s}.streams SET version = %s WHERE session_id = %s")
        self.insert_lone = q(
            "INSERT INTO {s}.events (position, stream, version, event_id, recorded_at, session_id, data, chain)"
            " SELECT %(head)s::bigint + n, %(stream)s::bigint, %(actual)s::integer + n, id, %(at)s::bigint,"
            " %(session)s, data, chain"
            " FROM unnest(%(ids)b::uuid[], %(blobs)b::bytea[], %(chain)b::bytea[])"
            " WITH ORDINALITY AS batch (id, data, chain, n)"
        )
        self.select_streams = q("SELECT session_id, stream, version FROM {s}.streams WHERE session_id = ANY(%b)")
        self.upsert_streams = q(
            "INSERT INTO {s}.streams (session_id, stream, version)"
            " SELECT * FROM unnest(%b::text[], %b::bigint[], %b::integer[])"
            " ON CONFLICT (session_id) DO UPDATE SET version = EXCLUDED.version"
        )
        self.insert_events = q(
            "INSERT INTO {s}.events (position, stream, version, event_id, recorded_at, session_id, data, chain)"
            " SELECT * FROM unnest(%b::bigint[], %b::bigint[], %b::integer[], %b::uuid[], %b::bigint[], %b::text[],"
            " %b::bytea[], %b::bytea[])"
        )
        self.read_only = q(
            "SELECT pg_is_in_recovery() OR current_setting('default_transaction_read_only') = 'on'"
            " OR (%s AND NOT has_table_privilege(current_user, "
            + f"'{schema}.events'"  # checked name: a lowercase identifier (check_schema)
            + ", 'INSERT'))"
        )
        self.add_chain = q("ALTER TABLE {s}.events ADD COLUMN IF NOT EXISTS chain bytea")
        self.read_rows = q(f"SELECT {RECORD_COLUMNS} FROM {{s}}.events WHERE position > %s ORDER BY position LIMIT %s")
        self.set_chain = q(
            "UPDATE {s}.events AS e SET chain = u.chain FROM unnest(%b::bigint[], %b::bytea[]) AS u (position, chain)"
            " WHERE e.position = u.position"
        )
        self.set_version = q("UPDATE {s}.registry_meta SET value = %s WHERE key = 'schema_version'")
        self.scan = q(
            "SELECT position, session_id, version, data FROM {s}.events WHERE position > %s AND position <= %s"
            " ORDER BY position LIMIT %s"
        )
        self.chain_at = q("SELECT chain FROM {s}.events WHERE position = %s")
        self.stored = q(
            f"SELECT {RECORD_COLUMNS}, chain FROM {{s}}.events WHERE position > %s ORDER BY position LIMIT %s"
        )
        self.select_ids = q(f"SELECT {RECORD_COLUMNS} FROM {{s}}.events WHERE event_id = ANY(%b)")
        self.read = q(f"SELECT {RECORD_COLUMNS} FROM {{s}}.events WHERE position > %s ORDER BY position LIMIT %s")
        self.read_stream = q(
            "SELECT e.position, e.session_id, e.version, e.event_id, e.recorded_at, e.data"
            " FROM {s}.streams AS s JOIN {s}.events AS e ON e.stream = s.stream"
            " WHERE s.session_id = %s AND e.version > %s ORDER BY e.version"
        )
        self.head = q("SELECT coalesce(max(position), 0) FROM {s}.events")


def _one(cursor: psycopg.Cursor[TupleRow]) -> TupleRow:
    row = cursor.fetchone()
    if row is None:
        raise StoreError("a query that always returns a row returned none")
    return row


def _transient(exc: psycopg.Error) -> bool:
    """A failure after which the same operation may well succeed: the connection or the server went away."""
    if isinstance(exc, psycopg_pool.PoolClosed):
        return False
    if exc.sqlstate is None:
        return isinstance(exc, psycopg.OperationalError)
    return exc.sqlstate.startswith("08") or exc.sqlstate in _TRANSIENT_STATES


def _lock_key(purpose: str, schema: str) -> int:
    """An advisory lock key (bigint) for one purpose in one schema; advisory locks are per database already."""
    digest = hashlib.blake2b(f"acp-session-registry/{purpose}/{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
