"""Every figure a benchmark run records, declared once: the key it has in the results JSON and the name the report
shows for it (a durable append's Latency sits under its key, its rate under ``rate_key(key)``, each with a name).
Scripts read the keys from here (``keys.FSYNC``), the report reads ``NAMES``; adding a figure is one line."""

from __future__ import annotations

from typing import Final

__all__ = [
    "BUILD",
    "CLI_LIST",
    "CLI_SHOW",
    "DIFFS_PER_S",
    "ES_BULK",
    "ES_COMMAND",
    "ES_NOTIFICATIONS",
    "ES_REPOSITORY",
    "ES_SAVE",
    "FORK_10K",
    "FSYNC",
    "FULL_FOLD",
    "JSONL_LISTING",
    "LIST",
    "LIST_ARCHIVED",
    "LIST_DEEP",
    "LIST_DEEP_CWD",
    "LIST_FIRST",
    "LIST_FIRST_CWD",
    "NAMES",
    "OURS_BATCH",
    "OURS_IMPORT",
    "OURS_LOAD",
    "OURS_READ",
    "OURS_SCAN",
    "OURS_SINGLE",
    "OURS_THREADS_1",
    "OURS_THREADS_8",
    "PAGES",
    "PAGE_FLOOR",
    "PG_APPEND",
    "PG_BUILD",
    "PG_CREATE",
    "PG_IMPORT",
    "PG_LIST",
    "PG_LIST_CHANGED",
    "PG_LOG_BYTES",
    "PG_NOTIFY",
    "PG_RAW_BYTES",
    "PG_RAW_COPY",
    "PG_RAW_FIRST",
    "PG_RAW_INSERT",
    "PG_RAW_LIST",
    "PG_RAW_NOTIFY",
    "PG_RAW_RSS",
    "PG_RAW_STDIO",
    "PG_RAW_WRITERS",
    "PG_READ_MODEL_BYTES",
    "PG_RECORD",
    "PG_SERVE_FIRST",
    "PG_SERVE_RSS",
    "PG_STDIO",
    "PG_STORE_WRITERS",
    "PG_WRITERS",
    "PG_WRITERS_CPU",
    "PG_WRITERS_WAITS",
    "RAW_INSERT",
    "RAW_SCAN",
    "RAW_SINGLE",
    "RAW_STDIO",
    "REBUILD",
    "REPLAY_HALF",
    "SERVE_FIRST",
    "SERVE_FIRST_1K",
    "SERVE_FIRST_EMPTY",
    "SERVE_FIRST_SNAPSHOT",
    "SERVE_RSS",
    "SERVE_RSS_1K",
    "STDIO_LIST",
    "STDIO_PAGE",
    "STDIO_PAGES",
    "SUBSCRIPTION",
    "WRITER_COUNTS",
    "WRITER_SUBSCRIBERS",
    "WRITE_APPEND",
    "WRITE_CREATE",
    "rate_key",
]

NAMES: Final[dict[str, str]] = {}
"""Every figure's name in the report, by key."""


def rate_key(key: str) -> str:
    return f"{key}.rate"


def _figure(key: str, name: str | None = None, *, rate: str | None = None) -> str:
    if name is not None:
        NAMES[key] = name
    if rate is not None:
        NAMES[rate_key(key)] = rate
    return key


PAGES: Final = {
    "first": "first page",
    "deep": "page 90% deep",
    "first_cwd": "first page of one cwd",
    "deep_cwd": "deep page of one cwd",
}
"""The session/list pages measured, by the suffix of their keys."""


def _pages(key: str, name: str, what: str = "") -> dict[str, str]:
    """The key of every page in ``PAGES`` (``key`` + page), named ``name`` + the page's name + ``what``."""
    return {page: _figure(key + page, f"{name}{title}{what}, p50 / p99") for page, title in PAGES.items()}


def _durable(key: str, name: str) -> str:
    """A durable write's figures: its Latency (p50 / p99 a call) under ``key``, its rate under ``rate_key(key)``."""
    return _figure(key, f"{name}, p50 / p99", rate=name)


# -- the event store and its baselines (run.py, event_log.py, baselines.py) --

