"""What a later pass over an agent's files does, on Claude Code's: incremental reads (a torn or unterminated last
line, appends, a file rewritten shorter or vanishing mid-read, a tail kept only while the bytes are the same),
idempotency (a pass again, a lost state, a second host, a retried append, a state made for another store), and
deletes (in the registry, of the file, of the root, of another host's sessions).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from events import MemoryStore, SessionDeleted, open_store
from registry import SessionRegistry
from registry.agents import META_SOURCE_GONE
from registry.importers import Importer, sources
from registry.importers.lines import TailRead
from registry.model import META_MESSAGES
from tests.importing import SID, listing, only, prompt, reply, run_import, session_file, skipped, write_lines

# -- incremental reads ---------------------------------------------------------------------------------


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


# -- idempotency ------------------------------------------------------------------------------------


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
    repeated = store.append(
        request.session_id,
        request.events,
        request.expected_version,
        event_ids=request.event_ids,
        content=request.content,
    )
    assert repeated == [1, 2]  # and of one session on its own
    assert store.head() == head


def test_a_state_made_for_another_store_is_not_trusted(claude: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    run_import(MemoryStore(), "claude-code", claude, state=state)
    other = MemoryStore()
    assert run_import(other, "claude-code", claude, state=state).agents[0].added == 1


# -- deletes ----------------------------------------------------------------------------------------


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


def test_a_session_whose_file_disappears_is_kept_marked_source_gone(claude: Path, tmp_path: Path) -> None:
    """The agent's own clean-up is not a user's delete: the session stays (its conversation readable and
    findable), marked sourceGone; a file restored from a backup brings it back as it was."""
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    content = session_file(claude).read_bytes()
    session_file(claude).unlink()
    summary = run_import(store, "claude-code", claude, state=state)
    assert summary.agents[0].removed == 1
    (session,) = listing(store)
    assert session["_meta"][META_SOURCE_GONE] is True
    assert not any(isinstance(r.event, SessionDeleted) for r in store.read_stream(f"claude-code:{SID}"))
    head = store.head()
    assert run_import(store, "claude-code", claude, state=state).agents[0].removed == 0  # marked once
    assert store.head() == head
    session_file(claude).write_bytes(content)  # restored from a backup: the agent has it again
    assert run_import(store, "claude-code", claude, state=state).agents[0].changed == 1
    (session,) = listing(store)
    assert META_SOURCE_GONE not in session["_meta"]


def test_an_older_stores_source_gone_tombstone_stays(claude: Path, tmp_path: Path) -> None:
    """Stores written before sources that went were kept hold a tombstone for them: it stays a deletion."""
    store = MemoryStore()
    state = tmp_path / "state"
    run_import(store, "claude-code", claude, state=state)
    sid = f"claude-code:{SID}"
    store.append(
        sid, [SessionDeleted(reason="source gone: the file no longer exists")], store.read_stream(sid)[-1].version
    )
    assert skipped(run_import(store, "claude-code", claude, state=tmp_path / "fresh")) == {
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
