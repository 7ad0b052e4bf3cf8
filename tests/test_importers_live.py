"""A live record is never rewritten by an import of the same session: the importer fills only what the registry
lacks. The record a proxy made as the session happened (its cwd, its title and who set it, its count, its
``_meta``, its archive flag) stays as it is when the agent's files are read afterwards - at the proxy's next
start, or by ``acp-registry import-agents`` - whatever the files say; what the record lacks (a title, a first
turn the proxy never recorded) is filled from them. A record the importer made itself follows the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import msgspec
import pytest

from events.memory import MemoryStore
from events.model import Message, Role, TitleSource, Usage
from registry.importers.importer import META_AGENT_MESSAGES, META_PATH
from registry.model import META_TITLE_SOURCE, SessionState
from registry.service import SessionRegistry
from tests.importing import SID, prompt, reply, run_import, session_file, write_lines

STORED = f"claude-code:{SID}"
LIVE_CWD = "/home/dev/acme-api"
AT = 1_772_400_000_000_000_000  # 2026-03-01T21:20:00Z


def _live(registry: SessionRegistry, *, cwd: str = LIVE_CWD, messages: int = 4) -> SessionState:
    """The record a proxy in front of claude-agent-acp made: session/new, the agent's title, two turns."""
    registry.create(cwd, session_id=STORED, agent="claude-code", at=AT)
    registry.change_info(STORED, title="Paginate the orders endpoint", title_source=TitleSource.AGENT)
    if messages:
        registry.record_activity(STORED, messages=messages, at=AT + 1_000_000_000)
    state = registry.state(STORED)
    assert state is not None
    return state


def _files(root: Path, *extra: Mapping[str, object], turns: int = 3, cwd: str = LIVE_CWD) -> None:
    """The agent's transcript of the session: ``turns`` prompts and replies (more than the proxy saw), a last
    prompt (Claude Code's title of last resort)."""
    records: list[Mapping[str, object]] = []
    for n in range(turns):
        records += [
            prompt(f"2026-03-02T09:0{n}:00.000Z", f"turn {n}", cwd=cwd),
            reply(f"2026-03-02T09:0{n}:01.000Z", f"msg_{n}", cwd=cwd),
        ]
    records += [{"type": "last-prompt", "lastPrompt": "and now the tests", "sessionId": SID}, *extra]
    write_lines(session_file(root), records)


def test_an_import_of_a_session_recorded_live_leaves_every_field_of_the_record(tmp_path: Path) -> None:
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        before = _live(registry)
        _files(tmp_path / "claude")
        run_import(registry.store, "claude-code", tmp_path / "claude")
        after = registry.state(STORED)
        assert after is not None
        assert after.meta == before.meta  # no agentSessionId, path, agentMessageCount, gitBranch keys
        assert (after.title, after.title_source) == ("Paginate the orders endpoint", TitleSource.AGENT)
        assert (after.messages, after.updated_at, after.cwd) == (before.messages, before.updated_at, before.cwd)


def test_a_user_named_live_session_keeps_its_name_when_the_files_have_a_later_prompt(tmp_path: Path) -> None:
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        _live(registry)
        registry.set_title(STORED, "Orders, my way")
        _files(tmp_path / "claude", {"type": "custom-title", "customTitle": "from the files", "sessionId": SID})
        run_import(registry.store, "claude-code", tmp_path / "claude")
        state = registry.state(STORED)
        assert state is not None and (state.title, state.title_source) == ("Orders, my way", TitleSource.USER)


def test_a_live_fork_keeps_its_folder_and_title_when_the_files_put_it_in_its_sources(tmp_path: Path) -> None:
    """claude-agent-acp writes a fork's transcript in its source's project with a "(fork)" title."""
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        _live(registry, cwd="/home/dev/acme-api/forked")
        title = {"type": "custom-title", "customTitle": "Paginate the orders endpoint (fork)", "sessionId": SID}
        _files(tmp_path / "claude", title, cwd=LIVE_CWD)
        run_import(registry.store, "claude-code", tmp_path / "claude")
        state = registry.state(STORED)
        assert state is not None
        assert (state.cwd, state.title) == ("/home/dev/acme-api/forked", "Paginate the orders endpoint")


