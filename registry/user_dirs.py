"""The user's folders for ``acp-registry`` - data (the default store), config (the price file), state and cache
(kept snapshots) - as platformdirs names them.

On Linux, with an absolute ``HOME`` (or the XDG variable set to an absolute path), the name is the XDG rule
platformdirs applies there: ``$XDG_DATA_HOME/acp-registry`` when it is absolute, else
``~/.local/share/acp-registry`` (``~/.config``, ``~/.local/state``, ``~/.cache`` for the others). Any other case -
another system, a relative or missing ``HOME`` - asks platformdirs itself. This module is speed code: platformdirs'
import (pathlib, tempfile, shutil, their compressors) was most of the start of a command run on the default store
(docs/benchmarks.md); ``tests/test_user_dirs.py`` holds every name here to platformdirs' own for the same
environment."""

from __future__ import annotations

import os
import sys
from typing import Final, Literal

__all__ = ["APP", "user_dir"]

APP: Final = "acp-registry"

Kind = Literal["data", "config", "state", "cache"]

_DEFAULT: Final = {"data": "~/.local/share", "config": "~/.config", "state": "~/.local/state", "cache": "~/.cache"}
"""Each folder under the home when its XDG variable (``XDG_DATA_HOME``, ``XDG_CONFIG_HOME``, ...) names none."""


def user_dir(kind: Kind) -> str:
    """The user's ``kind`` folder of ``acp-registry`` (not made here)."""
    if sys.platform == "linux":
        if os.path.isabs(chosen := os.environ.get(f"XDG_{kind.upper()}_HOME", "")):
            return os.path.join(chosen, APP)
        if os.path.isabs(os.environ.get("HOME", "")):
            return os.path.join(os.path.expanduser(_DEFAULT[kind]), APP)
    import platformdirs  # noqa: PLC0415 - the cases the XDG rule above does not answer

    named: str = getattr(platformdirs, f"user_{kind}_dir")(APP)
    return named