FSYNC = _figure("disk.fsync", "disk: write 100 B + fsync, p50 / p99", rate="disk: write 100 B + fsync")
RAW_INSERT = _figure("raw.insert", "raw sqlite3: bulk insert (1000 sessions/tx, normal)")
RAW_SINGLE = _figure(
    "raw.single_durable", "raw sqlite3: durable single insert, p50 / p99", rate="raw sqlite3: durable single insert"
)
RAW_SCAN = _figure("raw.scan", "raw sqlite3: scan + msgspec decode")
OURS_LOAD = _figure("ours.batch_normal", "ours: batched append (1 session/tx), synchronous=normal")
OURS_BATCH = _figure(
    "ours.batch_durable",
    "ours: batched append, durable, p50 / p99 per batch",
    rate="ours: batched append (1 session/tx), durable",
)
OURS_SINGLE = _figure(
    "ours.single_durable", "ours: durable single-event append, p50 / p99", rate="ours: durable single-event append"
)
OURS_READ = _figure("ours.read", "ours: iter_events() read + decode")
OURS_SCAN = _figure("ours.scan", "ours: scan() read + decode (position, session, version, event)")
OURS_IMPORT = _figure("ours.import_batch", "ours: append_batch, 1000 sessions per call, durable (import)")
OURS_THREADS_1 = _figure("ours.threads_1", "ours: durable single-event appends, 1 thread")
OURS_THREADS_8 = _figure("ours.threads_8", "ours: durable single-event appends, 8 threads (group commit)")
ES_BULK = _figure("es.save_bulk", "eventsourcing: save 1000 aggregates per call (bulk load)")
ES_SAVE = _figure(
    "es.save_each", "eventsourcing: save per aggregate, p50 / p99", rate="eventsourcing: save per aggregate (durable)"
)
ES_COMMAND = _figure(
    "es.command_each",
    "eventsourcing: get + command + save, p50 / p99",
    rate="eventsourcing: get + command + save (durable)",
)
ES_NOTIFICATIONS = _figure("es.read_notifications", "eventsourcing: recorder read + mapper decode")
ES_REPOSITORY = _figure("es.repository_get", "eventsourcing: repository.get (sampled aggregates)")
PAGE_FLOOR = _figure("floor.page_encode", "msgspec: encode one page of 50 SessionInfo, p50 / p99")
JSONL_LISTING = _figure("jsonl.listing", "JSONL directory: first page, p50 / p99")
SUBSCRIPTION = _figure("ours.subscription_cross_process", "ours: cross-process notification, p50 / p99")

# -- the registry (registry_bench.py): Latency unless said otherwise --

# session/list in process: the first page and one reached by a cursor 90% of the way through the walk, of every
# session and of one cwd's (the pages the SQLite and PostgreSQL rows both measure, by page)
LIST: Final = _pages("registry.list_", "registry: session/list ")
LIST_FIRST, LIST_DEEP, LIST_FIRST_CWD, LIST_DEEP_CWD = LIST.values()
# session/list round trip to a running `acp-registry serve`, over its pipes
STDIO_LIST = _figure("registry.stdio_list", "registry: session/list round trip over stdio, p50 / p99")
# session/list from a warm `serve` over its pipes (first page, and one reached by a cursor 80% of the way through the
# walk), beside a plain Python stdio server doing the raw keyset query of the same rows (benchmarks/stdio_pages.py)
STDIO_PAGES: Final = {"first": "first page", "deep": "page 80% deep"}


def _stdio(key: str, name: str) -> dict[str, str]:
    """The key of each of ``STDIO_PAGES`` (``key`` + page), named by ``name`` with the page's name in it."""
    return {page: _figure(key + page, name.format(page=title)) for page, title in STDIO_PAGES.items()}


