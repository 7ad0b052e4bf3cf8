"""Which store a command works on, and opening it without creating one by mistake.

The store is ``--store URL``, else ``$ACP_REGISTRY_STORE``, else an embedded SQLite file in the user's data
directory. Opening a ``sqlite://`` URL creates the file, so commands that only read refuse a named file that
does not exist instead of leaving an empty store behind; only the default store is created on first use.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from registry.cli.errors import InputError

if TYPE_CHECKING:
    from events.store import EventStore
    from registry.service import SessionRegistry

__all__ = [
    "ENV_STORE",
    "StoreLocation",
    "default_store_url",
    "locate",
    "open_log",
    "open_registry",
    "resolve_url",
    "snapshot_file",
    "sqlite_file",
    "sqlite_url",
]

ENV_STORE = "ACP_REGISTRY_STORE"


class StoreLocation(NamedTuple):
    url: str
    origin: str
    """Where the URL came from: ``--store``, ``$ACP_REGISTRY_STORE`` or ``default``."""


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The ``sqlite://`` URL of an absolute file path (characters a URL reserves are quoted)."""
    return "sqlite://" + urllib.parse.quote(os.fspath(path))


def default_store_url() -> str:
    import platformdirs  # noqa: PLC0415 - only when the default is needed

    return sqlite_url(Path(platformdirs.user_data_dir("acp-registry")) / "sessions.db")


def locate(option: str | None) -> StoreLocation:
    if option is not None:
        return StoreLocation(option, "--store")
    env = os.environ.get(ENV_STORE)
    if env:
        return StoreLocation(env, f"${ENV_STORE}")
    return StoreLocation(default_store_url(), "default")


def sqlite_file(url: str) -> str | None:
    """The file a ``sqlite://`` URL names (as ``events.urls.open_store`` reads it); None for other URLs."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "sqlite" or parts.netloc or not parts.path.startswith("/"):
        return None
    path = "/" + urllib.parse.unquote(parts.path).lstrip("/")
    return None if path.endswith("/") else path


def _prepare(location: StoreLocation, *, create: bool) -> None:
    path = sqlite_file(location.url)
    if path is None:
        return
    parent = os.path.dirname(path)
    if location.origin == "default":
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the default store's directory {parent}: {exc.strerror}") from exc
        return
    if not create and not os.path.exists(path):
        raise InputError(f"{path}: no such store (the file does not exist; {location.origin} names it)")
    if not os.path.isdir(parent):
        raise InputError(f"{path}: the directory {parent} does not exist")


def resolve_url(location: StoreLocation, *, create: bool) -> str:
    """The URL, after the checks ``open_log`` makes (and the default store's directory created)."""
    _prepare(location, create=create)
    return location.url


def open_log(location: StoreLocation, *, create: bool) -> EventStore:
    """Open the store; ``create=False`` refuses a named SQLite file that does not exist."""
    from events.urls import open_store  # noqa: PLC0415

    _prepare(location, create=create)
    try:
        return open_store(location.url)
    except ModuleNotFoundError as exc:
        raise InputError(str(exc)) from exc
    except ValueError as exc:
        raise InputError(f"bad store URL: {exc}") from exc


def snapshot_file(store: EventStore) -> Path | None:
    """Where a registry keeps the projection snapshot of this store (beside a SQLite file; else nowhere)."""
    from events.sqlite import SqliteStore  # noqa: PLC0415

    return Path(store.path + ".snapshot") if isinstance(store, SqliteStore) else None


def open_registry(location: StoreLocation, *, create: bool, **options: Any) -> SessionRegistry:
    """A ``SessionRegistry`` on the store (it closes the store when it closes)."""
    from registry.service import SessionRegistry  # noqa: PLC0415

    store = open_log(location, create=create)
    try:
        return SessionRegistry(store, owns_store=True, **options)
    except BaseException:
        store.close()
        raise
