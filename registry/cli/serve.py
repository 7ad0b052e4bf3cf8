"""``serve``: speak ACP over stdio, a reference agent backed by the registry (``registry.acp.agent``).

stdout carries only JSON-RPC (so it offers no ``--json``); logs go to stderr. The store is opened here first,
through ``registry.cli.stores`` like every command's, so a bad or unusable store is one line on stderr and exit 2
before the agent starts, and a new SQLite store's folder is created (0700).
"""

from __future__ import annotations

import argparse
import importlib

from registry.cli.errors import InputError
from registry.cli.options import add_keep_secrets, page_size
from registry.cli.stores import open_log
from registry.cli.where import locate

__all__ = ["add_arguments", "run"]

_AGENT_MODULE = "registry.acp.agent"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--page-size", type=page_size, default=50, metavar="N", help="sessions per page (50)")
    add_keep_secrets(parser)


def run(args: argparse.Namespace) -> int:
    location = locate(args.store)
    with open_log(location, create=True):  # checks (and creates) the store; the agent opens its own registry
        pass
    try:
        agent = importlib.import_module(_AGENT_MODULE)
    except ImportError as exc:
        raise InputError(f"serve is not available: {_AGENT_MODULE} could not be loaded ({exc})") from None
    return int(agent.serve(location.url, page_size=args.page_size, keep_secrets=args.keep_secrets))