STDIO_PAGE = _stdio("registry.stdio_", "registry: session/list {page} from a warm `serve`, p50 / p99")
RAW_STDIO = _stdio("raw.stdio_", "raw stdio server: the same {page} (keyset query), p50 / p99")
# a fresh `acp-registry serve` process until its first session/list answer
SERVE_FIRST = _figure("registry.serve_first", "registry: fresh `serve` to its first session/list answer, p50 / p99")
# the same on a 1,000-session store, in the same stage
SERVE_FIRST_1K = _figure("registry.serve_first_1k", "registry: the same on a 1,000-session store, p50 / p99")
# the same on an empty store: Python's start-up and ours
SERVE_FIRST_EMPTY = _figure("registry.serve_first_empty", "registry: the same on an empty store (start-up), p50 / p99")
# the same folding in memory from the newest snapshot
SERVE_FIRST_SNAPSHOT = _figure(
    "registry.serve_first_snapshot", "registry: the same folding in memory from the newest snapshot, p50 / p99"
)
# Quantity: that process's resident memory after its first page
SERVE_RSS = _figure("registry.serve_rss", "registry: that `serve` process's RSS after the first page")
SERVE_RSS_1K = _figure("registry.serve_rss_1k", "registry: the same on a 1,000-session store")
# `acp-registry list`, the whole process
CLI_LIST = _figure("registry.cli_list", "registry: `acp-registry list`, whole process, p50 / p99")
# `acp-registry show SESSION`, the whole process
CLI_SHOW = _figure("registry.cli_show", "registry: `acp-registry show`, whole process, p50 / p99")
# Throughput: events/s of building the tables from the whole log (first open)
BUILD = _figure("registry.build", "registry: read-model tables built from the log (first open)")
# Throughput: events/s of the in-memory reference fold of the whole log
REBUILD = _figure("registry.rebuild", "registry: reference fold of the whole log (lean read path)")
# Latency (1 run): folding the whole log from its start, as replay did before
FULL_FOLD = _figure("registry.full_fold", "registry: full fold of the log from its start, once")
# Latency: `replay --at head/2`, from the nearest kept snapshot
REPLAY_HALF = _figure("registry.replay_half", "registry: replay --at head/2 from kept snapshots, p50 / p99")
# Throughput: SessionRegistry.create, durable, read model kept up
WRITE_CREATE = _figure("registry.write_create", "registry: SessionRegistry.create, durable, tables kept up")
# Throughput: the same store's bare durable append, for comparison
WRITE_APPEND = _figure("registry.write_append", "registry: the same store's bare durable append")
DIFFS_PER_S = "registry.diffs_per_s.{subscribers}"  # Throughput, for 1 and 10 subscribers
NAMES[DIFFS_PER_S.format(subscribers=1)] = "registry: change stream, 1 subscriber (diffs/s)"
NAMES[DIFFS_PER_S.format(subscribers=10)] = "registry: change stream, 10 subscribers (diffs/s each)"
WRITER_SUBSCRIBERS = "registry.writer_subscribers.{subscribers}"  # Throughput, with 0 and 100 subscribers
NAMES[WRITER_SUBSCRIBERS.format(subscribers=0)] = "registry: change_info in bursts of 100, no subscriber"
NAMES[WRITER_SUBSCRIBERS.format(subscribers=100)] = "registry: change_info in bursts of 100, 100 subscribers"
# page first/deep, archived only/include (10% of the generated sessions are archived)
LIST_ARCHIVED = "registry.list_{page}_archived_{mode}"
for _mode in ("only", "include"):
    for _page in ("first", "deep"):
        NAMES[LIST_ARCHIVED.format(page=_page, mode=_mode)] = (
            f"registry: session/list {_page} page, archived={_mode}, p50 / p99"
        )
# SessionRegistry.fork of a 10,000-event session, durable, tables kept up
FORK_10K = _figure("registry.fork_10k", "registry: fork of a 10,000-event session, p50 / p99")

# -- the registry on PostgreSQL (postgres_registry.py), each beside raw psycopg measured in the same run --

