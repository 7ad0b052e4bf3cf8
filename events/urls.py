"""Store URLs: ``memory://``, ``sqlite:///abs/path.db[?synchronous=normal]``,
``postgresql://user@host:port/db[?schema=NAME&...]``; opening the store one names, and the PostgreSQL URL rules
(split into libpq's URL and our schema, shown without passwords). psycopg is imported only when a PostgreSQL URL is
opened or split: ``import events`` stays free of it.
"""

from __future__ import annotations

import functools
import os
import re
import urllib.parse
from typing import Final, cast

from events.sqlite import SqliteStore, Synchronous
from events.store import Clock, EventStore

__all__ = ["DEFAULT_SCHEMA", "check_schema", "open_store", "postgres_location", "redact", "split_postgres_url"]

DEFAULT_SCHEMA: Final = "acp_registry"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_SQLITE_OPTIONS = {"synchronous": ("full", "normal", "off")}


def open_store(
    url: str, *, create: bool = True, follow_symlinks: bool = False, clock: Clock | None = None
) -> EventStore:
    """Open the store a URL names. Bad URLs raise ``ValueError`` saying what is wrong.

    ``create`` (default True, so that a host's first run makes its store): make the store when there is none - a
    missing or empty SQLite file, a missing or empty PostgreSQL schema. Callers that only read pass False: then
    nothing is created or initialised, and an empty file is a ``StoreFormatError``. ``follow_symlinks``: accept a
    SQLite path that is a symbolic link (refused by default, see ``events.sqlite_file``).
    """
    if not isinstance(url, str):
        raise TypeError(f"store URL must be a str, not {type(url).__name__}")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        if parts.netloc or parts.path or parts.query:
            raise ValueError(f"memory store URLs take nothing after the scheme: write 'memory://', not {url!r}")
        from events.memory import MemoryStore  # noqa: PLC0415 - a process on a file or a server never needs it

        return MemoryStore(clock=clock)
    if scheme == "sqlite":
        if parts.netloc:
            raise ValueError(
                f"{url!r}: a SQLite store URL needs an absolute path after three slashes, "
                "e.g. sqlite:///home/me/sessions.db"
            )
        path = "/" + urllib.parse.unquote(parts.path).lstrip("/") if parts.path.startswith("/") else parts.path
        if not os.path.isabs(path) or path.endswith("/"):
            raise ValueError(
                f"{url!r}: the SQLite path must be an absolute file path, e.g. sqlite:///home/me/sessions.db"
            )
        options = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        for key, value in options.items():
            allowed = _SQLITE_OPTIONS.get(key)
            if allowed is None:
                raise ValueError(f"{url!r}: unknown option {key!r} (known: {', '.join(_SQLITE_OPTIONS)})")
            if value not in allowed:
                raise ValueError(f"{url!r}: {key} must be one of {', '.join(allowed)}, got {value!r}")
        synchronous = cast(Synchronous, options.get("synchronous", "full"))
        return SqliteStore(path, synchronous=synchronous, create=create, follow_symlinks=follow_symlinks, clock=clock)
    if scheme in ("postgresql", "postgres"):
        try:
            from events.postgres import PostgresStore  # noqa: PLC0415 - keeps `import events` free of psycopg
        except ImportError as exc:
            # psycopg missing, or present without a libpq to load ("no pq wrapper available").
            if isinstance(exc, ModuleNotFoundError) and not (exc.name or "").startswith("psycopg"):
                raise
            raise ModuleNotFoundError(
                f"the PostgreSQL store needs psycopg and libpq ({exc}): pip install "
                "'acp-session-registry[postgres-binary]' (or [postgres] where the system has libpq)",
                name=exc.name,
            ) from exc
        return PostgresStore.from_url(url, create=create, clock=clock)
    raise ValueError(
        f"{url!r}: unknown store URL scheme {parts.scheme!r}; use memory://, sqlite:///abs/path.db or "
        "postgresql://user@host:port/dbname"
    )


def check_schema(schema: object) -> str:
    """A PostgreSQL store's schema name: a lowercase identifier that needs no quoting and is not a system one."""
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a str, not {type(schema).__name__}")
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValueError(
            "schema must be a lowercase SQL identifier (a-z, 0-9 and _, not starting with a digit or pg_, "
            f"at most 63 characters), got {schema!r}"
        )
    return schema


@functools.cache
def _libpq_parameters() -> frozenset[str]:
    import psycopg  # noqa: PLC0415 - only PostgreSQL URLs need it

    return frozenset(option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults())


def split_postgres_url(url: str) -> tuple[str, str]:
    """A store URL as (libpq connection URL, schema); unknown options raise ``ValueError`` naming them.

    ``schema`` (default ``acp_registry``) is this library's option; every other query parameter must be one of
    libpq's own connection parameters (``sslmode``, ``connect_timeout``...) and passes to libpq unchanged.
    """
    parts = urllib.parse.urlsplit(url)
    shown = redact(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"{shown!r}: not a PostgreSQL URL (postgresql://user@host:port/dbname)")
    schemas: list[str] = []
    passed: list[str] = []
    unknown: list[str] = []
    for item in filter(None, parts.query.split("&")):
        name = urllib.parse.unquote(item.partition("=")[0])
        if name == "schema":
            schemas.append(urllib.parse.unquote(item.partition("=")[2]))
        elif name in _libpq_parameters():
            passed.append(item)
        else:
            unknown.append(name)
    if unknown:
        raise ValueError(
            f"{shown!r}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            "(known: schema, and libpq's connection parameters such as sslmode, connect_timeout, application_name)"
        )
    if len(schemas) > 1:
        raise ValueError(f"{shown!r}: schema is given {len(schemas)} times")
    try:
        schema = check_schema(schemas[0] if schemas else DEFAULT_SCHEMA)
    except ValueError as exc:
        raise ValueError(f"{shown!r}: {exc}") from None
    if parts.fragment:
        raise ValueError(f"{shown!r}: a PostgreSQL URL takes no #fragment")
    # Built by hand: urlunsplit would drop the // of an empty host (postgresql:///dbname, a local socket).
    query = "&".join(passed)
    return f"postgresql://{parts.netloc}{parts.path}{'?' if query else ''}{query}", schema


def postgres_location(conninfo: str, schema: str) -> str:
    """Where a PostgreSQL store is, for messages: the connection URL without its password, and the schema."""
    import psycopg  # noqa: PLC0415 - only PostgreSQL URLs need it
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"{redact(conninfo)!r}: {exc}") from None
    user = f"{params['user']}@" if params.get("user") else ""
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{params.get('host', '')}{port}/{params.get('dbname', '')}?schema={schema}"


def redact(url: str) -> str:
    """``url`` with any password (in the user info or a ``password=`` option) replaced by ``***``."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":***"
    query = "&".join(
        "password=***" if item.partition("=")[0] == "password" else item for item in parts.query.split("&") if item
    )
    return urllib.parse.urlunsplit((parts.scheme, f"{userinfo}{at}{hosts}", parts.path, query, parts.fragment))
