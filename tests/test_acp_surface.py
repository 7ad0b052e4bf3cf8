"""The session surface of ACP's unstable schema on a real `acp-registry serve`: `session/set_title`,
`session/archive` / `unarchive` with `session/list`'s `archived`, `session/status`, `session/fork`.

Every response and notification the server writes in these tests is validated against the official SDK's
`schema.unstable.json` (tests/fixtures/acp-schema, see its SOURCE.md) with a JSON-schema validator: the response
definition the schema names for the method (`x-method`), `Error` for an error, `SessionNotification` for a
`session/update`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.acp_wire import WireServer, request

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "acp-schema" / "schema.unstable.json").read_text())
DEFS: dict[str, Any] = SCHEMA["$defs"]
RESPONSES = {
    spec["x-method"]: name
    for name, spec in DEFS.items()
    if spec.get("x-side") == "agent" and name.endswith("Response") and "x-method" in spec
}
NEW_METHODS = ("session/set_title", "session/archive", "session/unarchive", "session/status", "session/fork")


@cache
def _validator(definition: str) -> Draft202012Validator:
    return Draft202012Validator({"$defs": DEFS, "$ref": f"#/$defs/{definition}"})


class CheckedServer:
    """A ``WireServer`` whose every answer and notification is validated against the schema as it is read."""

    def __init__(self, server: WireServer) -> None:
        self.server = server
        self.checked: dict[str, int] = {}
        self._ids = 0

    def _check(self, definition: str, value: Any) -> None:
        errors = sorted(_validator(definition).iter_errors(value), key=str)
        assert not errors, f"{definition}: {errors[0].message} in {value}"
        self.checked[definition] = self.checked.get(definition, 0) + 1

    def exchange(self, method: str, params: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response (validated) and the notifications written before it (each validated)."""
        self._ids += 1
        self.server.send(request(self._ids, method, params))
        answer, before = self.server.response(self._ids)
        for message in before:
            if message["method"] == "session/update":
                self._check("SessionNotification", message["params"])
            else:  # the registry's own extension notifications (opted into at initialize)
                assert message["method"].startswith("_registry/"), message
        if "error" in answer:
            self._check("Error", answer["error"])
        elif method in RESPONSES:  # an extension method (``_registry/rename``) has no definition there
            self._check(RESPONSES[method], answer["result"])
        return answer, before

    def result(self, method: str, params: Any) -> Any:
        answer, _ = self.exchange(method, params)
        assert "result" in answer, answer
        return answer["result"]

    def error(self, method: str, params: Any) -> dict[str, Any]:
        answer, _ = self.exchange(method, params)
        assert "error" in answer, answer
        error: dict[str, Any] = answer["error"]
        return error

    def replay(self, session_id: str) -> list[str]:
        """The texts ``session/load`` replays, in order."""
        _, notes = self.exchange("session/load", {"sessionId": session_id, "cwd": "/w", "mcpServers": []})
        return [n["params"]["update"]["content"]["text"] for n in notes if "content" in n["params"]["update"]]

    def listed(self, **params: Any) -> dict[str, dict[str, Any]]:
        return {s["sessionId"]: s for s in self.result("session/list", params)["sessions"]}


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path}/log.db"


@pytest.fixture
def agent(url: str) -> Iterator[CheckedServer]:
    with WireServer(url) as running:
        checked = CheckedServer(running)
        checked.result("initialize", {"protocolVersion": 1})
        yield checked
    assert b"Traceback" not in running.stderr, bytes(running.stderr).decode(errors="replace")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CheckedServer]:
    """One server for the refusal tests: each makes a session of its own, and refusals write nothing."""
    with WireServer(f"sqlite://{tmp_path_factory.mktemp('surface')}/log.db") as running:
        checked = CheckedServer(running)
        checked.result("initialize", {"protocolVersion": 1})
        yield checked
    assert b"Traceback" not in running.stderr, bytes(running.stderr).decode(errors="replace")


