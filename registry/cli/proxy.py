"""``proxy``: the registry in front of any ACP agent (``registry.proxy``).

``acp-registry proxy [--store URL] [--agent NAME] -- COMMAND [ARGS...]`` starts COMMAND, an ACP agent over stdio,
and speaks ACP to the client on its own stdin/stdout: everything is relayed both ways; ``session/list`` and
``session/delete`` are answered from the registry; sessions, turns and titles are recorded. stdout carries only
JSON-RPC; the agent's stderr and the proxy's logs go to stderr.

Exit codes: 0 when the client ended (EOF on stdin) or the proxy was stopped (SIGTERM, Ctrl-C: each request still
waiting for the agent is answered with an error saying so, and one line on stderr says how many) and the agent
was ended; 1 when the agent exited or crashed by itself (one line on stderr names it, whenever the client went);
2 when the store cannot be opened (unavailable, corrupt, not a registry store) or the agent cannot be started -
the agent, if started, is then ended.

Start: the agent is started first, and the store's open, the relay, the registry's facade and the read model's
catch-up with the log all happen while the agent starts (``import registry`` and ``import registry.proxy`` are
light for this). The name the agent is recorded under is said once on stderr.
"""

from __future__ import annotations

import argparse
import logging
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
    parser.add_argument(
        "--list-wait",
        type=_seconds,
        default=5.0,
        metavar="SECONDS",
        help="how long the first session/list waits for the agent's past to be read (5; later lists never wait)",
    )
    parser.add_argument("agent_command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")


def run(args: argparse.Namespace) -> int:
    command = list(args.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise InputError("proxy needs the agent's command: acp-registry proxy [--store URL] -- COMMAND [ARGS...]")
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="acp-registry proxy: %(message)s")
    logging.getLogger("acp_registry.proxy.identity").setLevel(logging.INFO)
    from registry.proxy.spawn import spawn  # noqa: PLC0415 - stdlib only: the agent starts before anything loads

    try:
        agent = spawn(command)
    except OSError as exc:
        raise InputError(f"cannot start the agent {command[0]!r}: {exc.strerror or exc}") from None
    # The agent starts while the store opens and the relay, the registry and the read model load.
    try:
        from events.errors import RegistryError  # noqa: PLC0415

        location = locate(args.store)
        store = open_log(location, create=True)  # a bad or unusable store: one line, exit 2
        from registry.proxy import Proxy  # noqa: PLC0415
        from registry.service import SessionRegistry  # noqa: PLC0415

        try:
            registry = SessionRegistry(store, owns_store=True, page_size=args.page_size)
        except (RegistryError, OSError) as exc:
            store.close()
            raise InputError(f"cannot open the store {location.url}: {exc}") from None
        except BaseException:
            store.close()
            raise
    except BaseException:
        agent.kill()
        raise
    try:
        proxy = Proxy(registry, command, agent=args.agent, import_history=not args.no_history, list_wait=args.list_wait)
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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 0 to 3600 seconds, not {text}")
    return value


def _on_signals(proxy: Any) -> dict[int, Any]:
    """SIGTERM and Ctrl-C end the proxy as the client's EOF does (the agent is ended, exit 0), each request still
    waiting for the agent answered with an error naming the signal."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum: int, _frame: Any) -> None:
        proxy.stop(signal.Signals(signum).name)  # returns at once; the main thread holds none of the relay's locks

    return {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
