"""``acp-registry``: look into the session log without writing code.

Each command lives in a small module and is imported only when it runs (``import registry.cli`` stays fast):
``browse`` (list, show, history), ``timetravel`` (replay), ``follow`` (tail), ``health`` (stats, verify),
``interchange`` (export, import) and ``demo``. ``serve`` and ``import-agents`` hand over to
``registry.acp.agent`` and ``registry.importers.command``. Errors become exit codes here, in one place:
0 ok, 1 a problem found (``verify``, a corrupt record, a failing store), 2 usage or input error, each
reported as one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from registry.cli.errors import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, CommandError, InputError

__all__ = ["main"]

_PROG = "acp-registry"

#: command -> "module:function" (imported when the command runs)
_HANDLERS = {
    "list": "registry.cli.browse:list_sessions",
    "show": "registry.cli.browse:show",
    "history": "registry.cli.browse:history",
    "replay": "registry.cli.timetravel:replay",
    "tail": "registry.cli.follow:tail",
    "stats": "registry.cli.health:stats",
    "verify": "registry.cli.health:verify",
    "export": "registry.cli.interchange:export_log",
    "import": "registry.cli.interchange:import_log",
    "demo": "registry.cli.demo:demo",
}
_AGENT_MODULE = "registry.acp.agent"
_IMPORTERS_MODULE = "registry.cli.import_agents"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, like every other error (argparse would print the usage first)."""
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _position(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a log position (an integer >= 0)")
    return int(text)


def _page_size(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a page size from 1 to 1000")
    return int(text)


def _build_parser(*, with_importers: bool) -> tuple[_Parser, str | None]:
    """The parser, and why ``import-agents`` cannot run (None: it can, or it was not asked for)."""
    from registry.cli.stores import ENV_STORE, default_store_url  # noqa: PLC0415

    default = default_store_url()
    env = os.environ.get(ENV_STORE)
    parser = _Parser(
        prog=_PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Look into the session log of AI coding agents: the session/list view, time travel, the live\n"
        "change stream, checks, export and import.",
        epilog=f"""store:
  default: {default}
           (created on first use)
  ${ENV_STORE} overrides the default{f", and names {env} now" if env else ""}; --store URL overrides both
  URLs: memory://, sqlite:///abs/path.db[?synchronous=normal], postgresql://user@host:port/db

exit codes: 0 ok, 1 a problem found (verify), 2 usage or input error""",
    )
    parser.add_argument("--store", metavar="URL", default=None, help="the store to work on (see below)")
    common = _Parser(add_help=False)
    common.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help="the store (see acp-registry --help)")
    as_json = _Parser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="exact JSON instead of tables")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, text: str, *parents: _Parser) -> _Parser:
        sub: _Parser = commands.add_parser(name, help=text, description=text, parents=[common, *parents])
        return sub

    sub = command("list", "the session/list view: most recent first (one page, or --all)", as_json)
    sub.add_argument("--cwd", metavar="DIR", help="only sessions whose cwd is DIR (relative: from here)")
    sub.add_argument("--all", action="store_true", help="every page (--json: one array of SessionInfo)")
    sub.add_argument("--cursor", help="the page after this nextCursor")
    sub.add_argument("--page-size", type=_page_size, default=50, metavar="N", help="sessions per page (50)")

    sub = command("show", "a session's current info", as_json)
    sub.add_argument("session", metavar="SESSION", help="the session id")

    sub = command("history", "every event of a session: position, time, what it changed", as_json)
    sub.add_argument("session", metavar="SESSION", help="the session id (deleted sessions too)")

    sub = command("replay", "time travel: the list as session/list answered at a point of the log", as_json)
    sub.add_argument(
        "--at", required=True, metavar="POSITION|TIMESTAMP", help="a log position, or an RFC 3339 time (recorded at)"
    )
    sub.add_argument("--cwd", metavar="DIR", help="only sessions whose cwd is DIR")
    sub.add_argument("--page-size", type=_page_size, default=50, metavar="N", help="sessions per page (50)")

    sub = command("tail", "follow the change stream live (Ctrl-C stops)", as_json)
    sub.add_argument("--from", dest="start", type=_position, metavar="POSITION", help="replay changes after it first")

    command("stats", "events, sessions, cwds, log size, head position, snapshot age", as_json)
    command("verify", "check the whole log and its snapshot; exit 1 when there is a problem", as_json)

    sub = command("export", "the log as JSON lines on stdout (acp-registry export > log.jsonl)")
    sub.add_argument("--from", dest="start", type=_position, metavar="POSITION", help="only events after it")

    sub = command("import", "append the records of an exported file (importing twice is harmless)", as_json)
    sub.add_argument("file", metavar="FILE", help="a file written by export ('-': standard input)")

    sub = commands.add_parser(
        "demo",
        help="a simulated multi-agent host on a temporary SQLite store",
        description="A simulated multi-agent host on an embedded SQLite file in a temporary folder; with --store "
        "it runs on that (new, empty) store instead and keeps it.",
    )
    sub.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help="an empty store to run on and keep")

    sub = command("serve", "speak ACP over stdio: a reference agent backed by the registry")
    sub.add_argument("--page-size", type=_page_size, default=50, metavar="N", help="sessions per page (50)")

    sub = commands.add_parser(
        "import-agents",
        help="import the histories agents already keep (Claude Code, Codex, Gemini CLI, ...)",
        description="Import the session histories coding agents already keep into the registry.",
    )
    unavailable = None
    if with_importers:
        try:
            importers = importlib.import_module(_IMPORTERS_MODULE)
        except ImportError as exc:
            unavailable = _unavailable("import-agents", _IMPORTERS_MODULE, exc)
        else:
            importers.add_arguments(sub)
            with contextlib.suppress(argparse.ArgumentError):  # unless the importers define --store themselves
                sub.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help="the store")
    return parser, unavailable


