"""A session command is declared once (``registry.session_commands``): a method of ``SessionCommands`` and the row
naming it. What follows from the two is held here: the facade has the method, the ACP table's entry has the
row's name, capability and the method's params, the command line has the row's command, and a command added the
same way is served by the table's one generic handler without another line anywhere."""

from __future__ import annotations

import typing
from collections.abc import Iterator

import msgspec
import pytest

from events.model import Event, SessionInfoChanged
from registry.acp.methods import METHODS, Context, Role, _commanding
from registry.cli.commands import COMMANDS as CLI_COMMANDS
from registry.errors import InvalidParams, SessionNotFound
from registry.service import SessionRegistry
from registry.session_commands import COMMANDS, SessionCommand, SessionCommands, command, wire_params


@pytest.fixture
def registry() -> Iterator[SessionRegistry]:
    with SessionRegistry.open("memory://", follow=False) as opened:
        yield opened


@pytest.mark.parametrize("row", COMMANDS, ids=lambda row: row.method)
def test_each_row_names_a_method_the_facade_has_and_the_table_serves(row: SessionCommand) -> None:
    method = getattr(SessionCommands, row.attr)
    assert getattr(SessionRegistry, row.attr) is method  # the facade's method is the command's
    assert command(row.method) is row
    entry = METHODS[row.method]
    assert entry.params is wire_params(row)
    assert entry.role("serve") is entry.role("proxy") is Role.ANSWER
    assert (entry.capability is None and row.capability is None) or (
        entry.capability is not None and entry.capability.path == row.capability
    )
    hints = typing.get_type_hints(method)
    code = method.__code__
    wire = [(f.name, f.type) for f in msgspec.structs.fields(wire_params(row))]
    assert wire == [(name, hints[name]) for name in code.co_varnames[1 : code.co_argcount]]
    assert wire[0] == ("session_id", str)
    if row.command_line is not None:
        assert CLI_COMMANDS[row.command_line.name] == ("registry.cli.session_command", row.command_line.help)


def test_the_wire_params_are_the_methods_parameters_before_the_star() -> None:
    delete = wire_params(command("session/delete") or COMMANDS[0])
    assert [f.encode_name for f in msgspec.structs.fields(delete)] == ["sessionId"]  # ``reason`` is the facade's
    rename = wire_params(command("_registry/rename") or COMMANDS[0])
    assert msgspec.structs.asdict(msgspec.convert({"sessionId": "s", "title": None}, rename))["title"] is None
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"sessionId": "s"}, rename)  # required: null clears, absent is a mistake


class _Colours(SessionRegistry):
    """A command added the house's way: a method (and a row below), nothing else."""

    def set_colour(self, session_id: str, colour: str) -> str:
        if colour not in ("red", "blue"):
            raise InvalidParams(f"colour must be red or blue, not {colour!r}")

        def events(state: typing.Any) -> list[Event]:
            return [SessionInfoChanged(meta={**(state.meta or {}), "colour": colour})]

        self._write(session_id, events)
        return colour


def test_a_new_command_is_a_method_and_a_row() -> None:
    row = SessionCommand("_example/set_colour", "set_colour", None, frozenset({"meta"}), answer=lambda c: {"c": c})
    handle = _commanding(row)
    with _Colours.open("memory://", follow=False) as registry:
        registry.create("/w", session_id="s1")
        context = Context(registry)
        # wire_params makes this of a SessionCommands method: a method of the subclass gets it written here
        struct = msgspec.defstruct("SetColourParams", [("session_id", str), ("colour", str)], rename="camel")
        assert handle(context, msgspec.convert({"sessionId": "s1", "colour": "red"}, struct)) == {"c": "red"}
        state = registry.state("s1")
        assert state is not None and state.meta == {"colour": "red"}
        with pytest.raises(InvalidParams):
            handle(context, msgspec.convert({"sessionId": "s1", "colour": "green"}, struct))
        with pytest.raises(SessionNotFound):
            handle(context, msgspec.convert({"sessionId": "nope", "colour": "red"}, struct))


def test_an_archive_closes_the_session_first_as_acp_says(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s1")
    context = Context(registry, open_sessions={"s1", "s2"})
    assert registry.handle("session/archive", {"sessionId": "s1"}) == {}
    assert METHODS["session/unarchive"].answer(context, {"sessionId": "s1"}) == {}
    assert context.open_sessions == {"s1", "s2"}  # an unarchive closes nothing
    assert METHODS["session/archive"].answer(context, {"sessionId": "s1"}) == {}
    assert context.open_sessions == {"s2"}
    assert METHODS["session/set_title"].answer(context, {"sessionId": "s1", "title": "  Mine "}) == {"title": "Mine"}
