"""Argument types the commands share: log positions, page sizes, ``--cwd``."""

from __future__ import annotations

import argparse
import os

__all__ = ["cwd_option", "page_size", "position"]


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
    from registry.paths import normalise_cwd  # noqa: PLC0415

    return None if value is None else normalise_cwd(os.path.abspath(value), field="--cwd")
