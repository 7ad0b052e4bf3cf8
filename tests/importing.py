"""What the importer tests share: one pass of one agent's importer and what it left (``run_import``,
``listing``, ``only``, ``skipped``), JSON lines written as an agent writes them (``write_lines``), ``facts`` (what
is checked of every agent's session), and Claude Code's records (``prompt``, ``reply``, ``spec_session``, ...),
synthetic, after the format ``docs/agent-histories.md`` describes. The ``claude`` fixture (a tree holding
``spec_session``) is in ``conftest.py``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from events.store import EventStore
from registry import SessionRegistry
from registry.importers import Importer, Summary, sources
from registry.model import META_MESSAGES, META_TITLE_SOURCE

SID = "6b1d2c3e-4f50-4a61-9b72-8c93d0e1f2a3"
PROJECT = "-home-dev-acme-api"
FIXTURES = Path(__file__).parent / "fixtures" / "agents"
"""The files shaped like the agents' own, each folder's ``SOURCE.md`` saying where its shapes come from."""


# -- one pass and what it left -------------------------------------------------------------------------


def run_import(store: EventStore, agent: str, root: Path, *, state: Path | None = None, **options: Any) -> Summary:
    """One pass of one agent's importer (state kept in ``state``, or nowhere)."""
    return Importer(store, sources([agent]), roots={agent: root}, state_path=state, **options).run()


def listing(store: EventStore) -> list[dict[str, Any]]:
    """Every live session - archived ones too - as ``session/list`` shows them (one page of up to 1000)."""
    with SessionRegistry(store, follow=False, page_size=1000) as registry:
        result: list[dict[str, Any]] = msgspec.to_builtins(registry.list(archived="include").sessions)
        return result


def only(store: EventStore) -> dict[str, Any]:
    sessions = listing(store)
    assert len(sessions) == 1, sessions
    return sessions[0]


def write_lines(path: Path, records: Sequence[Any], *, mode: str = "w") -> None:
    """JSON lines (a str is written as is: a broken line), each ending with a newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode, encoding="utf-8") as f:
        for record in records:
            f.write((record if isinstance(record, str) else json.dumps(record, separators=(",", ":"))) + "\n")


def skipped(summary: Summary) -> dict[str, int]:
    return {group.reason: group.count for agent in summary.agents for group in agent.skipped}


def facts(session: dict[str, Any]) -> tuple[object, ...]:
    """What is checked of every agent's imported session: its id, cwd, title, updatedAt, the title's source and
    the message count."""
    meta = session["_meta"]
    return (
        session["sessionId"],
        session["cwd"],
        session["title"],
        session["updatedAt"],
        meta[META_TITLE_SOURCE],
        meta[META_MESSAGES],
    )


# -- Claude Code records ------------------------------------------------------------------------------


def _turn(kind: str, at: str, *, session: str = SID, cwd: str = "/home/dev/acme-api", **fields: Any) -> dict[str, Any]:
    return {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session,
        "version": "2.1.40",
        "gitBranch": "main",
        "type": kind,
        "uuid": f"u-{at}",
        "timestamp": at,
        **fields,
    }


def prompt(at: str, text: str, **fields: Any) -> dict[str, Any]:
    return _turn("user", at, message={"role": "user", "content": text}, **fields)


def reply(at: str, message_id: str, text: str = "ok", **fields: Any) -> dict[str, Any]:
    return _turn(
        "assistant",
        at,
        message={"id": message_id, "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}]},
        requestId=f"req-{message_id}",
        **fields,
    )


def tool_result(at: str) -> dict[str, Any]:
    content = [{"type": "tool_result", "tool_use_id": "toolu_01Read", "content": "export function listOrders() {}"}]
    return _turn("user", at, message={"role": "user", "content": content})


def spec_session() -> list[dict[str, Any] | str]:
    """The spec's fixture (section 1.4), without its torn last line."""
    return [
        {"type": "permission-mode", "permissionMode": "default", "sessionId": SID},
        {
            "type": "file-history-snapshot",
            "messageId": "0a6e",
            "snapshot": {"messageId": "0a6e", "trackedFileBackups": {}, "timestamp": "2026-03-02T09:14:05.118Z"},
            "isSnapshotUpdate": False,
        },
        prompt("2026-03-02T09:14:05.118Z", "Add cursor pagination to GET /orders"),
        reply("2026-03-02T09:14:08.402Z", "msg_01PagA", "I'll start with the orders router."),
        reply("2026-03-02T09:14:08.955Z", "msg_01PagA", "(tool use)"),
        tool_result("2026-03-02T09:14:09.120Z"),
        {"type": "ai-title", "aiTitle": "Paginate orders endpoint", "sessionId": SID},
        {"type": "custom-title", "customTitle": "orders pagination", "sessionId": SID},
        {"type": "last-prompt", "lastPrompt": "Add cursor pagination to GET /orders", "sessionId": SID},
    ]


def session_file(root: Path, sid: str = SID, project: str = PROJECT) -> Path:
    return root / "projects" / project / f"{sid}.jsonl"
