"""The ACP method table (`registry.acp.methods`): params as msgspec structs, errors naming the field, no facade."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from events.memory import MemoryStore
from registry import SessionRegistry
from registry.acp import methods
from registry.errors import InvalidParams, MethodNotFound, rpc_error

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def registry() -> Iterator[SessionRegistry]:
    with SessionRegistry(MemoryStore(), follow=False) as opened:
        yield opened


def _runtime_imports(path: Path) -> set[str]:
    """The modules a file imports when it runs (imports under ``if TYPE_CHECKING:`` left out)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for statement in block.body
        for node in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("module", ["methods", "content", "jsonrpc"])
def test_the_acp_edge_never_imports_the_facade(module: str) -> None:
    imports = _runtime_imports(ROOT / "registry" / "acp" / f"{module}.py")
    assert "registry.service" not in imports and "registry.SessionRegistry" not in imports, imports


def test_session_registry_handle_is_the_method_table(registry: SessionRegistry) -> None:
    for n in range(3):
        registry.create(f"/w/{n}", session_id=f"s{n}", at=n + 1)
    params = {"cwd": "/w/1/"}
    assert registry.handle("session/list", params) == methods.handle(registry, "session/list", params)
    assert methods.handle(registry, "session/delete", {"sessionId": "s1"}) == {}
    assert registry.handle("session/list", params) == {"sessions": []}
    for method in ("session/new", ["session/list"], None):
        with pytest.raises(MethodNotFound):
            methods.handle(registry, method, {})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("method", "params", "field", "message"),
    [
        ("session/list", [], "params", "params must be an object, not an array"),
        ("session/list", {"cwd": 7}, "cwd", "cwd must be a string, not a number"),
        ("session/list", {"cursor": {"a": 1}}, "cursor", "cursor must be a string, not an object"),
        ("session/delete", {}, "sessionId", "sessionId is missing"),
        ("session/delete", {"sessionId": None}, "sessionId", "sessionId must be a non-empty string, not null"),
        ("session/delete", {"sessionId": ["s"]}, "sessionId", "sessionId must be a non-empty string, not an array"),
    ],
)
def test_wrong_params_name_their_field(
    registry: SessionRegistry, method: str, params: Any, field: str, message: str
) -> None:
    with pytest.raises(InvalidParams) as caught:
        registry.handle(method, params)
    error = rpc_error(caught.value)
    assert (error.code, error.message, error.data) == (-32602, message, {"field": field})


@pytest.mark.parametrize(
    ("session_id", "message"),
    [
        ("", "sessionId must be a non-empty string"),
        ("s" * 1025, "sessionId is 1025 bytes long"),
        ("bad\nid", "sessionId must not contain control characters"),
    ],
)
def test_delete_checks_the_id_before_the_store_sees_it(
    registry: SessionRegistry, session_id: str, message: str
) -> None:
    with pytest.raises(InvalidParams, match=message):
        registry.handle("session/delete", {"sessionId": session_id})
    assert registry.store.head() == 0


def test_the_params_structs_are_typed() -> None:
    assert methods.convert_params({"cwd": "/a", "pageSize": 3}, methods.ListParams) == methods.ListParams(cwd="/a")
    assert methods.convert_params(None, methods.ListParams) == methods.ListParams()
    assert methods.convert_params({"sessionId": "x"}, methods.DeleteParams).session_id == "x"
    with pytest.raises(InvalidParams) as caught:
        methods.convert_params({"text": 1}, methods.DeleteParams, "prompt[3]")
    assert caught.value.data == {"field": "prompt[3].sessionId"}
