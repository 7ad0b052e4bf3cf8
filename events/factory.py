"""The store factory: which store a URL names, opened - ``memory://``, ``sqlite:///abs/path.db[?synchronous=normal]``,
``postgresql://user@host:port/db[?schema=NAME&...]`` (its rules: ``events.urls``). The PostgreSQL store (and psycopg
under it) is loaded only when such a URL is opened: ``import events`` stays free of it.
"""

from __future__ import annotations

import os
from typing import Final, cast

from events.sqlite import SqliteStore, Synchronous
from events.store import Clock, EventStore

__all__ = ["ENV_STORE", "open_store", "split_url", "sqlite_file", "sqlite_url"]

ENV_STORE: Final = "ACP_REGISTRY_STORE"
"""The environment variable that names a process's store URL (``acp-registry``'s, and a child the proxy starts)."""

_SQLITE_OPTIONS = {"synchronous": ("full", "normal", "off")}
_PLAIN: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-")


def split_url(url: str) -> tuple[str, str, str, str]:
    """A store URL's scheme (lowercase), host part, path and query, as ``urllib.parse.urlsplit`` splits them. A
    ``sqlite:///`` URL of plain characters (letters, digits and ``/._-``: nothing quoted, no options) is split
    without it: ``urllib.parse`` imports ``ipaddress``, a large part of what ``acp-registry list`` loads otherwise
    (docs/benchmarks.md)."""
    if url[:10].lower() == "sqlite:///" and _PLAIN.issuperset(url[10:]):
        return "sqlite", "", url[9:], ""
    import urllib.parse  # noqa: PLC0415

    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc, parts.path, parts.query


def _unquote(text: str) -> str:
    if "%" not in text:
        return text  # what unquote returns
    import urllib.parse  # noqa: PLC0415

    return urllib.parse.unquote(text)


def sqlite_file(url: str) -> str | None:
    """The file a ``sqlite://`` URL names, as ``open_store`` opens it; None for another kind of URL, or a SQLite URL
    that names no absolute file path (a host, a folder: ``open_store`` refuses it, saying why)."""
    scheme, netloc, path, _ = split_url(url)
    if scheme != "sqlite" or netloc or not path.startswith("/"):
        return None
    path = "/" + _unquote(path).lstrip("/")
    return None if path.endswith("/") else path


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The ``sqlite://`` URL of an absolute file path (``sqlite_file``'s inverse): characters a URL reserves are
    quoted, as ``urllib.parse.quote`` quotes them - a path of plain characters has none, and needs no urllib."""
    text = os.fspath(path)
    if _PLAIN.issuperset(text):
        return "sqlite://" + text
    import urllib.parse  # noqa: PLC0415

    return "sqlite://" + urllib.parse.quote(text)


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
    scheme, netloc, path, query = split_url(url)
    if scheme == "memory":
        if netloc or path or query:
            raise ValueError(f"memory store URLs take nothing after the scheme: write 'memory://', not {url!r}")
        from events.memory import MemoryStore  # noqa: PLC0415 - a process on a file or a server never needs it

        return MemoryStore(clock=clock)
    if scheme == "sqlite":
        if netloc:
            raise ValueError(
                f"{url!r}: a SQLite store URL needs an absolute path after three slashes, "
                "e.g. sqlite:///home/me/sessions.db"
            )
        path = "/" + _unquote(path).lstrip("/") if path.startswith("/") else path
        if not os.path.isabs(path) or path.endswith("/"):
            raise ValueError(
                f"{url!r}: the SQLite path must be an absolute file path, e.g. sqlite:///home/me/sessions.db"
            )
        options = {}
        if query:
            import urllib.parse  # noqa: PLC0415

            options = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
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
        f"{url!r}: unknown store URL scheme {scheme!r}; use memory://, sqlite:///abs/path.db or "
        "postgresql://user@host:port/dbname"
    )
