"""The options every benchmark script shares, declared once: ``--json`` (figures as JSON), ``--url`` (a store or
server URL), and how a benchmark that needs PostgreSQL finds one - or says it skips when none runs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = ["DEFAULT_POSTGRES", "bench_parser", "postgres_or_skip", "postgres_unreachable"]

DEFAULT_POSTGRES = os.environ.get(
    "ACP_REGISTRY_BENCH_POSTGRES",
    os.environ.get("ACP_REGISTRY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"),
)


def bench_parser(
    doc: str | None, *, json: bool = True, postgres: bool = False, url: bool = False, prog: str | None = None
) -> argparse.ArgumentParser:
    """A parser with the module's docstring as help and (``json``) ``--json PATH``; ``postgres`` adds ``--url``
    defaulting to the benchmark server (``ACP_REGISTRY_BENCH_POSTGRES``, else the tests'), ``url`` a ``--url`` of
    any store (default: a new SQLite file)."""
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if json:
        parser.add_argument("--json", type=Path, help="also write the figures here")
    if postgres:
        parser.add_argument("--url", default=DEFAULT_POSTGRES, help=f"a PostgreSQL server (default {DEFAULT_POSTGRES})")
    elif url:
        parser.add_argument("--url", help="a store URL (default: a new SQLite file)")
    return parser


def postgres_unreachable(url: str) -> str | None:
    """None when a PostgreSQL server answers at ``url``; else why a benchmark that needs one skips."""
    try:
        import psycopg  # noqa: PLC0415
    except ImportError:
        return "this benchmark needs PostgreSQL and psycopg is not installed"
    try:
        with psycopg.connect(url, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"this benchmark needs PostgreSQL and none answers at {url} ({' '.join(str(exc).split())})"


def postgres_or_skip(url: str) -> str | None:
    """``url`` when a PostgreSQL server answers there; None, having said why this benchmark skips, otherwise."""
    why = postgres_unreachable(url)
    if why is not None:
        print(f"skipped: {why}")
        return None
    return url
