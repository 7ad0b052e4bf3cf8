"""Which store a command works on: ``--store URL``, else ``$ACP_REGISTRY_STORE``, else an embedded SQLite file in
the user's data directory (``locate``); opening it is ``registry.cli.stores``'."""

from __future__ import annotations

import os
import urllib.parse
from typing import Final, NamedTuple

from events.factory import ENV_STORE

__all__ = ["CREATES_STORE", "ENV_STORE", "StoreLocation", "default_store_url", "locate", "sqlite_url"]

CREATES_STORE: Final = ("import", "import-agents", "proxy", "serve")
"""The commands that create the default store when there is none (``demo --store`` creates only the one named)."""


class StoreLocation(NamedTuple):
    url: str
    origin: str
    """Where the URL came from: ``--store``, ``$ACP_REGISTRY_STORE`` or ``default``."""


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The ``sqlite://`` URL of an absolute file path (characters a URL reserves are quoted)."""
    return "sqlite://" + urllib.parse.quote(os.fspath(path))


def default_store_url() -> str:
    import platformdirs  # noqa: PLC0415 - only when no store is named (most of a command's start otherwise)

    return sqlite_url(os.path.join(platformdirs.user_data_dir("acp-registry"), "sessions.db"))


def locate(option: str | None) -> StoreLocation:
    if option is not None:
        return StoreLocation(option, "--store")
    env = os.environ.get(ENV_STORE)
    if env:
        return StoreLocation(env, f"${ENV_STORE}")
    return StoreLocation(default_store_url(), "default")
