"""The command table and how a command line runs: ``COMMANDS`` names each command with its module and its help,
the parser is built from it (a command's own arguments from its module, the first time it parses), and errors
become exit codes here, in one place (``_run``): 0 ok, 1 a problem found in a store that opened (``verify``, a
corrupt record, a store that failed mid-command), 2 usage or input error (a bad option, a bad or unusable store
URL, a store that cannot be opened: a missing or foreign file, an unreachable or refusing server), each reported as
one line on stderr; 130 after Ctrl-C where a command does not treat it as the way to stop (``registry.cli.stopping``
runs those: ``tail``, ``serve`` and ``import-agents --watch``).

``registry.cli.main`` loads this module once the process's start is set (the collector paused, msgspec imported
without typing_extensions: ``registry.cli.start``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn, Protocol, cast

from events.errors import CorruptEventError, RegistryError, StoreFormatError
from events.logger import configure as configure_logging
from events.logger import settle as settle_logging
from registry import __version__
from registry.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, CommandError, InputError
from registry.cli.start import STOPPED_BY_SIGNAL, started
from registry.cli.terminal import printable
from registry.errors import InvalidParams, SessionExists, SessionNotFound
from registry.session_commands import COMMANDS as SESSION_COMMANDS

__all__ = ["COMMANDS", "answer", "run"]

_PROG = "acp-registry"

COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("registry.cli.list_sessions", "the session/list view: most recent first (one page, or --all)"),
    "search": ("registry.cli.search", "find sessions by what was said in them, across every agent"),
    "show": ("registry.cli.show", "a session's current info"),
    "transcript": ("registry.cli.transcript", "a session's conversation in order (--markdown, --json)"),
    "history": ("registry.cli.history", "every event of a session: position, time, what it changed"),
    "delete": ("registry.cli.delete", "delete a session for good and erase its conversation from disk"),
    **{  # each session command's, as its row declares it: one module runs them all
        row.command_line.name: ("registry.cli.session_command", row.command_line.help)
        for row in SESSION_COMMANDS
        if row.command_line is not None
    },
    "fork": ("registry.cli.fork", "a new session from an existing one as of a log position (a reference)"),
    "replay": ("registry.cli.replay", "time travel: the list as session/list answered at a point of the log"),
    "tail": ("registry.cli.tail", "follow the change stream live (Ctrl-C stops)"),
    "usage": ("registry.cli.usage", "what the sessions used and cost: totals by day, week, month, agent, cwd, model"),
    "stats": ("registry.cli.stats", "events, sessions, cwds, log size, head position, read model"),
    "verify": ("registry.cli.verify", "check the log, its read model and kept snapshots; exit 1 on a problem"),
    "rebuild": ("registry.cli.rebuild", "fold the read model again from the whole log (derived: nothing is lost)"),
    "export": ("registry.cli.export", "the log as JSON lines on stdout (acp-registry export > log.jsonl)"),
    "import": ("registry.cli.import_log", "append the records of an exported file (importing twice is harmless)"),
    "demo": ("registry.cli.demo", "a simulated multi-agent host on a temporary SQLite store"),
    "serve": ("registry.cli.serve", "speak ACP over stdio: a reference agent backed by the registry"),
    "proxy": ("registry.cli.proxy", "the registry in front of any ACP agent: acp-registry proxy -- COMMAND [ARGS...]"),
    "import-agents": (
        "registry.cli.import_agents",
        "import the histories agents already keep (Claude Code, Codex, Gemini CLI, ...)",
    ),
}
"""command -> (its module, its one-line help)."""

_OUTPUT_IS_JSON: Final = frozenset({"export", "proxy", "serve"})
"""The commands whose stdout is JSON whatever is asked (JSON lines, JSON-RPC): no ``--json`` offered after their
name (``acp-registry --json serve`` is still accepted, and changes nothing, as before any command)."""


class _Command(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Parser(argparse.ArgumentParser):
    _checking = False

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """argparse checks each new argument's metavar with a help formatter, which asks the terminal's size (and
        imports shutil, with bz2 and lzma, to do so) for help that is not being printed: that check gets a width."""
        self._checking = True
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            self._checking = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self._checking:
            return self.formatter_class(prog=self.prog, width=80)  # type: ignore[call-arg]
        return super()._get_formatter()

    def error(self, message: str) -> NoReturn:
        """One line, like every other error (argparse would print the usage first)."""
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # A mistyped command (or --agent name) gets the nearest choices, as git does.
        choices = action.choices
        if choices is None or value in choices:
            return
        import difflib  # noqa: PLC0415 - only for a mistyped name

        close = difflib.get_close_matches(str(value), [str(choice) for choice in choices], n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        if action.dest == "command":
            raise argparse.ArgumentError(None, f"unknown command {value!r}{hint or ''}")
        listed = ", ".join(map(str, choices))
        raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {listed}){hint}")


class _CommandParser(_Parser):
    """A command's parser, whose arguments come from its module the first time it parses (or prints help)."""

    module_name: str = ""
    _loaded = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.load()
        parsed, rest = super().parse_known_args(args, namespace)
        if getattr(parsed, "json", None) is False:  # a module's own --json, not given: keep `--json COMMAND`'s
            del parsed.json
        return parsed, rest

    def load(self) -> _Command:
        command = _module(self.module_name, self.prog)
        if not self._loaded:
            self._loaded = True
            shared = list(self._actions)
            command.add_arguments(self)
            for action in shared:
                if not action.option_strings and action in self._actions:  # a shared option the module redefined
                    self._remove_action(action)  # ("resolve" empties it, and it would show as a positional)
                    for group in self._action_groups:
                        if action in group._group_actions:
                            group._group_actions.remove(action)
        return command