def test_an_import_fills_what_a_live_record_lacks_and_nothing_else(tmp_path: Path) -> None:
    """No title and no turn recorded (a proxy killed before it wrote the turn): the files' title and count, and the
    key that tells a live turn an import counted the files."""
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        registry.create(LIVE_CWD, session_id=STORED, agent="claude-code", at=AT)
        _files(tmp_path / "claude", turns=1)
        run_import(registry.store, "claude-code", tmp_path / "claude")
        state = registry.state(STORED)
        assert state is not None
        assert (state.messages, state.title, state.title_source) == (2, "and now the tests", TitleSource.PROMPT)
        assert state.meta == {META_AGENT_MESSAGES: 2}


def test_a_live_record_whose_file_goes_away_is_not_deleted_by_the_import(tmp_path: Path) -> None:
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        _live(registry)
        root = tmp_path / "claude"
        _files(root)
        state_file = tmp_path / "import-state"
        run_import(registry.store, "claude-code", root, state=state_file)
        session_file(root).unlink()
        run_import(registry.store, "claude-code", root, state=state_file)
        state = registry.state(STORED)
        assert state is not None and not state.deleted


def test_a_record_the_importer_made_still_follows_the_files(tmp_path: Path) -> None:
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        root = tmp_path / "claude"
        _files(root, turns=1)
        run_import(registry.store, "claude-code", root)
        _files(root, {"type": "ai-title", "aiTitle": "Orders", "sessionId": SID}, turns=2)
        run_import(registry.store, "claude-code", root)
        state = registry.state(STORED)
        assert state is not None and META_PATH in (state.meta or {})
        assert (state.messages, state.title) == (4, "Orders")  # Claude Code's own order: its title, then prompts
        listed = msgspec.to_builtins(registry.list().sessions[0])
        assert listed["_meta"][META_TITLE_SOURCE] == "agent"


@pytest.mark.parametrize("kept_state", [True, False])
def test_a_turn_an_import_caught_half_way_is_answered_by_the_live_record_once(tmp_path: Path, kept_state: bool) -> None:
    """An import reads the agent's file after the prompt was written and before the answer was (a proxy's history
    import, or ``import-agents --watch``, in the middle of a turn): the proxy's turn then adds the answer and what it
    used, and the import that reads the answer from the file afterwards - continuing where it stopped, or from the
    start - adds neither again."""
    root, state = tmp_path / "claude", (tmp_path / "import-state" if kept_state else None)
    used = Usage(input_tokens=5, output_tokens=3)
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        registry.create(LIVE_CWD, session_id=STORED, agent="claude-code", at=AT)
        began = registry.state(STORED)
        write_lines(session_file(root), [prompt("2026-03-02T09:00:00.000Z", "turn 0", cwd=LIVE_CWD)])
        run_import(registry.store, "claude-code", root, state=state)
        said = [Message(role=Role.USER, text="turn 0"), Message(role=Role.AGENT, text="ok")]
        registry.record_turn(STORED, messages=2, began=began, conversation=said, usage=used)
        answer = reply("2026-03-02T09:00:01.000Z", "msg_0", cwd=LIVE_CWD, usage={"input_tokens": 5, "output_tokens": 3})
        write_lines(session_file(root), [answer], mode="a")
        run_import(registry.store, "claude-code", root, state=state)
        assert [(line.role, line.text) for line in registry.transcript(STORED).lines()] == [
            ("user", "turn 0"),
            ("agent", "ok"),
        ]
        after = registry.state(STORED)
        assert after is not None and after.usage is not None
        assert (after.usage.input_tokens, after.usage.output_tokens) == (5, 3)
        # The next turn is the import's again when the proxy did not see it: added once, with its answer.
        write_lines(session_file(root), [prompt("2026-03-02T09:01:00.000Z", "turn 1", cwd=LIVE_CWD)], mode="a")
        run_import(registry.store, "claude-code", root, state=state)
        write_lines(session_file(root), [reply("2026-03-02T09:01:01.000Z", "msg_1", "done", cwd=LIVE_CWD)], mode="a")
        run_import(registry.store, "claude-code", root, state=state)
        assert [line.text for line in registry.transcript(STORED).lines()] == ["turn 0", "ok", "turn 1", "done"]
