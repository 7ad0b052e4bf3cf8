"""Which store a command works on: ``--store URL``, else ``$ACP_REGISTRY_STORE``, else an embedded SQLite file in
the user's data directory (``locate``); opening it is ``registry.cli.stores``'."""

from __future__ import annotations

import os
from typing import Final

import msgspec

from events.factory import ENV_STORE, sqlite_url
from registry.user_dirs import user_dir

__all__ = ["CREATES_STORE", "ENV_STORE", "StoreLocation", "default_store_url", "locate"]

CREATES_STORE: Final = ("import", "import-agents", "proxy", "serve")
"""The commands that create the default store when there is none (``demo --store`` creates only the one named)."""


class StoreLocation(msgspec.Struct, frozen=True):
    url: str
    origin: str
    """Where the URL came from: ``--store``, ``$ACP_REGISTRY_STORE`` or ``default``."""


def default_store_url() -> str:
    return sqlite_url(os.path.join(user_dir("data"), "sessions.db"))


def locate(option: str | None) -> StoreLocation:
    if option is not None:
        return StoreLocation(option, "--store")
    env = os.environ.get(ENV_STORE)
    if env:
        return StoreLocation(env, f"${ENV_STORE}")
    return StoreLocation(default_store_url(), "default")
