"""The PostgreSQL store's SQL, built once per schema (identifiers quoted by psycopg, never by hand), and the small
helpers every part of the store shares: the advisory lock keys, which failures are worth a retry."""

from __future__ import annotations

import hashlib
from typing import Final, LiteralString

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.rows import TupleRow

from events.errors import StoreError
from events.schema import FENCE_MESSAGE, POSTGRES_SCHEMA_VERSION, RECORD_COLUMNS, postgres_ddl, table

__all__ = ["LINK", "Statements", "lock_key", "one", "transient"]

# Failures after which running the same operation again is worth it: the connection broke (class 08, or no
# SQLSTATE at all), the server is shutting down or starting up, too many connections, a rolled-back transaction.
_TRANSIENT_STATES: Final = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})


LINK: Final = (
    "substring(sha256(previous || int8send(position) || int4send(version) || uuid_send(event_id) || int8send(at)"
    " || int4send(octet_length(convert_to(session, 'UTF8'))) || convert_to(session, 'UTF8') || data) for 16)"
)
"""``events.chain.sql_link`` in SQL, over columns named ``previous`` (the link before), ``position``, ``version``,
``event_id``, ``at``, ``session`` and ``data``."""


class Statements:
    """Every statement, built once for one schema (identifiers quoted by psycopg, never by hand)."""

    def __init__(self, schema: str) -> None:
        def q(template: LiteralString, **names: str) -> bytes:
            identifiers = {k: sql.Identifier(v) for k, v in names.items()}
            return sql.SQL(template).format(s=sql.Identifier(schema), **identifiers).as_bytes()

        self.append_key = lock_key("append", schema)
        # Channel names are identifiers (63 bytes at most); one shared by two schemas only wakes readers needlessly.
        channel = f"{schema}_appended"[:63]
        self.listen = q("LISTEN {channel}", channel=channel)
        # An append's first statement: the lock, and its NOTIFY (sent at COMMIT, and only if it commits).
        self.lock_and_notify = (
            sql.SQL("SELECT pg_advisory_xact_lock(%s), pg_notify({channel}, '')")
            .format(channel=sql.Literal(channel))
            .as_bytes()
        )
        self.create_schema = q("CREATE SCHEMA IF NOT EXISTS {s}")
        self.create_tables = [q(statement) for statement in postgres_ddl("{s}")]
        self.insert_meta = q("INSERT INTO {s}.registry_meta (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING")
        self.select_meta = q("SELECT key, value FROM {s}.registry_meta WHERE key IN ('store_id', 'secret')")
        self.select_sql_link_from = q("SELECT value FROM {s}.registry_meta WHERE key = 'sql_link_from'")
        # Version 2 to 3: the links the server computes start after the head (the append lock is held).
        self.start_sql_link = q(
            "INSERT INTO {s}.registry_meta (key, value)"
            " SELECT 'sql_link_from', convert_to((coalesce(max(position), 0) + 1)::text, 'UTF8') FROM {s}.events"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )
        self.select_version = q("SELECT value FROM {s}.registry_meta WHERE key = 'schema_version'")
        self.lock = b"SELECT pg_advisory_xact_lock(%s)"
        self.commit_unflushed = b"SET LOCAL synchronous_commit = off"
        # A transactional logical message: the smallest write that gets the transaction an xid and a WAL record,
        # so that its commit waits for the flush (a transaction that wrote no WAL commits without one).
        self.flush = b"SELECT pg_logical_emit_message(true, 'acp-registry', '')"
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
        # A lone append's events after %(head)s, with its stream's row (its version moved to %(last)s) in the same
        # statement; one event (most appends) as scalars: arrays of one cost more client CPU an append (psycopg
        # dumps arrays in Python: docs/benchmarks.md).
        events_after = (
            " INSERT INTO {s}.events (position, stream, version, event_id, recorded_at, session_id, data, chain)"
            " SELECT %(head)s::bigint + n, %(stream)s::bigint, %(actual)s::integer + n, id, %(at)s::bigint,"
            " %(session)s, data, chain"
            " FROM unnest(%(ids)b::uuid[], %(blobs)b::bytea[], %(chain)b::bytea[])"
            " WITH ORDINALITY AS batch (id, data, chain, n)"
        )
        one_event_after = (
            " INSERT INTO {s}.events (position, stream, version, event_id, recorded_at, session_id, data, chain)"
            " VALUES (%(head)s::bigint + 1, %(stream)s, %(actual)s::integer + 1, %(id)b, %(at)s, %(session)s,"
            " %(blob)b, %(link)b)"
        )
        update_stream = "WITH st AS (UPDATE {s}.streams SET version = %(last)s WHERE session_id = %(session)s)"
        new_stream = (
            "WITH st AS (INSERT INTO {s}.streams (session_id, stream, version)"
            " VALUES (%(session)s, %(stream)s, %(last)s))"
        )
        # By (new stream, one event).
        self.insert_lone = {
            (False, False): q(update_stream + events_after),
            (False, True): q(update_stream + one_event_after),
            (True, False): q(new_stream + events_after),
            (True, True): q(new_stream + one_event_after),
        }
        # The same, gated on the commit hooks' guards (``ok``) and with their writes (``known``): one statement for
        # the events, the stream and the hooks' writes where there were three. By (new stream, one event).
        stream_gated = {
            False: "st AS (UPDATE {s}.streams SET version = %(last)s WHERE session_id = %(session)s"
            " AND (SELECT ok FROM ok))",
            True: "st AS (INSERT INTO {s}.streams (session_id, stream, version)"
            " SELECT %(session)s::text, %(stream)s::bigint, %(last)s::integer FROM ok WHERE ok.ok)",
        }
        events_gated = {
            False: "ev AS (INSERT INTO {s}.events"
            " (position, stream, version, event_id, recorded_at, session_id, data, chain)"
            " SELECT %(head)s::bigint + n, %(stream)s::bigint, %(actual)s::integer + n, id, %(at)s::bigint,"
            " %(session)s::text, data, chain"
            " FROM ok, unnest(%(ids)b::uuid[], %(blobs)b::bytea[], %(chain)b::bytea[])"
            " WITH ORDINALITY AS batch (id, data, chain, n) WHERE ok.ok)",
            True: "ev AS (INSERT INTO {s}.events"
            " (position, stream, version, event_id, recorded_at, session_id, data, chain)"
            " SELECT %(head)s::bigint + 1, %(stream)s::bigint, %(actual)s::integer + 1, %(id)b::uuid, %(at)s::bigint,"
            " %(session)s::text, %(blob)b::bytea, %(link)b::bytea FROM ok WHERE ok.ok)",
        }
        self._known = {
            (new, one): (q("WITH ok AS (SELECT "), q(" AS ok), " + stream_gated[new] + ", " + events_gated[one]))
            for new in (False, True)
            for one in (False, True)
        }
        self._knowns: dict[tuple[bool, bool, tuple[tuple[bytes, bytes], ...]], bytes] = {}
        # A lone event appended where the server finds the log's end (the append lock held): its position, stream,
        # version and link computed here, the expected version checked here - one exchange whoever appended last.
        # Answers the position (NULL when nothing was written: the expected version did not match, or a commit hook's
        # guard was false), the guard's value, and what the next append needs to go from the log's end it knows:
        # the link, the stream and version written, and the next new stream's number (as of before this statement);
        # a commit hook's part is written in by ``at_end``.
        self._at_end = (
            q(
                "WITH tip AS (SELECT coalesce(h.position, 0) AS position, coalesce(h.chain, %(genesis)b) AS chain"
                " FROM (VALUES (1)) AS one (x)"
                " LEFT JOIN LATERAL (SELECT position, chain FROM {s}.events ORDER BY position DESC LIMIT 1) AS h"
                " ON true),"
                " cur AS (SELECT coalesce(st.stream, (SELECT coalesce(max(stream), 0) + 1 FROM {s}.streams)) AS stream,"
                " coalesce(st.version, 0) AS version FROM (VALUES (1)) AS one (x)"
                " LEFT JOIN {s}.streams AS st ON st.session_id = %(session)s),"
                " ok AS (SELECT "
            ),
            q(
                " AS ok FROM tip, cur),"
                " r AS (SELECT tip.position + 1 AS position, tip.chain AS previous, cur.stream,"
                " cur.version + 1 AS version, %(id)b::uuid AS event_id, %(at)s::bigint AS at,"
                " %(session)s::text AS session, %(blob)b::bytea AS data FROM tip, cur, ok"
                " WHERE ok.ok AND (%(expected)s::integer < 0 OR cur.version = %(expected)s::integer)),"
                " ev AS (INSERT INTO {s}.events"
                " (position, stream, version, event_id, recorded_at, session_id, data, chain)"
                " SELECT position, stream, version, event_id, at, session, data, " + LINK + " FROM r"
                " RETURNING position, chain),"
                " st AS (INSERT INTO {s}.streams (session_id, stream, version) SELECT session, stream, version FROM r"
                " ON CONFLICT (session_id) DO UPDATE SET version = EXCLUDED.version)"
            ),
            q(
                " SELECT (SELECT position FROM ev), (SELECT ok FROM ok), (SELECT chain FROM ev),"
                " (SELECT stream FROM r), (SELECT version FROM r),"
                " (SELECT coalesce(max(stream), 0) + 1 FROM {s}.streams)"
            ),
        )
        self._at_ends: dict[tuple[tuple[bytes, bytes, bytes], ...], bytes] = {}
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
        # -- the messages kept beside the log
        self.insert_messages = q(
            "INSERT INTO {s}.messages (position, seq, stream, role, at, body)"
            " SELECT * FROM unnest(%b::bigint[], %b::integer[], %b::bigint[], %b::text[], %b::bigint[], %b::bytea[])"
        )
        self.messages = q(
            "SELECT m.position, m.seq, m.role, m.at, m.body FROM {s}.streams AS s"
            " JOIN {s}.messages AS m ON m.stream = s.stream AND m.position <= %s"
            " WHERE s.session_id = %s ORDER BY m.position, m.seq"
        )
        self.messages_at = q(
            "SELECT m.position, m.seq, m.role, m.at, m.body, s.session_id"
            " FROM unnest(%b::bigint[], %b::integer[]) AS k (position, seq)"
            " JOIN {s}.messages AS m ON m.position = k.position AND m.seq = k.seq"
            " JOIN {s}.streams AS s ON s.stream = m.stream"
        )
        self.stored_messages = q(
            "WITH last AS (SELECT max(position) AS position FROM (SELECT position FROM {s}.messages"
            " WHERE position > %s ORDER BY position, seq LIMIT %s) AS first)"
            " SELECT m.position, s.session_id, m.seq, m.role, m.at, m.body FROM last, {s}.messages AS m"
            " JOIN {s}.streams AS s ON s.stream = m.stream"
            " WHERE m.position > %s AND m.position <= last.position ORDER BY m.position, m.seq"
        )
        self.stream_of = q("SELECT stream FROM {s}.streams WHERE session_id = %s")
        self.stream_data = q("SELECT data FROM {s}.events WHERE stream = %s ORDER BY version DESC")
        self.stream_messages = q(
            "SELECT position, seq, role, at, body FROM {s}.messages WHERE stream = %s ORDER BY position, seq"
        )
        self.delete_messages = q("DELETE FROM {s}.messages WHERE stream = %s RETURNING tableoid::regclass::text")
        # -- format 4: the messages table, and the fence that stops writers of an older format
        self.create_messages = [q(statement) for statement in postgres_ddl("{s}", (table("messages"),))]
        self.add_writer = q("ALTER TABLE {s}.events ADD COLUMN IF NOT EXISTS writer integer")
        message = FENCE_MESSAGE.replace("'", "''")
        self.fence = [
            q(
                "CREATE OR REPLACE FUNCTION {s}.events_writer_fence() RETURNS trigger LANGUAGE plpgsql AS $fence$"
                " BEGIN IF coalesce(nullif(current_setting('acp_registry.writer', true), ''), '0')::integer < "
                + str(POSTGRES_SCHEMA_VERSION)
                + f" THEN RAISE EXCEPTION '{message}' USING ERRCODE = 'raise_exception'; END IF; RETURN NULL; END"
                " $fence$"
            ),
            q("DROP TRIGGER IF EXISTS events_writer_fence ON {s}.events"),
            q(
                "CREATE TRIGGER events_writer_fence BEFORE INSERT ON {s}.events"
                " FOR EACH STATEMENT EXECUTE FUNCTION {s}.events_writer_fence()"
            ),
        ]
        self.set_writer = f"SELECT set_config('acp_registry.writer', '{POSTGRES_SCHEMA_VERSION}', false)".encode()

    def at_end(self, parts: tuple[tuple[bytes, bytes, bytes], ...]) -> bytes:
        """The one-statement append of a lone event with commit hooks' parts in it, each a
        (guard, writes, answer) of ``events.postgres_hooks.AtEnd``: the guards joined by AND (the event is written
        only when all hold), the writes as CTEs after the store's own, the answers as columns after the guard's value.
        Built once per parts."""
        statement = self._at_ends.get(parts)
        if statement is None:
            head, body, answers = self._at_end
            guard = b" AND ".join(b"(" + part[0] + b")" for part in parts) or b"true"
            writes = b"".join(b", " + part[1] for part in parts)
            statement = head + guard + body + writes + answers + b"".join(b", " + part[2] for part in parts)
            self._at_ends[parts] = statement
        return statement

    def known(self, new: bool, single: bool, parts: tuple[tuple[bytes, bytes], ...]) -> bytes:
        """A lone append's insert from the log's end its process knows (``insert_lone``: on a new stream or not, one
        event or several) with commit hooks' parts in it, each a (guard, writes) of ``events.postgres_hooks.KnownPart``:
        nothing is written unless every guard holds, which the statement answers. Built once per parts."""
        key = (new, single, parts)
        statement = self._knowns.get(key)
        if statement is None:
            head, body = self._known[(new, single)]
            guard = b" AND ".join(b"(" + part[0] + b")" for part in parts) or b"true"
            writes = b"".join(b", " + part[1] for part in parts)
            statement = self._knowns[key] = head + guard + body + writes + b" SELECT ok FROM ok"
        return statement


def one(cursor: psycopg.Cursor[TupleRow]) -> TupleRow:
    row = cursor.fetchone()
    if row is None:
        raise StoreError("a query that always returns a row returned none")
    return row


def transient(exc: psycopg.Error) -> bool:
    """A failure after which the same operation may well succeed: the connection or the server went away."""
    if isinstance(exc, psycopg_pool.PoolClosed):
        return False
    if exc.sqlstate is None:
        return isinstance(exc, psycopg.OperationalError)
    return exc.sqlstate.startswith("08") or exc.sqlstate in _TRANSIENT_STATES


def lock_key(purpose: str, schema: str) -> int:
    """An advisory lock key (bigint) for one purpose in one schema; advisory locks are per database already."""
    digest = hashlib.blake2b(f"acp-session-registry/{purpose}/{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
