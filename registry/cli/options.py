"""Argument types the commands share: log positions, page sizes, ``--cwd``; the hint for an unknown ``--agent``."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

from registry.agents import KNOWN, known_name
from registry.paths import normalise_cwd

__all__ = ["add_keep_secrets", "cwd_option", "hint_unknown_agent", "page_size", "position", "time_option"]

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


def add_keep_secrets(parser: argparse.ArgumentParser) -> None:
    """``--keep-secrets``: the commands that record conversations keep API keys and tokens as they were said."""
    parser.add_argument(
        "--keep-secrets",
        action="store_true",
        help="keep API keys, tokens and private keys in recorded messages as they were said (default: masked before "
        "they are stored or indexed)",
    )


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


def hint_unknown_agent(agent: str | None) -> None:
    """When ``--agent`` named no agent the registry knows and nothing matched: one line on stderr saying so, with
    the nearest known names (``codx``: did you mean 'codex'?). An agent it does not know by name may still have
    sessions (a proxy records any agent under its own name): the caller asks only when nothing matched."""
    names = [name for known in KNOWN for name in (known.name, *known.aliases)]
    if agent is None or agent in names:
        return
    import difflib  # noqa: PLC0415 - only for a name no agent goes by

    close = list(dict.fromkeys(map(known_name, difflib.get_close_matches(agent.lower(), names, n=3, cutoff=0.6))))
    known = ", ".join(known.name for known in KNOWN)
    hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"the agents known by name: {known}"
    print(f"acp-registry: no agent the registry knows is named {agent!r}; {hint}", file=sys.stderr, flush=True)