def _new(agent: CheckedServer, cwd: str = "/w") -> str:
    session_id: str = agent.result("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]
    return session_id


def _prompt(agent: CheckedServer, session_id: str, text: str) -> None:
    assert agent.result("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}) == {
        "stopReason": "end_turn"
    }


def test_each_method_is_advertised_by_its_capability(agent: CheckedServer) -> None:
    answer = agent.result("initialize", {"protocolVersion": 1})
    session_caps = answer["agentCapabilities"]["sessionCapabilities"]
    for key in ("title", "archive", "status", "fork", "delete", "resume", "close"):
        assert session_caps[key] == {}, key
    assert session_caps["list"] == {"_meta": {"acp-session-registry/query": {}}}  # search: an extension in _meta
    assert answer["agentCapabilities"]["loadSession"] is True


def test_set_title_stores_and_answers_the_title(agent: CheckedServer) -> None:
    sid = _new(agent)
    answer, updates = agent.exchange("session/set_title", {"sessionId": sid, "title": "Auth refactor"})
    assert answer["result"] == {"title": "Auth refactor"}
    assert [u["params"]["update"].get("title") for u in updates] == ["Auth refactor"]  # before the answer
    # a user title: the first prompt's generated title does not replace it (set before the first prompt)
    _prompt(agent, sid, "Write the docs")
    assert agent.listed()[sid]["title"] == "Auth refactor"
    stored = agent.result("session/set_title", {"sessionId": sid, "title": "  Spaced out  "})["title"]
    assert agent.listed()[sid]["title"] == stored and stored.strip() == "Spaced out"


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"title": None}, "title", "title must be a string, not null"),
        ({}, "title", "title is missing"),
        ({"title": 5}, "title", "title must be a string, not a number"),
        ({"sessionId": None, "title": "x"}, "sessionId", "sessionId must be a non-empty string, not null"),
    ],
)
def test_set_title_refuses_what_is_not_a_title(
    shared: CheckedServer, params: dict[str, Any], field: str, message: str
) -> None:
    sid = _new(shared)
    error = shared.error("session/set_title", {"sessionId": sid, **params})
    assert (error["code"], error["message"], error["data"]) == (-32602, message, {"field": field})
    assert shared.error("session/set_title", {"title": "x"})["data"] == {"field": "sessionId"}


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_set_title_refuses_an_empty_or_blank_title(shared: CheckedServer, blank: str) -> None:
    sid = _new(shared)
    error = shared.error("session/set_title", {"sessionId": sid, "title": blank})
    assert error["code"] == -32602 and "title" in error["message"], error
    assert "title" not in shared.listed()[sid]


def test_unknown_sessions_are_32002_with_the_requested_id(agent: CheckedServer) -> None:
    calls = {
        "session/set_title": {"sessionId": "nope", "title": "x"},
        "session/archive": {"sessionId": "nope"},
        "session/unarchive": {"sessionId": "nope"},
        "session/status": {"sessionId": "nope"},
        "session/fork": {"sessionId": "nope", "cwd": "/w", "mcpServers": []},
    }
    for method, params in calls.items():
        error = agent.error(method, params)
        assert (error["code"], error["data"]) == (-32002, {"sessionId": "nope"}), (method, error)
    assert agent.listed(archived="include") == {}  # a failed fork created nothing


def test_deleted_sessions_are_unknown_to_the_new_methods(agent: CheckedServer) -> None:
    sid = _new(agent)
    assert agent.result("session/delete", {"sessionId": sid}) == {}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("session/set_title", {"title": "x"}),
        ("session/archive", {}),
        ("session/status", {}),
        ("session/fork", {"cwd": "/w", "mcpServers": []}),
    ]
    for method, extra in calls:
        error = agent.error(method, {"sessionId": sid, **extra})
        assert (error["code"], error["data"]) == (-32002, {"sessionId": sid}), (method, error)


def test_archive_hides_from_the_default_list_and_the_filter_shows_it(agent: CheckedServer) -> None:
    kept, archived = _new(agent, "/w/a"), _new(agent, "/w/a")
    assert agent.result("session/archive", {"sessionId": archived}) == {}
    assert agent.result("session/archive", {"sessionId": archived}) == {}  # idempotent
    assert set(agent.listed()) == {kept}
    assert set(agent.listed(archived="exclude")) == set(agent.listed(archived=None)) == {kept}
    assert {s: i["archived"] for s, i in agent.listed(archived="include").items()} == {kept: False, archived: True}
    assert set(agent.listed(archived="only")) == {archived}
    assert set(agent.listed(archived="only", cwd="/w/b")) == set()  # combines with cwd
    assert all(info["archived"] is False for info in agent.listed().values())  # on every listed session
    assert agent.result("session/unarchive", {"sessionId": archived}) == {}
    assert agent.result("session/unarchive", {"sessionId": archived}) == {}  # idempotent
    assert set(agent.listed()) == {kept, archived}