PG_RAW_INSERT = _durable("pg.raw_insert_commit", "raw psycopg: one-row INSERT + COMMIT")
PG_APPEND = _durable("pg.append", "postgres: durable append of one event")
PG_CREATE = _durable("pg.create", "postgres: SessionRegistry.create")
PG_RECORD = _durable("pg.record_activity", "postgres: SessionRegistry.record_activity")
# Throughput, sessions/s: append_batch of 1,000 sessions a call, and COPY of rows of the same size
PG_IMPORT = _figure("pg.import", "postgres: append_batch import, 1,000 sessions a call (sessions/s)")
PG_RAW_COPY = _figure("pg.raw_copy", "raw psycopg: COPY of the same events' bytes, 1,000 sessions a tx (sessions/s)")
# Throughput, events/s: the read model catching up with the imported log (first open after the import)
PG_BUILD = _figure("pg.read_model_build", "postgres: read model built from the imported log (first open)")
# Quantity, bytes (pg_table_size + pg_indexes_size): the store's tables, and the raw COPY's table of the same events
PG_LOG_BYTES = _figure("pg.log_bytes", "postgres: the log's tables and their indexes (events, streams, ...)")
PG_READ_MODEL_BYTES = _figure("pg.read_model_bytes", "postgres: the read model's tables and their indexes (rm_*)")
PG_RAW_BYTES = _figure("pg.raw_copy_bytes", "raw psycopg: the COPYed events' table and its primary key")
PG_LIST = _pages("pg.list_", "postgres: session/list ")
# Latency: a page 90% deep of a walk that began before the list changed (read through rm_past, as of its start)
PG_LIST_CHANGED = _figure(
    "pg.list_deep_changed", "postgres: session/list page 90% deep, the list changed since the walk began, p50 / p99"
)
PG_RAW_LIST = _pages("pg.raw_list_", "raw psycopg: ", " (keyset query of the same rows)")
PG_STDIO = _stdio("pg.stdio_", "postgres: session/list {page} from a warm `serve`, p50 / p99")
PG_RAW_STDIO = _stdio("pg.raw_stdio_", "raw psycopg stdio server: the same {page} (keyset query), p50 / p99")
# a fresh `acp-registry serve` to its first page, beside a fresh process that imports psycopg and queries the page
PG_SERVE_FIRST = _figure("pg.serve_first", "postgres: fresh `serve` to its first session/list answer, p50 / p99")
PG_RAW_FIRST = _figure("pg.raw_first", "raw psycopg: a fresh process to the same page (connect, query), p50 / p99")
PG_SERVE_RSS = _figure("pg.serve_rss", "postgres: that `serve` process's RSS after the first page")
PG_RAW_RSS = _figure("pg.raw_rss", "raw psycopg: that process's RSS after the page")
# another process's commit to this process's wake-up, under the load of writer processes
PG_NOTIFY = _figure("pg.notification", "postgres: cross-host notification (store subscription), p50 / p99")
PG_RAW_NOTIFY = _figure("pg.raw_notification", "raw psycopg: INSERT + pg_notify to a LISTEN connection, p50 / p99")
WRITER_COUNTS: Final = (1, 2, 4, 8)
# writer processes on sessions of their own: Latency per operation under the key, ops/s under its rate_key
PG_WRITERS = "pg.writers_{count}"
PG_STORE_WRITERS = "pg.store_writers_{count}"  # the store alone: PostgresStore.append of one event, no read model
PG_RAW_WRITERS = "pg.raw_writers_{count}"
PG_WRITERS_CPU = "pg.writers_{count}.cpu_busy"  # Quantity: the machine's CPU busy meanwhile (server included)
PG_WRITERS_WAITS = "pg.writers_{count}.lock_waiters"  # Quantity: backends waiting for a lock, sampled
for _count in WRITER_COUNTS:
    _writers = f"{_count} writer process{'es' if _count > 1 else ''}"
    _durable(PG_WRITERS.format(count=_count), f"postgres: {_writers} (create, then 4 record_activity), per operation")
    _durable(PG_RAW_WRITERS.format(count=_count), f"raw psycopg: {_writers} of INSERT + COMMIT, per operation")
    _durable(
        PG_STORE_WRITERS.format(count=_count),
        f"postgres store: {_writers} appending one event (no read model), per append",
    )
    _figure(PG_WRITERS_CPU.format(count=_count), f"postgres: {_writers}, the machine's CPU busy")
    _figure(PG_WRITERS_WAITS.format(count=_count), f"postgres: {_writers}, backends waiting for a lock (mean)")
