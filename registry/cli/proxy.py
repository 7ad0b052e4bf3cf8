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

Without COMMAND it is one link of a conductor's proxy chain (``registry.proxy.chain``): the conductor started it,
tells it at initialize that it is a proxy, and relays between it and its successor (the next proxy or the agent);
the registry does the same as in front of an agent it started. Exit codes: 0 when the conductor ended it (EOF,
SIGTERM); 2 when the store cannot be opened, or when the initialize did not say it is a proxy (answered with an
error naming the two ways to run it).

Either way SIGTERM and Ctrl-C stay the proxy's own until ``Proxy.close`` has returned, so that what the recorder
holds is written (``@thinkwell/conductor`` closes a component's stdin and sends SIGTERM 250 ms later).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING

from registry.cli.errors import InputError
from registry.cli.options import add_keep_secrets, page_size
from registry.cli.stores import open_log
from registry.cli.where import locate
from registry.proxy.signals import StopSignals

if TYPE_CHECKING:
    from registry.proxy import Proxy
    from registry.service import SessionRegistry

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
        help="how long the first session/list waits for an import of the agent's past (5; its own list, one "
        "request: up to 30; later lists never wait)",
    )
    add_keep_secrets(parser)
    parser.add_argument(
        "agent_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the agent to start and relay to; none: run as a proxy in a conductor's chain",
    )


def run(args: argparse.Namespace) -> int:
    command = list(args.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="acp-registry proxy: %(message)s")
    logging.getLogger("acp_registry.proxy.identity").setLevel(logging.INFO)
    if not command:
        return _in_a_chain(args)
    from registry.proxy.spawn import spawn  # noqa: PLC0415 - stdlib only: the agent starts before anything loads

    try:
        agent = spawn(command)
    except OSError as exc:
        raise InputError(f"cannot start the agent {command[0]!r}: {exc.strerror or exc}") from None
    # The agent starts while the store opens and the relay, the registry and the read model load.
    try:
        registry, url = _open_registry(args)
    except BaseException:
        agent.kill()
        raise
    signals = StopSignals()  # from here on a signal stops the proxy once it runs: none cuts its start short
    try:
        from registry.proxy import Proxy  # noqa: PLC0415

        proxy = Proxy(
            registry,
            command,
            agent=args.agent,
            import_history=not args.no_history,
            list_wait=args.list_wait,
            store_url=url,
        )
        proxy.start(agent)
        return _run(proxy, signals)
    finally:
        signals.restore()
        registry.close()


def _in_a_chain(args: argparse.Namespace) -> int:
    """One link of a conductor's chain: the conductor's stdio is both the client and the agent."""
    registry, url = _open_registry(args)
    signals = StopSignals()
    try:
        from registry.proxy import Proxy  # noqa: PLC0415
        from registry.proxy.chain import Chain  # noqa: PLC0415

        if os.isatty(0):
            logging.getLogger("acp_registry.proxy").warning(
                "no agent command: waiting on stdin for a conductor's initialize, as one link of a proxy chain"
                " (to put the registry in front of an agent: acp-registry proxy -- COMMAND [ARGS...])"
            )
        chain = Chain(0, 1)
        proxy = Proxy(
            registry,
            (),
            agent=args.agent,
            client=chain.client,
            import_history=not args.no_history,
            list_wait=args.list_wait,
            store_url=url,
        )
        proxy.start(chain.agent)
        code = _run(proxy, signals)
        return 2 if chain.refused is not None else code
    finally:
        signals.restore()
        registry.close()


def _open_registry(args: argparse.Namespace) -> tuple[SessionRegistry, str]:
    """The registry on ``--store`` and the store's URL (a bad or unusable store: ``InputError``, one line, exit 2)."""
    from events.errors import RegistryError  # noqa: PLC0415

    location = locate(args.store)
    store = open_log(location, create=True)
    from registry.service import SessionRegistry  # noqa: PLC0415

    try:
        return SessionRegistry(
            store, owns_store=True, page_size=args.page_size, keep_secrets=args.keep_secrets
        ), location.url
    except (RegistryError, OSError) as exc:
        store.close()
        raise InputError(f"cannot open the store {location.url}: {exc}") from None
    except BaseException:
        store.close()
        raise


def _run(proxy: Proxy, signals: StopSignals) -> int:
    """Relay until one side ends, then close the proxy - with SIGTERM and Ctrl-C still its own until ``close`` has
    written what the recorder holds (a second signal then only asks again; it cannot cut a write short)."""
    signals.attach(proxy)
    try:
        return proxy.run()
    finally:
        proxy.close()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 0 to 3600 seconds, not {text}")
    return value