def test_archiving_is_told_in_meta_and_to_list_watchers_as_removal(url: str) -> None:
    with WireServer(url) as running:
        agent = CheckedServer(running)
        agent.result("initialize", {"protocolVersion": 1, "_meta": {"acp-session-registry/listChanges": True}})
        sid = _new(agent)
        answer, told = agent.exchange("session/archive", {"sessionId": sid})
        assert "result" in answer
        updates = [m["params"]["update"] for m in told if m["method"] == "session/update"]
        assert [u["_meta"].get("acp-session-registry/archived") for u in updates] == [True]
        assert [m["params"] for m in told if m["method"] == "_registry/session_removed"] == [{"sessionId": sid}]
        answer, told = agent.exchange("session/unarchive", {"sessionId": sid})
        updates = [m["params"]["update"] for m in told if m["method"] == "session/update"]
        assert len(updates) == 1 and "acp-session-registry/archived" not in updates[0]["_meta"]
        added = [m["params"]["session"]["sessionId"] for m in told if m["method"] == "_registry/session_added"]
        assert added == [sid]


@pytest.mark.parametrize(
    ("archived", "message"),
    [
        ("bogus", 'archived must be one of "exclude", "include", "only", not \'bogus\''),
        ("", 'archived must be one of "exclude", "include", "only", not \'\''),
        (5, "archived must be a string, not a number"),
        (True, "archived must be a string, not a boolean"),
    ],
)
def test_an_unsupported_archived_filter_is_refused(shared: CheckedServer, archived: Any, message: str) -> None:
    error = shared.error("session/list", {"archived": archived})
    assert (error["code"], error["message"], error["data"]) == (-32602, message, {"field": "archived"})


def test_a_cursor_is_bound_to_its_archived_filter(url: str) -> None:
    with WireServer(url, "--page-size", "1") as running:
        agent = CheckedServer(running)
        agent.result("initialize", {"protocolVersion": 1})
        for _ in range(3):
            _new(agent)
        cursor = agent.result("session/list", {})["nextCursor"]
        assert agent.result("session/list", {"cursor": cursor, "archived": "exclude"})["sessions"]  # same value
        error = agent.error("session/list", {"cursor": cursor, "archived": "include"})
        assert error["code"] == -32602 and "cursor" in error["message"], error


def test_status_is_open_while_live_here_and_saved_otherwise(url: str, agent: CheckedServer) -> None:
    sid = _new(agent)
    assert agent.result("session/status", {"sessionId": sid}) == {"status": "open"}
    assert agent.result("session/close", {"sessionId": sid}) == {}
    assert agent.result("session/status", {"sessionId": sid}) == {"status": "saved"}
    agent.result("session/resume", {"sessionId": sid, "cwd": "/w"})
    assert agent.result("session/status", {"sessionId": sid}) == {"status": "open"}
    agent.result("session/archive", {"sessionId": sid})  # archiving an active session closes it first
    assert agent.result("session/status", {"sessionId": sid}) == {"status": "saved"}
    with WireServer(url) as other:  # another process: known there, open only here
        second = CheckedServer(other)
        second.result("initialize", {"protocolVersion": 1})
        agent.result("session/load", {"sessionId": sid, "cwd": "/w", "mcpServers": []})
        assert second.result("session/status", {"sessionId": sid}) == {"status": "saved"}
        assert agent.result("session/status", {"sessionId": sid}) == {"status": "open"}
    # status has no side effects: it neither opens nor changes the session
    before = agent.listed(archived="include")[sid]
    agent.result("session/status", {"sessionId": sid})
    assert agent.listed(archived="include")[sid] == before


def test_fork_copies_the_turns_so_far_and_then_each_side_goes_its_own_way(agent: CheckedServer) -> None:
    source = _new(agent)
    _prompt(agent, source, "one")
    _prompt(agent, source, "two")
    fork = agent.result("session/fork", {"sessionId": source, "cwd": "/w/fork", "mcpServers": []})["sessionId"]
    assert fork != source
    assert agent.result("session/status", {"sessionId": fork}) == {"status": "open"}
    assert agent.listed()[fork]["cwd"] == "/w/fork"
    _prompt(agent, source, "source only")
    _prompt(agent, fork, "fork only")
    assert agent.replay(fork) == ["one", "one", "two", "two", "fork only", "fork only"]
    assert agent.replay(source) == ["one", "one", "two", "two", "source only", "source only"]


