"""An id is one id in every spelling the agent accepts: a UUID in upper case, in braces, after ``urn:uuid:`` or
without hyphens names the session its canonical form names - for the deletion hold, for what reaches the agent,
and for the command line; an id with surrounding whitespace is refused with -32602.

Real proxy processes in front of the scripted agent (``--uuid-ids``, as claude-agent-acp's and codex-acp's ids
are UUIDs) on a real SQLite store; the agent's ``--log`` shows exactly what reached it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec import UNSET

from registry.agents import canonical_id, spellings
from registry.service import SessionRegistry
from tests.proxy_wire import ProxyProcess, prompt, proxy_command, started

ID = "6b1d2c3e-4f50-4a61-9b72-8c93d0e1f2a3"
OTHER_SPELLINGS = [
    ID.upper(),
    "{" + ID + "}",
    "{" + ID.upper() + "}",
    "urn:uuid:" + ID,
    "URN:UUID:" + ID.upper(),
    ID.replace("-", ""),
    ID.replace("-", "").upper(),
]


def _forwarded(log: Path, method: str) -> list[str]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [line["params"]["sessionId"] for line in lines if line.get("method") == method]


@pytest.mark.parametrize("spelling", OTHER_SPELLINGS)
def test_every_spelling_of_a_uuid_is_its_canonical_form(spelling: str) -> None:
    assert canonical_id(spelling) == ID
    assert ID in spellings(spelling)


@pytest.mark.parametrize("other", ["s-1-42", "2512011200-abcdef", "ses_01ABC", "{" + ID, ID + "0", "urn:uuid:x"])
def test_an_id_that_is_not_a_uuid_has_one_spelling(other: str) -> None:
    assert canonical_id(other) == other and spellings(other) == (other,)


def test_a_deleted_session_never_reaches_the_agent_under_another_spelling(url: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--uuid-ids", "--log", str(log), cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "hello"))
        assert proxy.result(3, "session/delete", {"sessionId": session}) == {}
        spellings_of_it = [session.upper(), "{" + session + "}", "urn:uuid:" + session, session.replace("-", "")]
        for n, spelling in enumerate(spellings_of_it):
            load = {"sessionId": spelling, "cwd": str(tmp_path), "mcpServers": []}
            assert proxy.call(10 + n, "session/load", load)["error"]["code"] == -32002, spelling
            assert proxy.call(20 + n, "session/prompt", prompt(spelling, "again"))["error"]["code"] == -32002
        assert proxy.result(30, "session/list", {})["sessions"] == []
        assert proxy.close() == 0
    assert _forwarded(log, "session/load") == []
    assert _forwarded(log, "session/prompt") == [session]
    with SessionRegistry.open(url) as registry:
        assert registry.list(archived="include").sessions == []  # no new copies of the deleted conversation


def test_a_session_opened_under_another_spelling_reaches_the_agent_as_the_registry_holds_it(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--uuid-ids", "--log", str(log), cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "hello"))
        load = {"sessionId": "{" + session.upper() + "}", "cwd": str(tmp_path), "mcpServers": []}
        assert proxy.result(3, "session/load", load) == {}
        proxy.result(4, "session/prompt", prompt(session.replace("-", ""), "again"))
        assert [s["sessionId"] for s in proxy.result(5, "session/list", {})["sessions"]] == [session]
        assert proxy.close() == 0
    assert _forwarded(log, "session/load") == [session]
    assert _forwarded(log, "session/prompt") == [session, session]
    with SessionRegistry.open(url) as registry:
        (only,) = registry.list().sessions
        assert only.session_id == f"scripted-agent:{session}"
        assert only.meta is not UNSET and only.meta["acp-session-registry/messageCount"] == 4


@pytest.mark.parametrize("padded", [" s-1", "s-1 ", "\ts-1", "s-1\n"])
def test_an_id_with_surrounding_whitespace_is_refused_naming_its_field(url: str, tmp_path: Path, padded: str) -> None:
    log = tmp_path / "agent.log"
    with ProxyProcess(proxy_command(url, "--log", str(log))) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        for n, (method, params) in enumerate(
            [
                ("session/load", {"sessionId": padded, "cwd": str(tmp_path), "mcpServers": []}),
                ("session/prompt", prompt(padded, "hi")),
                ("session/set_title", {"sessionId": padded, "title": "x"}),
                ("session/delete", {"sessionId": padded}),
            ],
            1,
        ):
            error = proxy.call(n, method, params)["error"]
            assert (error["code"], error["data"]) == (-32602, {"field": "sessionId"}), (method, error)
        assert proxy.close() == 0
    assert _forwarded(log, "session/load") == [] and _forwarded(log, "session/prompt") == []
