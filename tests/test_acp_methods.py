"""The ACP method table (`registry.acp.methods`): params as msgspec structs, errors naming the field, no facade."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events.memory import MemoryStore
from registry import SessionRegistry
from registry.acp import methods, params
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


@pytest.mark.parametrize("module", ["methods", "params", "content", "jsonrpc"])
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
    assert params.convert_params({"cwd": "/a", "pageSize": 3}, params.ListParams) == params.ListParams(cwd="/a")
    assert params.convert_params(None, params.ListParams) == params.ListParams()
    delete = methods.METHODS["session/delete"].params
    assert params.convert_params({"sessionId": "x"}, delete).session_id == "x"
    with pytest.raises(InvalidParams) as caught:
        params.convert_params({"text": 1}, delete, "prompt[3]")
    assert caught.value.data == {"field": "prompt[3].sessionId"}


# -- the table and the surfaces built from it ------------------------------------------------------------------


def test_each_method_is_declared_once_with_a_struct_and_a_role_per_surface() -> None:
    for name, method in methods.METHODS.items():
        assert method.name == name
        assert isinstance(method.params, type)
        assert set(method.roles) <= {"serve", "sdk", "proxy"}, name
        # a method the table answers has a handler; one a surface answers itself has none
        answered = methods.Role.ANSWER in method.roles.values()
        assert (method.handler is not None) == answered, name
        assert methods.Role.OWN not in method.roles.values() or method.handler is None, name


def test_capabilities_are_derived_from_the_table() -> None:
    advertised = methods.capabilities("serve")
    expected: dict[str, Any] = {"sessionCapabilities": {}}
    for method in methods.served("serve"):
        if method.capability is not None:
            *parents, key = method.capability.path
            node = expected
            for parent in parents:
                node = node.setdefault(parent, {})
            node[key] = method.capability.value
    assert advertised == expected
    assert advertised["loadSession"] is True
    assert {"list", "delete", "resume", "close"} <= set(advertised["sessionCapabilities"])
    # the SDK adapter advertises only what the registry answers for it
    sdk = methods.capabilities("sdk", (methods.Role.ANSWER,))
    assert "loadSession" not in sdk and {"list", "delete"} <= set(sdk["sessionCapabilities"])


def test_a_surface_must_implement_exactly_its_own_methods(registry: SessionRegistry) -> None:
    context = methods.Context(registry)
    own: dict[str, Callable[[Any], dict[str, Any]]] = {
        m.name: (lambda request: {}) for m in methods.served("serve", (methods.Role.OWN,))
    }
    bound = methods.bind("serve", context, own)
    assert set(bound) == {m.name for m in methods.served("serve")}
    forgotten = dict(own)
    forgotten.pop("session/prompt")
    with pytest.raises(ValueError, match="session/prompt"):
        methods.bind("serve", context, forgotten)
    with pytest.raises(ValueError, match="session/stray"):
        methods.bind("serve", context, {**own, "session/stray": lambda request: {}})


def test_own_handlers_get_the_tables_struct(registry: SessionRegistry) -> None:
    seen: list[Any] = []

    def remember(request: Any) -> dict[str, Any]:
        seen.append(request)
        return {}

    own = {m.name: remember for m in methods.served("serve", (methods.Role.OWN,))}
    bound = methods.bind("serve", methods.Context(registry), own)
    assert bound["session/new"]({"cwd": "/w", "mcpServers": []}) == {}
    assert seen == [params.NewSessionParams(cwd="/w")]
    with pytest.raises(InvalidParams, match="cwd is missing"):
        bound["session/new"]({})


def test_a_context_in_front_of_an_agent_maps_ids(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="codex:abc", at=1)
    registry.create("/w", session_id="mine", at=2)
    context = methods.Context(registry, agent="codex")
    assert context.store_id("abc") == "codex:abc" and context.wire_id("codex:abc") == "abc"
    listed = methods.METHODS["session/list"].answer(context, {"cwd": "/w"})
    assert "abc" in [s["sessionId"] for s in listed["sessions"]]
    context.opened("abc")
    assert methods.METHODS["session/delete"].answer(context, {"sessionId": "abc"}) == {}
    assert "abc" not in context.open_sessions
    state = registry.state("codex:abc")
    assert state is not None and state.deleted


def test_a_proxy_forwards_what_its_agent_has_and_answers_the_rest() -> None:
    agent_caps = {"loadSession": True, "sessionCapabilities": {"status": {}, "fork": None, "resume": {}}}
    table = methods.METHODS
    assert table["session/status"].forwards("proxy", agent_caps)  # the agent has it: relayed
    assert not table["session/status"].forwards("proxy", {"sessionCapabilities": {}})  # else answered here
    assert not table["session/list"].forwards("proxy", agent_caps)  # always answered from the registry
    assert table["session/prompt"].forwards("proxy", {})
    assert not table["session/fork"].advertised_in(agent_caps)  # null is "not supported"
    advertised = methods.capabilities("proxy", agent_capabilities=agent_caps)
    assert advertised["loadSession"] is True
    session_caps = advertised["sessionCapabilities"]
    assert {"list", "delete", "title", "archive", "status", "resume"} <= set(session_caps)
    assert "fork" not in session_caps and "close" not in session_caps  # forwarded, and the agent lacks them


def test_a_page_of_encoded_sessions_is_the_same_json_and_follows_each_change(tmp_path: Path) -> None:
    """``serve``'s context encodes each listed session once per version: its answer is the very bytes of the
    builtins answer, page after page and after the sessions change (a cursor's page, a title, an archive)."""
    with SessionRegistry.open(f"sqlite://{tmp_path}/s.db", page_size=2, follow=False) as registry:
        for n in range(5):
            registry.create(f"/w/{n % 2}", session_id=f"s{n}", at=(n + 1) * 10**9)
        plain, encoded = methods.Context(registry), methods.Context(registry, encoded=methods.EncodedSessions(size=4))
        table = methods.METHODS["session/list"]

        def same(params: dict[str, Any]) -> dict[str, Any]:
            answer = table.answer(encoded, params)
            assert all(isinstance(session, msgspec.Raw) for session in answer["sessions"])
            expected = table.answer(plain, params)
            assert msgspec.json.encode(answer) == msgspec.json.encode(expected)
            return expected

        first = same({})
        assert [s["sessionId"] for s in first["sessions"]] == ["s4", "s3"] and first["sessions"][0]["archived"] is False
        assert same({}) == first  # served again from what was encoded
        assert len(same({"cursor": first["nextCursor"]})["sessions"]) == 2
        registry.set_title("s4", "Renamed")
        registry.archive("s3")
        again = same({})
        assert again["sessions"][0]["title"] == "Renamed" and again["sessions"][1]["sessionId"] == "s2"
        assert same({"archived": "only"})["sessions"][0]["archived"] is True
        walked, cursor = [], None
        while True:  # past the bound (4): older ones are dropped and encoded again when asked for
            page = same({"archived": "include"} | ({} if cursor is None else {"cursor": cursor}))
            walked += [s["sessionId"] for s in page["sessions"]]
            if (cursor := page.get("nextCursor")) is None:
                break
        assert sorted(walked) == [f"s{n}" for n in range(5)]
