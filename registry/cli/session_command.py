"""The ``acp-registry`` command of a session command (``title``, ``archive``, ``unarchive``, ...): one module for
every row of ``registry.session_commands.COMMANDS`` that has a ``command_line``.

Its arguments are ``SESSION`` (the id as a user pastes it: ``ids.resolve_session``) and the command's params, in
order (a boolean as ``true`` or ``false``); it runs the facade's method, then prints what the row says it did, or
with ``--json`` the command's answer (the session's ``SessionInfo`` when the answer is empty).
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from registry.cli.ids import add_session, the_session
from registry.cli.terminal import printable, stdout_console, write_json
from registry.session_commands import COMMANDS, SessionCommand, wire_params

__all__ = ["add_arguments", "command_of", "run"]

_BY_NAME = {row.command_line.name: row for row in COMMANDS if row.command_line is not None}


def command_of(name: str) -> SessionCommand:
    """The session command ``acp-registry NAME`` runs."""
    return _BY_NAME[name]


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "yes", "on", "1"):
        return True
    if text.lower() in ("false", "no", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    row = command_of(parser.prog.split()[-1])
    assert row.command_line is not None
    add_session(parser)
    for field in msgspec.structs.fields(wire_params(row))[1:]:
        kind = bool if field.type is bool else None
        parser.add_argument(
            field.name,
            metavar=field.name.upper(),
            type=_boolean if kind is bool else str,
            help=row.command_line.arguments.get(field.name),
            **({} if field.required else {"nargs": "?", "default": field.default}),
        )


def run(args: argparse.Namespace) -> int:
    row = command_of(args.command)
    assert row.command_line is not None
    params = {field.name: getattr(args, field.name) for field in msgspec.structs.fields(wire_params(row))[1:]}
    with the_session(args) as (registry, session_id):
        returned: Any = row.run(registry, session_id, params)
        answer = row.answer(returned) or registry.get(session_id)
    if args.json:
        write_json(answer)
    else:
        said = f"{session_id}: {row.command_line.says(returned)}"
        stdout_console().print(printable(said), markup=False, emoji=False, soft_wrap=True)
    return 0