def _module(name: str, prog: str) -> _Command:
    try:
        return cast(_Command, importlib.import_module(name))
    except ImportError as exc:
        if exc.name is not None and name.startswith(exc.name):
            raise InputError(f"{prog} is not available in this installation ({name} is missing)") from None
        raise InputError(f"{prog} is not available: {name} could not be loaded ({exc})") from None


def _version() -> str:
    return f"{_PROG} {__version__}"


class _VersionAction(argparse.Action):
    """``--version`` (``registry.__version__``, which also sets the package's version at build time)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        print(_version())
        parser.exit()


class _TopParser(_Parser):
    """The top-level parser: its epilog names the default store, found (registry.user_dirs) only when help is shown."""

    def format_help(self) -> str:
        self.epilog = _epilog()
        return super().format_help()


def _epilog() -> str:
    from registry.cli.where import CREATES_STORE, ENV_STORE, default_store_url  # noqa: PLC0415 - only for help

    default = default_store_url()
    env = os.environ.get(ENV_STORE)
    return f"""store:
  default: {default}
           (created by the first command that records: {", ".join(CREATES_STORE)})
  ${ENV_STORE} overrides the default{f", and names {env} now" if env else ""}; --store URL overrides both
  URLs: memory://, sqlite:///abs/path.db[?synchronous=normal], postgresql://user@host:port/db[?schema=NAME]

exit codes: 0 ok, 1 a problem found (verify, a corrupt record), 2 usage or input error (a bad option or URL,
a store that cannot be opened: a missing file, not a registry store, an unreachable server)"""


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The commands, each named with its help up front and its parser made only when it is parsed: a run builds the
    one parser it uses, not one per command (building the others was most of what ``list`` spent parsing)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._declared: dict[str, tuple[str, str]] = {}

    def declare(self, name: str, module: str, text: str) -> None:
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), text))
        self._name_parser_map[name] = None  # a choice already (help, suggestions); its parser is made by __call__
        self._declared[name] = module, text

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        name = values[0]
        if name in self._declared and self._name_parser_map[name] is None:
            module, text = self._declared[name]
            common = _Parser(add_help=False)
            # SUPPRESS: given after the command name it overrides the same option given before it, and only then.
            store, json = "the store (see acp-registry --help)", "exact JSON instead of tables"
            common.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help=store)
            if name not in _OUTPUT_IS_JSON:
                common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=json)
            del self._name_parser_map[name]  # add_parser makes it
            # "resolve": a command's module may define --store or --json itself (import-agents does).
            sub = self.add_parser(name, description=text, parents=[common], conflict_handler="resolve")
            sub.module_name = module
        super().__call__(parser, namespace, values, option_string)


def _build_parser() -> _Parser:
    parser = _TopParser(
        prog=_PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Look into the session log of AI coding agents: the session/list view, time travel, the live\n"
        "change stream, checks, export and import.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    parser.add_argument("--store", metavar="URL", default=None, help="the store to work on (see below)")
    parser.add_argument("--json", action="store_true", help="exact JSON instead of tables (also after the command)")
    parser.register("action", "commands", _Commands)
    commands = parser.add_subparsers(  # prog: as argparse would word it, without a formatter sized to the terminal
        dest="command", metavar="COMMAND", parser_class=_CommandParser, action="commands", prog=_PROG
    )
    for name, (module, text) in COMMANDS.items():
        cast(_Commands, commands).declare(name, module, text)
    return parser


def _fail(message: str) -> None:
    print(f"{_PROG}: {printable(' '.join(message.split()))}", file=sys.stderr, flush=True)


def run(words: list[str]) -> int:
    """Run the command ``words`` name; returns its exit code (0 ok, 1 problem found, 2 usage or input error, 130
    after Ctrl-C), the start over (``started``) by the time it returns."""
    try:
        return answer(words)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        started()


def answer(argv: list[str]) -> int:
    """The command's exit code; a Ctrl-C is the caller's to say (``run``, ``registry.cli.stopping``)."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except CommandError as exc:  # a command whose module cannot be loaded
        _fail(str(exc))
        return exc.exit_code
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command not in ("serve", "proxy", "import-agents"):  # those configure their own logging
        configure_logging(_log_lines)
    module, _ = COMMANDS[args.command]
    command = _module(module, args.command)
    settle_logging()  # a library the command's module loaded may log by itself
    return _run(command.run, args)


def _log_lines() -> None:
    """Warnings as one line each on stderr, like the errors (applied when something first logs)."""
    import logging  # noqa: PLC0415 - only once something logs (its import is a part of a command's start)

    logging.basicConfig(level=logging.WARNING, format=f"{_PROG}: %(message)s")


def _run(handler: Callable[[argparse.Namespace], int], args: Any) -> int:
    """The one place errors become exit codes and one line on stderr."""
    try:
        return handler(args)
    except CommandError as exc:
        _fail(str(exc))
        return exc.exit_code
    except (StoreFormatError, InvalidParams, SessionNotFound, SessionExists) as exc:  # what the user gave: input
        _fail(str(exc))
        return EXIT_USAGE
    except CorruptEventError as exc:
        _fail(f"{exc} (acp-registry verify lists every problem)")
        return EXIT_PROBLEM
    except RegistryError as exc:
        _fail(str(exc))
        return EXIT_PROBLEM
    except KeyboardInterrupt:
        watching = args.command == "import-agents" and getattr(args, "watch", False)
        return EXIT_OK if args.command in STOPPED_BY_SIGNAL or watching else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `acp-registry export | head`): stop quietly, without a flush error at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