def _unavailable(command: str, module: str, exc: ImportError) -> str:
    if exc.name is not None and module.startswith(exc.name):
        return f"{command} is not available in this installation ({module} is missing)"
    return f"{command} is not available: {module} could not be loaded ({exc})"


def _asked_for(argv: Sequence[str], command: str) -> bool:
    """Whether ``command`` is the command in ``argv`` (before the full parser exists)."""
    pre = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    pre.add_argument("--store")
    pre.add_argument("command", nargs="?")
    try:
        known, _ = pre.parse_known_args(argv)
    except argparse.ArgumentError:
        return False
    return bool(known.command == command)


def _serve(args: argparse.Namespace) -> int:
    from registry.cli.stores import locate, resolve_url  # noqa: PLC0415

    url = resolve_url(locate(args.store), create=True)
    try:
        agent = importlib.import_module(_AGENT_MODULE)
    except ImportError as exc:
        raise InputError(_unavailable("serve", _AGENT_MODULE, exc)) from None
    return int(agent.serve(url, page_size=args.page_size))


def _import_agents(args: argparse.Namespace) -> int:
    from registry.cli.stores import locate, resolve_url  # noqa: PLC0415

    args.store = resolve_url(locate(args.store), create=True)
    return int(importlib.import_module(_IMPORTERS_MODULE).run(args))


def _handler(name: str) -> Callable[[argparse.Namespace], int]:
    if name == "serve":
        return _serve
    if name == "import-agents":
        return _import_agents
    module, function = _HANDLERS[name].split(":")
    handler: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
    return handler


def _fail(message: str) -> None:
    print(f"{_PROG}: {' '.join(message.split())}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (0 ok, 1 problem found, 2 usage or input error)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, unavailable = _build_parser(with_importers=_asked_for(argv, "import-agents"))
    if unavailable is not None:
        _fail(unavailable)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command not in ("serve", "import-agents"):  # those configure their own logging
        logging.basicConfig(level=logging.WARNING, format=f"{_PROG}: %(message)s")
    return _run(_handler(args.command), args)


def _run(handler: Callable[[argparse.Namespace], int], args: Any) -> int:
    """The one place errors become exit codes and one line on stderr."""
    from events.errors import CorruptEventError, RegistryError, StoreFormatError  # noqa: PLC0415
    from registry.errors import InvalidParams, SessionNotFound  # noqa: PLC0415

    try:
        return handler(args)
    except CommandError as exc:
        _fail(str(exc))
        return exc.exit_code
    except (StoreFormatError, InvalidParams, SessionNotFound) as exc:
        _fail(str(exc))
        return EXIT_USAGE
    except CorruptEventError as exc:
        _fail(f"{exc} (acp-registry verify lists every problem)")
        return EXIT_PROBLEM
    except RegistryError as exc:
        _fail(str(exc))
        return EXIT_PROBLEM
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `acp-registry export | head`): stop quietly, without a flush error at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