def test_fork_params_are_checked(agent: CheckedServer) -> None:
    source = _new(agent)
    for params, message in [
        ({"sessionId": source}, "cwd is missing"),
        ({"sessionId": source, "cwd": "relative"}, "cwd must be an absolute path"),
        ({"sessionId": source, "cwd": "/w", "additionalDirectories": [3]}, "additionalDirectories[0] must be"),
    ]:
        error = agent.error("session/fork", params)
        assert error["code"] == -32602 and error["message"].startswith(message), error
    fork = agent.result("session/fork", {"sessionId": source, "cwd": "/w", "additionalDirectories": None})
    assert fork["sessionId"] in agent.listed()


def test_rename_stays_an_alias_of_set_title_with_its_clear(agent: CheckedServer) -> None:
    sid = _new(agent)
    assert agent.result("_registry/rename", {"sessionId": sid, "title": "Named"}) == {}
    assert agent.listed()[sid]["title"] == "Named"
    assert agent.result("_registry/rename", {"sessionId": sid, "title": None}) == {}
    assert "title" not in agent.listed()[sid]
    _prompt(agent, sid, "/rename From a prompt")
    assert agent.listed()[sid]["title"] == "From a prompt"


def test_every_new_method_answered_in_the_schemas_shapes(agent: CheckedServer) -> None:
    """One pass through every new method, each answer and notification validated (``CheckedServer``)."""
    sid = _new(agent)
    _prompt(agent, sid, "hello")
    agent.result("session/set_title", {"sessionId": sid, "title": "T"})
    agent.result("session/status", {"sessionId": sid})
    fork = agent.result("session/fork", {"sessionId": sid, "cwd": "/w", "mcpServers": []})["sessionId"]
    agent.replay(fork)
    agent.result("session/archive", {"sessionId": fork})
    agent.result("session/list", {"archived": "include"})
    agent.result("session/unarchive", {"sessionId": fork})
    agent.error("session/status", {"sessionId": "nope"})
    for method in NEW_METHODS:
        assert agent.checked[RESPONSES[method]] >= 1, method
    assert agent.checked["SessionNotification"] >= 1 and agent.checked["Error"] >= 1


def test_the_sdk_adapter_serves_the_same_methods(url: str) -> None:
    """``examples/sdk_agent.py`` (the official Python SDK 0.12 with ``RegistrySessions.attach``) implements none of
    these methods itself: the adapter routes the table's, advertises them, and watches which sessions are open."""
    example = [sys.executable, str(ROOT / "examples" / "sdk_agent.py"), url]
    with WireServer(url, command=example) as running:
        agent = CheckedServer(running)
        caps = agent.result("initialize", {"protocolVersion": 1})["agentCapabilities"]["sessionCapabilities"]
        for key in ("title", "archive", "status", "fork", "delete"):
            assert caps[key] == {}, key
        assert caps["list"] == {"_meta": {"acp-session-registry/query": {}}}
        sid = _new(agent)
        assert agent.result("session/status", {"sessionId": sid}) == {"status": "open"}
        assert agent.result("session/set_title", {"sessionId": sid, "title": " Docs "}) == {"title": "Docs"}
        error = agent.error("session/set_title", {"sessionId": sid, "title": None})
        assert (error["code"], error["message"]) == (-32602, "title must be a string, not null")
        fork = agent.result("session/fork", {"sessionId": sid, "cwd": "/w/f", "mcpServers": []})["sessionId"]
        assert agent.result("session/status", {"sessionId": fork}) == {"status": "open"}
        assert agent.result("session/archive", {"sessionId": sid}) == {}
        assert agent.result("session/status", {"sessionId": sid}) == {"status": "saved"}
        assert set(agent.listed()) == {fork}
        assert {s: i["archived"] for s, i in agent.listed(archived="include").items()} == {sid: True, fork: False}
        assert agent.error("session/list", {"archived": "bogus"})["data"] == {"field": "archived"}
        assert agent.result("session/unarchive", {"sessionId": sid}) == {}
        error = agent.error("session/status", {"sessionId": "nope"})
        assert (error["code"], error["data"]) == (-32002, {"sessionId": "nope"})
