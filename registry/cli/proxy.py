"""``proxy``: the registry in front of any ACP agent (``registry.proxy``).

``acp-registry proxy [--store URL] [--agent NAME] -- COMMAND [ARGS...]`` starts COMMAND, an ACP agent over stdio,
and speaks ACP to the client on its own stdin/stdout: everything is relayed both ways; ``session/list`` and
``session/delete`` are answered from the registry; sessions, turns and titles are recorded. stdout carries only
JSON-RPC; the agent's stderr and the proxy's logs go to stderr.

Exit codes: 0 when the client ended (EOF on stdin, SIGTERM, Ctrl-C) and the agent was ended; 1 when the agent
exited or crashed first (one line on stderr names it); 2 when the store cannot be opened (unavailable, corrupt,
not a registry store) or the agent cannot be started - the agent is then not started.

Start: the store is opened (and so checked) first, then the agent is started at once, and the relay, the
registry's facade and the read model's catch-up with the log load while the agent starts (``import registry`` and
``import registry.proxy`` are light for this). A read model that then fails to open ends the agent (exit 2).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import threading
from typing import Any

from registry.cli.errors import InputError
from registry.cli.options import page_size
from registry.cli.stores import locate, open_log

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="NAME",
        default=None,
        help="the agent's name in the registry (default: from initialize's agentInfo.name, else the command)",
    )
    parser.add_argument(
        "--no-history",
        action="store_true",
        help="do not read the agent's past sessions (its history files or its own session/list)",
    )
    parser.add_argument("--page-size", type=page_size, default=50, metavar="N", help="sessions per page (50)")
    parser.add_argument("agent_command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")


def run(args: argparse.Namespace) -> int:
    command = list(args.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise InputError("proxy needs the agent's command: acp-registry proxy [--store URL] -- COMMAND [ARGS...]")
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="acp-registry proxy: %(message)s")
    from events.errors import RegistryError  # noqa: PLC0415
    from registry.proxy.spawn import spawn  # noqa: PLC0415 - stdlib only: the relay loads while the agent starts

    location = locate(args.store)
    if shutil.which(command[0]) is None:  # before the store is opened: an agent that cannot start leaves no store
        raise InputError(f"cannot start the agent {command[0]!r}: no such command (not found, or not executable)")
    store = open_log(location, create=True)  # a bad or unusable store: one line, exit 2, no agent started
    try:
        agent = spawn(command)
    except OSError as exc:
        store.close()
        raise InputError(f"cannot start the agent {command[0]!r}: {exc.strerror or exc}") from None
    # The agent starts while the relay and the registry load and the read model catches up with the log.
    from registry.proxy import Proxy  # noqa: PLC0415
    from registry.service import SessionRegistry  # noqa: PLC0415

    try:
        registry = SessionRegistry(store, owns_store=True, page_size=args.page_size)
    except (RegistryError, OSError) as exc:
        agent.kill()
        store.close()
        raise InputError(f"cannot open the store {location.url}: {exc}") from None
    except BaseException:
        agent.kill()
        store.close()
        raise
    try:
        proxy = Proxy(registry, command, agent=args.agent, import_history=not args.no_history)
        proxy.start(agent)
        previous = _on_signals(proxy)
        try:
            return proxy.run()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            proxy.close()
    finally:
        registry.close()


def _on_signals(proxy: Any) -> dict[int, Any]:
    """SIGTERM and Ctrl-C end the proxy as the client's EOF does (the agent is ended, exit 0)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(_signum: int, _frame: Any) -> None:
        proxy.stop()

    return {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
