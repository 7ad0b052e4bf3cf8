"""One turn, one count: a turn the proxy records live and the same turn read from the agent's files (by the real
Claude Code importer) are one turn, whichever is written first - the property the proxy's start-up import and its
live recording race on."""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
from hypothesis import given, settings

from events.memory import MemoryStore
from registry.proxy.book import Book
from registry.proxy.identity import Identity
from registry.proxy.recorder import Recorder
from registry.proxy.titles import TitlePolicy
from registry.service import SessionRegistry
from tests.importing import SID, prompt, reply, run_import, session_file, write_lines

# Where the import runs, relative to each live turn: before the turn's records reach the files, while the turn is
# under way (its records written, its answer not yet relayed), or after the proxy recorded it.
WHEN = st.sampled_from(["before", "during", "after", "none"])


def _counts(tmp_path: Path, order: list[str]) -> tuple[int, str | None]:
    root = tmp_path / "claude"
    with SessionRegistry(MemoryStore(), owns_store=True, follow=False) as registry:
        identity = Identity(["claude-agent-acp"])
        recorder = Recorder(registry, identity, Book(registry.read_model, identity), TitlePolicy(lambda _line: None))
        records = [prompt("2026-03-02T09:00:00.000Z", "first"), reply("2026-03-02T09:00:01.000Z", "msg_0")]
        write_lines(session_file(root), records)
        run_import(registry.store, "claude-code", root)  # the session's past, before the proxy
        for n, when in enumerate(order, 1):
            if when == "before":
                run_import(registry.store, "claude-code", root)
            recorder.turn_began(SID)
            records += [
                prompt(f"2026-03-02T09:{n:02}:00.000Z", f"turn {n}"),
                reply(f"2026-03-02T09:{n:02}:01.000Z", f"msg_{n}"),
            ]
            write_lines(session_file(root), records)  # the agent writes the turn, then answers it
            if when == "during":
                run_import(registry.store, "claude-code", root)
            recorder.turn(SID, answered=True)
            if when == "after":
                run_import(registry.store, "claude-code", root)
        run_import(registry.store, "claude-code", root)
        state = registry.state(f"claude-code:{SID}")
        assert state is not None
        return state.messages, state.title


@settings(max_examples=25, deadline=None)
@given(order=st.lists(WHEN, min_size=1, max_size=4))
def test_a_turn_seen_live_and_read_from_the_files_counts_once_in_any_order(
    tmp_path_factory: object, order: list[str]
) -> None:
    tmp_path = tmp_path_factory.mktemp("turns")  # type: ignore[attr-defined]
    messages, _ = _counts(tmp_path, order)
    assert messages == 2 + 2 * len(order)  # the past's turn, then each live turn once: as the files count them
