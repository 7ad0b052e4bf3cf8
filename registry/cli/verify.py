"""``verify``: whether the log (and what is derived from it) can be trusted; exit 1 and every problem if not.

It checks what every store promises (``events.verify.verify_log``: positions increase, versions run 1..n, every
record decodes) and that the read model and each kept snapshot equal the fold of the log at their positions
(``derived.check_derived``), and reports every integrity event recorded in the store and not yet acknowledged (a log
found shorter than what the read model or a kept snapshot had seen: ``registry.evidence``) until
``--acknowledge``.
"""

from __future__ import annotations

import argparse
import sys

import msgspec

from events.verify import verify_log
from registry.backends import backend_for
from registry.cli.derived import Problem, check_derived
from registry.cli.errors import EXIT_OK, EXIT_PROBLEM
from registry.cli.stores import open_log
from registry.cli.tables import escaped
from registry.cli.terminal import printable, progress, stdout_console, write_json
from registry.cli.where import locate
from registry.evidence import describe

__all__ = ["VerifyResult", "add_arguments", "run"]


class VerifyResult(msgspec.Struct, rename="camel"):
    healthy: bool
    events: int
    sessions: int
    head: int
    read_model: str
    problems: list[Problem]
    messages: int = 0
    """Messages kept beside the log, each checked against the digest its event carries."""
    erased: int = 0
    """Events whose messages a user's delete erased (their digests stay in the log)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--acknowledge",
        action="store_true",
        help="mark the integrity events recorded so far (a log found shorter than what was derived from it) as "
        "seen, so that verify and stats stop reporting them; then verify as usual",
    )


def run(args: argparse.Namespace) -> int:
    with open_log(locate(args.store), create=False) as store:
        backend = backend_for(store)
        acknowledged = backend.acknowledge() if args.acknowledge else 0
        head = store.head()
        with progress("verifying the log", head) as report:
            log = verify_log(store, progress=report)
        problems = [Problem(p.position, p.session_id, p.problem) for p in log.problems]
        note, derived = check_derived(backend)
        evidence = [
            Problem(event.position, None, f"integrity: {describe(event)} (acp-registry verify --acknowledge)")
            for event in backend.integrity_events()
            if not event.acknowledged
        ]
    problems = evidence + problems + derived
    if acknowledged:
        print(f"acknowledged {acknowledged} integrity event{'s' if acknowledged != 1 else ''}", file=sys.stderr)
    result = VerifyResult(not problems, log.events, log.sessions, log.head, note, problems, log.messages, log.erased)
    if args.json:
        write_json(result)
    else:
        _print(result)
    return EXIT_OK if result.healthy else EXIT_PROBLEM


def _print(result: VerifyResult) -> None:
    from rich.table import Table  # noqa: PLC0415

    console = stdout_console()
    console.print(
        f"checked {result.events} events of {result.sessions} sessions up to position {result.head}, and"
        f" {result.messages} kept messages"
        + (f" ({result.erased} events' messages erased by a delete)" if result.erased else ""),
        markup=False,
    )
    console.print(f"read model: {printable(result.read_model)}", markup=False, soft_wrap=True)
    if result.healthy:
        console.print("healthy: no problems found", style="green", markup=False)
        return
    table = Table(
        title=f"{len(result.problems)} problem{'s' if len(result.problems) != 1 else ''}", title_justify="left"
    )
    table.add_column("position", justify="right")
    table.add_column("session", overflow="fold")
    table.add_column("problem", overflow="fold")
    for problem in result.problems:
        table.add_row(str(problem.position), escaped(problem.session_id or "-"), escaped(problem.problem))
    console.print(table)
