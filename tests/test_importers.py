"""Importing agents' histories: Claude Code end to end, and what every source shares - incremental reads, torn
lines, idempotency (a second pass, a lost state, a second host), deletes, hostile input, the command.

Fixture trees are built here, synthetic, after the Claude Code format ``docs/agent-histories.md`` describes (the
recorded shapes are in ``tests/fixtures/agents/``, each with its ``SOURCE.md``); the other agents' formats are in
``test_importers_agents.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events import MemoryStore, SessionDeleted, TitleSource, open_store
from events.errors import RegistryError
from events.store import EventStore
from registry import SessionRegistry
from registry.importers import Importer, ImportStateError, Summary, sources
from registry.importers.databases import SchemaError
from registry.importers.importer import META_AGENT_MESSAGES, META_GIT_BRANCH, META_PATH
from registry.importers.lines import GLUED, TailRead
from registry.model import META_MESSAGES, META_TITLE_SOURCE, parse_time

SID = "6b1d2c3e-4f50-4a61-9b72-8c93d0e1f2a3"
PROJECT = "-home-dev-acme-api"


# -- helpers the agent tests share ---------------------------------------------------------------------


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


def ns(text: str) -> int:
    return parse_time(text)


# -- Claude Code fixtures ------------------------------------------------------------------------------


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


@pytest.fixture
def claude(tmp_path: Path) -> Path:
    root = tmp_path / "claude"
    write_lines(root / "projects" / PROJECT / f"{SID}.jsonl", spec_session())
    return root


def session_file(root: Path, sid: str = SID, project: str = PROJECT) -> Path:
    return root / "projects" / project / f"{sid}.jsonl"


# -- Claude Code -----------------------------------------------------------------------------------------


def test_claude_code_session_from_the_spec_fixture(claude: Path) -> None:
    store = MemoryStore()
    summary = run_import(store, "claude-code", claude)
    assert (summary.agents[0].added, summary.agents[0].skipped) == (1, [])
    session = only(store)
    assert session == {
        "sessionId": f"claude-code:{SID}",
        "cwd": "/home/dev/acme-api",
        "title": "orders pagination",
        "updatedAt": "2026-03-02T09:14:09.120Z",  # the last user/assistant record, never the file's mtime
        "_meta": {
            "acp-session-registry/agent": "claude-code",
            "acp-session-registry/agentSessionId": SID,
            META_PATH: str(session_file(claude)),
            META_AGENT_MESSAGES: 2,  # one prompt + one assistant message split over two lines; tool result excluded
            META_GIT_BRANCH: "main",
            META_TITLE_SOURCE: "user",
            META_MESSAGES: 2,
        },
    }
    state = SessionRegistry(store, follow=False).state(f"claude-code:{SID}")
    assert state is not None and state.created_at == ns("2026-03-02T09:14:05.118Z")


def test_claude_code_title_priority_and_sources(tmp_path: Path) -> None:
    root = tmp_path / "claude"
    path = session_file(root)
    store = MemoryStore()
    write_lines(
        path,
        [
            prompt("2026-03-02T09:00:00Z", "<ide_opened_file>x</ide_opened_file>"),
            prompt("2026-03-02T09:00:01Z", "Fix\nthe   build"),
        ],
    )
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Fix the build", "prompt")
    # Claude Code writes summaries of other sessions into the open transcript: their leafUuid is not ours.
    write_lines(path, [{"type": "summary", "summary": "Tailwind catalog", "leafUuid": "u-elsewhere"}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Fix the build", "prompt")
    write_lines(path, [{"type": "summary", "summary": "Build fix", "leafUuid": "u-2026-03-02T09:00:01Z"}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Build fix", "agent")
    write_lines(path, [{"type": "last-prompt", "lastPrompt": "and the tests", "sessionId": SID}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("and the tests", "prompt")
    write_lines(path, [{"type": "ai-title", "aiTitle": "Repair CI", "sessionId": SID}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("Repair CI", "agent")
    write_lines(path, [{"type": "custom-title", "customTitle": "ci", "sessionId": SID}], mode="a")
    run_import(store, "claude-code", root)
    assert (only(store)["title"], only(store)["_meta"][META_TITLE_SOURCE]) == ("ci", "user")
    # A title-only append is metadata: updatedAt stays at the last prompt.
    assert only(store)["updatedAt"] == "2026-03-02T09:00:01.000Z"


def test_a_title_the_user_set_in_the_registry_survives_generated_titles(claude: Path, tmp_path: Path) -> None:
    path = session_file(claude, "11111111-2222-4333-8444-555555555555")
    write_lines(path, [prompt("2026-03-02T10:00:00Z", "first", session="11111111-2222-4333-8444-555555555555")])
    store = MemoryStore()
    run_import(store, "claude-code", claude)
    sid = "claude-code:11111111-2222-4333-8444-555555555555"
    with SessionRegistry(store, follow=False) as registry:
        registry.change_info(sid, title="mine", title_source=TitleSource.USER)
    write_lines(path, [{"type": "ai-title", "aiTitle": "Generated", "sessionId": "x"}], mode="a")
    write_lines(path, [reply("2026-03-02T10:05:00Z", "m2", session="11111111-2222-4333-8444-555555555555")], mode="a")
    summary = run_import(store, "claude-code", claude)
    assert summary.agents[0].changed == 1
    mine = next(s for s in listing(store) if s["sessionId"] == sid)
    assert (mine["title"], mine["updatedAt"]) == ("mine", "2026-03-02T10:05:00.000Z")


def test_subagent_transcripts_and_odd_files_are_not_sessions(claude: Path) -> None:
    project = claude / "projects" / PROJECT
    sidechain = {**prompt("2026-03-02T09:15:00Z", "Find all callers of listOrders"), "isSidechain": True}
    write_lines(project / "agent-7e2f9c1a.jsonl", [sidechain])  # legacy subagent file
    write_lines(project / SID / "subagents" / "agent-1.jsonl", [sidechain])  # current layout
    write_lines(project / "99999999-0000-4000-8000-000000000000.jsonl", [sidechain])  # sidechain first line
    write_lines(project / "notes.jsonl", [prompt("2026-03-02T09:15:00Z", "not a session file name")])
    write_lines(project / "88888888-0000-4000-8000-000000000000.jsonl", [{"type": "permission-mode"}])
    store = MemoryStore()
    summary = run_import(store, "claude-code", claude)
    assert [s["sessionId"] for s in listing(store)] == [f"claude-code:{SID}"]
    assert skipped(summary) == {
        "subagent transcript (isSidechain)": 1,
        "no cwd recorded": 1,
        "not a file claude-code writes (left alone)": 1,  # notes.jsonl: said, not read
    }


def test_lossy_folder_names_never_decide_the_cwd(claude: Path) -> None:
    # /home/dev/acme/api and /home/dev/acme-api share the folder name -home-dev-acme-api.
    other = "22222222-0000-4000-8000-000000000000"
    write_lines(
        session_file(claude, other), [prompt("2026-03-02T11:00:00Z", "hi", session=other, cwd="/home/dev/acme/api")]
    )
    store = MemoryStore()
    run_import(store, "claude-code", claude)
    assert sorted(s["cwd"] for s in listing(store)) == ["/home/dev/acme-api", "/home/dev/acme/api"]


def test_a_torn_last_line_is_read_once_it_is_complete(claude: Path, tmp_path: Path) -> None:
    path = session_file(claude)
    line = json.dumps(prompt("2026-03-02T09:20:00Z", "Now add a test"), separators=(",", ":"))
    with open(path, "a") as f:
        f.write(line[:70])  # a writer in the middle of a line
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    assert only(store)["_meta"][META_MESSAGES] == 2
    assert run_import(store, "claude-code", claude, state=state).agents[0].files_read == 0  # nothing new
    with open(path, "a") as f:
        f.write(line[70:] + "\n")
    summary = run_import(store, "claude-code", claude, state=state)
    assert (summary.agents[0].changed, summary.agents[0].skipped) == (1, [])
    assert (only(store)["_meta"][META_MESSAGES], only(store)["updatedAt"]) == (3, "2026-03-02T09:20:00.000Z")


def test_a_complete_last_line_without_its_newline_is_a_record_and_is_never_counted_twice(
    claude: Path, tmp_path: Path
) -> None:
    # Copies of transcripts often lose the final newline: the last reply is still the session's last activity.
    path = session_file(claude)
    line = json.dumps(reply("2026-03-02T09:30:00Z", "m-last"), separators=(",", ":"))
    with open(path, "a") as f:
        f.write(line)
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    assert (only(store)["_meta"][META_MESSAGES], only(store)["updatedAt"]) == (3, "2026-03-02T09:30:00.000Z")
    with open(path, "a") as f:  # the writer ends the line, then appends more
        f.write("\n" + json.dumps(prompt("2026-03-02T09:31:00Z", "and one more")) + "\n")
    summary = run_import(store, "claude-code", claude, state=state)
    assert (summary.agents[0].changed, summary.agents[0].skipped) == (1, [])
    assert (only(store)["_meta"][META_MESSAGES], only(store)["updatedAt"]) == (4, "2026-03-02T09:31:00.000Z")
    fresh = MemoryStore()
    run_import(fresh, "claude-code", claude, state=tmp_path / "fresh")
    assert only(fresh)["_meta"] == only(store)["_meta"]  # the incremental reads equal one whole read


def test_incremental_import_equals_a_fresh_one_and_reads_only_what_is_new(claude: Path, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/reg.db")
    run_import(store, "claude-code", claude, state=tmp_path / "state")
    other = "33333333-0000-4000-8000-000000000000"
    write_lines(
        session_file(claude, other, "-home-dev-web"),
        [prompt("2026-03-03T08:00:00Z", "Style the header", session=other, cwd="/home/dev/web")],
    )
    size = session_file(claude).stat().st_size
    write_lines(
        session_file(claude), [prompt("2026-03-02T12:00:00Z", "Next"), reply("2026-03-02T12:00:05Z", "m9")], mode="a"
    )
    summary = run_import(store, "claude-code", claude, state=tmp_path / "state")
    agent = summary.agents[0]
    assert (agent.added, agent.changed, agent.files_read) == (1, 1, 2)
    assert agent.bytes_read < size  # the appended lines and the new file only (plus the head fingerprint)
    fresh = MemoryStore()
    run_import(fresh, "claude-code", claude)
    assert listing(store) == listing(fresh)
    head = store.head()
    assert run_import(store, "claude-code", claude, state=tmp_path / "state").touched == 0
    assert store.head() == head
    store.close()


def test_importing_again_without_state_or_from_a_second_host_writes_nothing(claude: Path, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/reg.db")
    run_import(store, "claude-code", claude, state=tmp_path / "a")
    head = store.head()
    (tmp_path / "a").unlink()  # the state is a cache: losing it re-reads everything and writes nothing
    assert run_import(store, "claude-code", claude, state=tmp_path / "a").agents[0].unchanged == 1
    assert run_import(store, "claude-code", claude, state=tmp_path / "b").agents[0].unchanged == 1  # another host
    assert store.head() == head
    # Both hosts see the same new line: the one that comes second finds it written already.
    write_lines(session_file(claude), [prompt("2026-03-02T12:00:00Z", "more")], mode="a")
    assert run_import(store, "claude-code", claude, state=tmp_path / "a").agents[0].changed == 1
    assert run_import(store, "claude-code", claude, state=tmp_path / "b").agents[0].changed == 0
    assert store.head() == head + 2  # activity + _meta, once
    store.close()


def test_a_retried_append_is_recognised_by_its_event_ids(claude: Path) -> None:
    store = MemoryStore()
    importer = Importer(store, sources(["claude-code"]), roots={"claude-code": claude}, state_path=None)
    appended: list[Any] = []
    original = store.append_batch

    def remember(requests: Any) -> list[list[int]]:
        appended.extend(requests)
        return original(requests)

    store.append_batch = remember  # type: ignore[method-assign]
    importer.run()
    head = store.head()
    assert original(appended) == [[1, 2]]  # the lost-acknowledgement retry of the whole batch
    request = appended[0]
    assert store.append(request.session_id, request.events, request.expected_version, event_ids=request.event_ids) == [
        1,
        2,
    ]  # and of one session on its own
    assert store.head() == head


def test_a_session_deleted_in_the_registry_stays_deleted(claude: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    run_import(store, "claude-code", claude, state=tmp_path / "state")
    with SessionRegistry(store, follow=False) as registry:
        registry.handle("session/delete", {"sessionId": f"claude-code:{SID}"})
    write_lines(session_file(claude), [prompt("2026-03-02T12:00:00Z", "still here")], mode="a")
    head = store.head()
    for state in (tmp_path / "state", tmp_path / "fresh"):
        summary = run_import(store, "claude-code", claude, state=state)
        assert skipped(summary) == {"deleted in the registry (stays deleted)": 1}
    assert (listing(store), store.head()) == ([], head)


def test_a_session_whose_file_disappears_is_tombstoned_and_never_resurrected(claude: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    content = session_file(claude).read_bytes()
    session_file(claude).unlink()
    summary = run_import(store, "claude-code", claude, state=state)
    assert summary.agents[0].removed == 1
    last = store.read_stream(f"claude-code:{SID}")[-1].event
    assert isinstance(last, SessionDeleted) and last.reason is not None and "source gone" in last.reason
    session_file(claude).write_bytes(content)  # restored from a backup: a deletion is final
    assert skipped(run_import(store, "claude-code", claude, state=state)) == {
        "deleted in the registry (stays deleted)": 1
    }
    assert listing(store) == []


def test_a_missing_root_or_projects_folder_deletes_nothing(claude: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    (claude / "projects").rename(tmp_path / "elsewhere")
    assert run_import(store, "claude-code", claude, state=state).agents[0].removed == 0
    summary = run_import(store, "claude-code", tmp_path / "unmounted", state=state)
    assert summary.agents[0].unavailable == f"not found: {tmp_path / 'unmounted'}"
    assert len(listing(store)) == 1


def test_sessions_another_host_imported_are_never_deleted_here(claude: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    other = "55555555-0000-4000-8000-000000000000"
    other_root = tmp_path / "other-host"
    write_lines(session_file(other_root, other), [prompt("2026-03-02T13:00:00Z", "elsewhere", session=other)])
    run_import(store, "claude-code", other_root, state=tmp_path / "b")
    summary = run_import(store, "claude-code", claude, state=tmp_path / "a")
    assert (summary.agents[0].added, summary.agents[0].removed) == (1, 0)
    assert len(listing(store)) == 2


def test_the_sdk_hidden_tag_is_a_delete(claude: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    run_import(store, "claude-code", claude, state=tmp_path / "a")
    hidden = "44444444-0000-4000-8000-000000000000"
    write_lines(
        session_file(claude, hidden),
        [
            prompt("2026-03-02T13:00:00Z", "secret", session=hidden),
            {"type": "tag", "tag": "__hidden", "sessionId": hidden},
        ],
    )
    summary = run_import(store, "claude-code", claude, state=tmp_path / "a")
    assert skipped(summary) == {"hidden by the agent (tag __hidden)": 1}  # never created
    assert [s["sessionId"] for s in listing(store)] == [f"claude-code:{SID}"]
    write_lines(session_file(claude), [{"type": "tag", "tag": "__hidden", "sessionId": SID}], mode="a")
    assert run_import(store, "claude-code", claude, state=tmp_path / "a").agents[0].removed == 1
    assert listing(store) == []


def test_recency_comes_from_records_never_from_file_times(claude: Path) -> None:
    os.utime(session_file(claude), (4_000_000_000, 4_000_000_000))  # year 2096
    store = MemoryStore()
    run_import(store, "claude-code", claude)
    assert only(store)["updatedAt"] == "2026-03-02T09:14:09.120Z"


def test_hostile_lines_are_skipped_and_counted_never_fatal(tmp_path: Path) -> None:
    root = tmp_path / "claude"
    path = session_file(root)
    write_lines(
        path,
        [
            prompt("2026-03-02T09:00:00Z", "start"),
            "{not json",
            "INVALID-UTF8",
            json.dumps(prompt("2026-03-02T09:00:01Z", "glued one")) + json.dumps(reply("2026-03-02T09:00:02Z", "g2")),
            prompt("2026-03-02T09:00:03Z", "x" * 5000),  # over the cap below
            {"type": "from-the-future", "timestamp": "2026-03-02T09:00:04Z", "payload": [1, 2, 3]},
            {"type": "user", "timestamp": "99999-01-01T00:00:00Z", "cwd": 5, "message": [1]},
            [1, 2, 3],
            reply("2026-03-02T09:00:05Z", "m3"),
        ],
    )
    path.write_bytes(path.read_bytes().replace(b"INVALID-UTF8", b'{"type": "\xff\xfe"}'))
    os.mkfifo(path.with_name("77777777-0000-4000-8000-000000000000.jsonl"))  # would block a reader forever
    store = MemoryStore()
    summary = run_import(store, "claude-code", root, line_cap=4096)
    assert skipped(summary) == {
        "not a regular file": 1,
        "line is not a JSON record, skipped": 3,
        "line over 4096 bytes skipped": 1,
        "record not understood (ValidationError), skipped": 1,  # "message": [1]
        GLUED: 1,  # both records are read (below), and the damaged line is named
    }
    examples = {g.reason: g.examples for g in summary.agents[0].skipped}
    assert examples["line is not a JSON record, skipped"] == [f"{path}:2"]  # file:line of the first one
    assert examples[GLUED] == [f"{path}:4"]
    session = only(store)
    assert (session["title"], session["_meta"][META_MESSAGES], session["updatedAt"]) == (
        "start",
        4,  # start, the glued prompt and its reply, the last reply
        "2026-03-02T09:00:05.000Z",
    )


def test_a_file_rewritten_shorter_is_read_again_from_the_start(claude: Path, tmp_path: Path) -> None:
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    write_lines(
        session_file(claude),
        [
            prompt("2026-03-02T09:14:05.118Z", "Add cursor pagination to GET /orders"),
            reply("2026-03-05T00:00:00Z", "z"),
        ],
    )
    summary = run_import(store, "claude-code", claude, state=state)
    assert summary.agents[0].changed == 1
    # The fold starts over (title falls back to the prompt), but a user's title is never replaced by it.
    assert (only(store)["title"], only(store)["updatedAt"]) == ("orders pagination", "2026-03-05T00:00:00.000Z")


def test_a_file_that_vanishes_mid_read_leaves_its_previous_state(
    claude: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    write_lines(session_file(claude), [prompt("2026-03-02T12:00:00Z", "more")], mode="a")
    real = TailRead

    class Vanishing(real):  # type: ignore[misc, valid-type]
        def lines(self) -> Iterator[bytes | None]:
            yield from super().lines()
            raise FileNotFoundError(2, "No such file or directory", self.path)

    monkeypatch.setattr("registry.importers.files.TailRead", Vanishing)
    summary = run_import(store, "claude-code", claude, state=state)
    assert (summary.agents[0].changed, skipped(summary)) == (0, {"vanished while being read": 1})
    monkeypatch.setattr("registry.importers.files.TailRead", real)
    assert run_import(store, "claude-code", claude, state=state).agents[0].changed == 1  # read again, whole
    assert only(store)["_meta"][META_MESSAGES] == 3


def test_a_state_made_for_another_store_is_not_trusted(claude: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    run_import(MemoryStore(), "claude-code", claude, state=state)
    other = MemoryStore()
    assert run_import(other, "claude-code", claude, state=state).agents[0].added == 1


def test_a_tail_continues_only_in_the_same_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"x" * 5000 + b"\n" + b'{"a":1}\n' + b'{"b":')
    with TailRead(str(path), None, cap=1 << 20) as read:
        assert [len(line or b"") for line in read.lines()] == [5000, 7]
        tail = read.tail
    assert tail.offset == 5009  # the torn last line is left for later
    with open(path, "ab") as f:
        f.write(b"2}\n")
    with TailRead(str(path), tail, cap=1 << 20) as read:
        assert (read.restart, list(read.lines())) == (False, [b'{"b":2}'])
    with open(path, "r+b") as f:  # rewritten in place: same inode, same first 4 KiB, other bytes before the offset
        f.seek(5001)
        f.write(b'{"c":3}')
    with TailRead(str(path), tail, cap=1 << 20) as read:
        assert read.restart and len(list(read.lines())) == 3


def test_importers_write_through_one_function_and_never_through_the_facade(
    claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write of a pass goes through ``append_sessions`` (one batch append across sessions), and no importer
    module imports ``SessionRegistry``: the importers decide with ``registry.commands``."""
    import ast  # noqa: PLC0415

    from registry.importers import importer  # noqa: PLC0415

    calls: list[str] = []
    real = importer.append_sessions

    def counted(store: EventStore, requests: Any) -> None:
        calls.extend(request.session_id for request in requests)
        real(store, requests)

    monkeypatch.setattr(importer, "append_sessions", counted)
    store = MemoryStore()
    head = store.head()
    other = "12121212-0000-4000-8000-000000000000"
    write_lines(session_file(claude, other), [prompt("2026-03-02T10:00:00Z", "x", session=other)])
    run_import(store, "claude-code", claude)
    assert len(calls) == len({r.session_id for r in store.read()}) == 2 and store.head() > head
    folder = Path(importer.__file__).parent
    for module in folder.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = {alias.name for alias in node.names}
                assert node.module not in ("registry.service", "registry") or "SessionRegistry" not in names, module
                assert node.module != "registry.service", module


def test_the_importers_errors_are_registry_errors(claude: Path, tmp_path: Path) -> None:
    # One error tree: a caller catching RegistryError catches the importers' errors too (and ValueError still).
    state = tmp_path / "state"
    state.mkdir()  # a folder where the import state belongs
    with pytest.raises(RegistryError) as caught:
        run_import(MemoryStore(), "claude-code", claude, state=state)
    assert isinstance(caught.value, ImportStateError) and isinstance(caught.value, ValueError)
    assert issubclass(SchemaError, RegistryError) and issubclass(SchemaError, ValueError)
