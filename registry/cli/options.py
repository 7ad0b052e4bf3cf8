"""Argument types the commands share: log positions, page sizes, ``--cwd``."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time

from registry.paths import normalise_cwd

__all__ = ["cwd_option", "page_size", "position", "time_option"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def position(text: str) -> int:
    """A log position: an integer >= 0 (``-1`` is refused as such, not as a malformed option)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a log position (an integer >= 0)")
    return int(text)


def page_size(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a page size from 1 to 1000")
    return int(text)


def cwd_option(value: str | None) -> str | None:
    """``--cwd`` as the registry keeps cwds; a relative one is taken from the current directory."""
    return None if value is None else normalise_cwd(os.path.abspath(value), field="--cwd")


def time_option(text: str) -> int:
    """A moment for ``--since`` / ``--until``, as epoch ns: an RFC 3339 time (``2026-12-01T09:30:00Z``; without a
    zone, UTC), a date (``2026-12-01``: its midnight, UTC), or how long ago (``90m``, ``12h``, ``7d``, ``2w``)."""
    value = text.strip()
    unit = _UNITS.get(value[-1:].lower())
    if unit is not None and value[:-1].isdigit():
        return time.time_ns() - int(value[:-1]) * unit * 1_000_000_000
    try:
        moment = dt.datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give an RFC 3339 time (2026-12-01T09:30:00Z), a date (2026-12-01) or how long"
            " ago (90m, 12h, 7d, 2w)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000
