"""PostgreSQL: a store shared by any number of processes and hosts, in one schema of one database.

Writers take a transaction-level advisory lock (one key per schema) before they read the head, so positions are
assigned and committed in one order: a reader that has seen position P never later finds a committed event below
P. A position is the head + 1 under that lock; readers still ask for ``> last``, never ``last + 1``. The write
path, and the commit hooks that keep the read model in the append's own transaction, are ``events.postgres_write``;
the SQL is ``events.postgres_sql``.

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
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Literal, TypeVar

import msgspec
import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from events import postgres_content
from events.chain import GENESIS, ChainRule, StoredRecord, links
from events.codec import decode_event
from events.content import KeptMessage, StoredMessage
from events.errors import StoreClosedError, StoreError, StoreFormatError
from events.group_commit import GroupCommit, GroupCommitStore
from events.listener import FIRST_DELAY, MAX_DELAY, Listener
from events.logger import Logger
from events.model import Event, LogEntry, RecordedEvent
from events.postgres_commit import CommitMode
from events.postgres_sql import Statements, lock_key, one, transient
from events.postgres_write import CommitHook, EraseHook, Unit, Writer
from events.schema import (
    CHAIN_SINCE,
    POSTGRES_CONTENT_SINCE,
    POSTGRES_SCHEMA_VERSION,
    SQL_LINK_SINCE,
    TABLES,
    identity_from_meta,
    new_meta,
)
from events.store import (
    Clock,
    PreparedAppend,
    StoreIdentity,
    _check_position,
    record_from_row,
)
from events.subscription import Subscription
from events.urls import DEFAULT_SCHEMA, check_schema, postgres_location, split_postgres_url

__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "PostgresStore"]

SCHEMA_VERSION: Final = POSTGRES_SCHEMA_VERSION

_Connection = psycopg.Connection[TupleRow]
_T = TypeVar("_T")

_LAST_POSITION: Final = 2**63 - 1
_event_decoder = msgspec.msgpack.Decoder(Event)
_TABLES = tuple(table.name for table in TABLES)
log = Logger("events.postgres")


class PostgresStore(GroupCommitStore):
    """An event store in one schema of a PostgreSQL database; any number of processes may append at once.

    ``conninfo`` is a libpq connection string or URL; ``create`` makes the store's tables (and schema) when there
    are none, False for callers that only read; ``pool_size`` caps this store's pooled connections (a
    subscribing store holds one more, for LISTEN); ``poll_interval`` is how often subscriptions look at the log
    when no notification comes; ``retry_timeout`` bounds the retries of transient failures; an append waits at
    most ``lock_timeout`` seconds for another writer's transaction; ``commit`` is ``in-lock`` (an append's COMMIT
    waits for its WAL flush holding the append lock) or ``flush-barrier`` (it does not, the flush is awaited after
    the lock is released: see ``events.postgres_write`` for what that trades).
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
        commit: CommitMode = "in-lock",
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
        self._sql = Statements(self.schema)
        self._writer = Writer(self._sql, self._clock, self.location, commit)
        self._hooks_lock = threading.Lock()
        self._create = create
        self._read_only = False  # a standby, a read-only default, or no INSERT privilege: found by _prepare
        self._chained = True  # False only for a version-1 store that could not be upgraded (read-only)
        self._kept = True  # False for a schema older than version 4 opened read-only (no messages table)
        self._erase_hooks: tuple[EraseHook, ...] = ()
        self._rule = ChainRule()  # where the links the server computes start (found by _prepare)
        self._identity = self._run(self._prepare, connect=self._connect_directly, retry=False)
        self._writer.rule = self._rule
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
        self._group: GroupCommit[Unit, list[list[int]]] = GroupCommit(self._commit_group)
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

    @property
    def chain_rule(self) -> ChainRule:
        return self._rule

    @property
    def append_lock_key(self) -> int:
        """The transaction-level advisory lock every append of this store holds from reading the head to COMMIT:
        a commit hook's own work that must not overlap an append (a short catch-up of the read model) takes it
        too."""
        return self._sql.append_key

    def __repr__(self) -> str:
        return f"PostgresStore({self.location!r})"

    # -- opening --------------------------------------------------------------------------------------

    def _connect_directly(self, timeout: float) -> _Connection:
        # Opening does not go through the pool: a wrong host or password is reported at once, in libpq's words; a
        # server that takes the connection and never answers, within ``timeout`` (at least libpq's 2 s), as the
        # pool's connections are - libpq alone waits for ever. A connect_timeout the URL gives is its own.
        if "connect_timeout" in conninfo_to_dict(self._conninfo):
            return psycopg.connect(self._conninfo, autocommit=True)
        return psycopg.connect(self._conninfo, autocommit=True, connect_timeout=max(2, math.ceil(timeout)))

    def _configure(self, conn: _Connection) -> None:
        # A server or URL default of another isolation level would break position assignment (see _commit_once).
        conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{round(self._lock_timeout * 1000)}ms",))
        conn.execute(self._sql.set_writer)  # the format this process writes: what the fence of a newer one reads

    def _prepare(self, conn: _Connection) -> StoreIdentity:
        """Create the schema on first use, once, under a lock, or upgrade an older one in place; or check that it
        is ours and not newer."""
        state, version = self._inspect(conn)
        self._read_only = bool(one(conn.execute(self._sql.read_only, (state == "ready",)))[0])
        if state == "ready" and (version == SCHEMA_VERSION or self._read_only):
            self._chained = version >= CHAIN_SINCE
            self._kept = version >= POSTGRES_CONTENT_SINCE
            self._rule = self._chain_rule(conn, version)
            return identity_from_meta(dict(conn.execute(self._sql.select_meta).fetchall()), self.location)
        if state != "ready" and (not self._create or self._read_only):
            why = "the server or this user is read-only" if self._read_only else "opened only to read"
            raise StoreError(
                f"{self.location}: no store in schema {self.schema!r} ({why}; a store is created only by an "
                "opener that writes)"
            )
        with conn.transaction():
            conn.execute(self._sql.lock, (lock_key("create", self.schema),))
            state, version = self._inspect(conn)  # another process may have created it while we waited
            if state != "ready":
                if state == "missing":
                    conn.execute(self._sql.create_schema)
                for statement in self._sql.create_tables:
                    conn.execute(statement)
                conn.cursor().executemany(
                    self._sql.insert_meta,
                    [("schema_version", str(SCHEMA_VERSION).encode()), ("sql_link_from", b"1"), *new_meta()],
                )
                for statement in self._sql.fence:
                    conn.execute(statement)
            elif version < SCHEMA_VERSION:
                conn.execute(self._sql.lock, (self._sql.append_key,))  # no append interleaves
                if version < CHAIN_SINCE:
                    self._add_chain(conn)
                if version < SQL_LINK_SINCE:
                    conn.execute(self._sql.start_sql_link)
                if version < POSTGRES_CONTENT_SINCE:
                    log.warning("%s: upgrading the schema to version %d (conversations)", self.location, 4)
                    conn.execute(self._sql.add_writer)
                    for statement in self._sql.create_messages:
                        conn.execute(statement)
                for statement in self._sql.fence:
                    conn.execute(statement)
                conn.execute(self._sql.set_version, (str(SCHEMA_VERSION).encode(),))
            self._rule = self._chain_rule(conn, SCHEMA_VERSION)
        return identity_from_meta(dict(conn.execute(self._sql.select_meta).fetchall()), self.location)

    def _chain_rule(self, conn: _Connection, version: int) -> ChainRule:
        """Where the links the server computes start: nowhere before version 3, else ``sql_link_from``."""
        if version < SQL_LINK_SINCE:
            return ChainRule()
        start = _meta_number(conn.execute(self._sql.select_sql_link_from).fetchone())
        if start < 1:
            raise StoreFormatError(self.location, "registry_meta holds no valid sql_link_from; left untouched")
        return ChainRule(start)

    def _add_chain(self, conn: _Connection) -> None:
        """Version 1 to 2: every record gets its (version 2) link, in position order, inside the caller's
        transaction and under the append lock (an interrupted upgrade leaves a version-1 store)."""
        conn.execute(self._sql.add_chain)
        previous, after = GENESIS, 0
        while True:
            rows = conn.execute(self._sql.read_rows, (after, 10_000), binary=True).fetchall()
            if not rows:
                break
            chain = links(previous, [(p, s, v, i.bytes, t, d) for p, s, v, i, t, d in rows])
            conn.execute(self._sql.set_chain, ([r[0] for r in rows], chain))
            previous, after = chain[-1], rows[-1][0]

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
        version = _meta_number(conn.execute(self._sql.select_version).fetchone())
        if version < 1:
            raise StoreFormatError(self.location, "registry_meta holds no valid schema_version; left untouched")
        if version > SCHEMA_VERSION:
            raise StoreFormatError(
                self.location,
                f"written by a newer schema (version {version}); this version of acp-session-registry reads up to "
                f"version {SCHEMA_VERSION}. Upgrade it; the schema was left untouched",
            )
        needed = [name for name in _TABLES if name != "messages" or version >= POSTGRES_CONTENT_SINCE]
        missing = [name for name in needed if relations.get(name) not in ("r", "p")]  # p: partitioned (messages)
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

    def _commit_group(self, units: list[Unit]) -> list[list[list[int]] | BaseException]:
        # Safe to run again after a lost connection: if the first attempt committed, its ids are stored and the
        # retry returns their positions.
        if len(units) == 1 and len(units[0]) == 1:
            request, blobs = units[0][0]
            return [[self._run(lambda conn: self._append_alone(conn, request, blobs))]]
        return self._run(lambda conn: self._commit_once(conn, units))

    def _append_alone(self, conn: _Connection, request: PreparedAppend, blobs: list[bytes]) -> list[int]:
        return self._writer.append_alone(conn, request, blobs)

    def _commit_once(self, conn: _Connection, units: list[Unit]) -> list[list[list[int]] | BaseException]:
        return self._writer.commit_once(conn, units)

    def add_commit_hook(self, hook: CommitHook) -> Callable[[], None]:
        """Run ``hook`` in every append transaction of this store (``events.postgres_hooks.CommitHook``): tables
        derived from the log in the same schema (the registry's read model) then commit with the events, in the
        same round trips, with no second commit. Returns the remover."""
        with self._hooks_lock:
            self._writer.hooks = (*self._writer.hooks, hook)

        def remove() -> None:
            with self._hooks_lock:
                self._writer.hooks = tuple(h for h in self._writer.hooks if h is not hook)

        return remove

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
        return int(self._run(lambda conn: one(conn.execute(self._sql.head))[0]))

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

    # -- the messages kept beside the log (``events.postgres_content``) ---------------------------------

    def messages(self, session_id: str, *, until: int | None = None) -> list[KeptMessage]:
        if not self._kept:
            return []
        return self._run(functools.partial(postgres_content.messages, self._sql, session_id, until))

    def messages_at(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], KeptMessage]:
        wanted = list(keys)
        if not wanted or not self._kept:
            return {}
        return self._run(functools.partial(postgres_content.messages_at, self._sql, wanted))

    def stored_messages(self, after: int = 0, limit: int = 10_000) -> list[tuple[int, str, StoredMessage]]:
        if not self._kept:
            return []
        return self._run(functools.partial(postgres_content.stored_messages, self._sql, after, limit))

    def add_erase_hook(self, hook: EraseHook) -> Callable[[], None]:
        """Run ``hook.erasing(conn, session_id, messages)`` in every erasure's transaction, before the messages'
        rows go (an index derived from them takes them out too), and ``hook.vacuum`` after. Returns the remover."""
        with self._hooks_lock:
            self._erase_hooks = (*self._erase_hooks, hook)

        def remove() -> None:
            with self._hooks_lock:
                self._erase_hooks = tuple(h for h in self._erase_hooks if h is not hook)

        return remove

    def _erase(self, session_id: str) -> int:
        hooks, where = self._erase_hooks, (self._lock_timeout, self.location)
        return self._run(functools.partial(postgres_content.erase, self._sql, session_id, hooks, *where))

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
                passing = transient(exc)
                if not retry or not passing or time.monotonic() + delay > deadline:
                    reason = str(exc).strip() or type(exc).__name__
                    if isinstance(exc, psycopg.errors.LockNotAvailable):
                        reason = f"another writer held the append lock for over {self._lock_timeout:g} s ({reason})"
                    elif passing and retry:
                        reason = f"{reason} (still failing after {self._retry_timeout:g} s of retries)"
                    raise StoreError(f"{self.location}: {reason}") from exc
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY)
            self._pool.check()  # drop the other connections the same outage broke


def _meta_number(row: TupleRow | None) -> int:
    """A number ``registry_meta`` keeps (ASCII digits); 0 when the row is missing or holds anything else."""
    try:
        return int(bytes(row[0]).decode("ascii")) if row else 0
    except (ValueError, TypeError):
        return 0
