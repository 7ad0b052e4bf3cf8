"""One error tree: every error class the library defines is a ``RegistryError``; JSON-RPC codes are chosen in one
place (``registry.errors``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import msgspec
import pytest

import events
import registry
from events.errors import RegistryError
from registry.errors import rpc_error
from registry.importers.databases import SchemaError
from registry.importers.state import ImportStateError
from registry.snapshot import SnapshotError

ROOT = Path(__file__).resolve().parent.parent
CODES = {-32700, -32600, -32601, -32602, -32603, -32002, -32010}


def _library_modules() -> list[str]:
    names = ["events", "registry"]
    for package in (events, registry):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.startswith("registry.cli"):  # the application: its errors are exit codes (cli/errors.py)
                continue
            if info.name in {"events.testing"}:  # the shipped contract suite: pytest's assertions, not ours
                continue
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _library_modules())
def test_every_error_the_library_defines_is_a_registry_error(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (psycopg, the SDK) not installed
        pytest.skip(str(exc))
    for _, value in inspect.getmembers(module, inspect.isclass):
        if value.__module__ == name and issubclass(value, BaseException):
            assert issubclass(value, RegistryError), f"{name}.{value.__name__} is outside the error tree"


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (SnapshotError("damaged"), ValueError),
        (ImportStateError("a folder"), ValueError),
        (SchemaError("missing columns"), ValueError),
    ],
)
def test_errors_once_outside_the_tree_are_in_it_and_keep_their_builtin(error: Exception, builtin: type) -> None:
    assert isinstance(error, RegistryError) and isinstance(error, builtin)
    answer = msgspec.to_builtins(rpc_error(error))
    assert answer == {"code": -32603, "message": str(error)}  # the library's own: its message is shown


def _code_literals(path: Path) -> list[int]:
    """The JSON-RPC error codes written as numbers in a source file."""
    return [
        -node.operand.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
        and -node.operand.value in CODES
    ]


def test_json_rpc_codes_are_chosen_in_one_place() -> None:
    sources = [*ROOT.joinpath("registry").rglob("*.py"), *ROOT.joinpath("events").rglob("*.py")]
    holders = {str(path.relative_to(ROOT)) for path in sources if _code_literals(path)}
    assert holders == {"registry/errors.py"}


BAD_PARAMS = [
    ("session/list", {"cwd": "relative/path"}, "cwd"),
    ("session/list", {"cwd": 7}, "cwd"),
    ("session/list", {"cursor": "!!not a cursor!!"}, "cursor"),
    ("session/list", {"archived": "sometimes"}, "archived"),
    ("session/list", [], "params"),
    ("session/set_title", {"sessionId": "s1", "title": "   "}, "title"),
    ("session/set_title", {"sessionId": "s1", "title": "x" * 5000}, "title"),
    ("session/set_title", {"title": "x"}, "sessionId"),
    ("session/delete", {"sessionId": " s1"}, "sessionId"),
    ("session/delete", {"sessionId": "s1\x00"}, "sessionId"),
    ("session/archive", {"sessionId": 5}, "sessionId"),
    ("session/fork", {"sessionId": "s1", "cwd": "/w", "additionalDirectories": ["x"]}, "additionalDirectories[0]"),
    ("session/fork", {"sessionId": "s1"}, "cwd"),
    ("_registry/rename", {"sessionId": "s1", "title": 3}, "title"),
]


@pytest.mark.parametrize(("method", "params", "field"), BAD_PARAMS)
def test_every_invalid_params_error_names_its_field_in_data_the_same_way(
    method: str, params: object, field: str
) -> None:
    """-32602, whichever check refused it (the params' shapes, the registry's commands, the cursor, the cwd rules):
    ``data.field`` is the field as the request spells it, and the message begins with it."""
    with registry.SessionRegistry.open("memory://") as reg:
        reg.create("/w", session_id="s1")
        with pytest.raises(registry.InvalidParams) as caught:
            reg.handle(method, params)
    error = rpc_error(caught.value)
    assert error.code == -32602
    assert isinstance(error.data, dict) and error.data.get("field") == field, (method, params, error)
    assert error.message.startswith(field) or error.message.startswith("invalid cursor"), error.message
