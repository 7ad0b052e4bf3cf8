"""The PostgreSQL URL rules: a store URL split into libpq's URL and our schema, the schema's name checked, a
location shown without passwords. psycopg is imported only when a URL is split: ``import events`` stays free of
it. (Which store a URL names, and opening it: ``events.factory``.)
"""

from __future__ import annotations

import functools
import re
import urllib.parse
from typing import Final

__all__ = ["DEFAULT_SCHEMA", "check_schema", "postgres_location", "redact", "split_postgres_url"]

DEFAULT_SCHEMA: Final = "acp_registry"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


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
