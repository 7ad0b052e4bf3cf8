"""Exact counts under concurrency: two windows on one session - two proxies, each with its own registry on one
SQLite file - whose turns overlap in any order, and imports of the agent's files (the real Claude Code importer)
at any point, give the session exactly the count the agent's files give it: every live turn counted, none twice.
Also for an agent no importer reads (two windows alone), and for a session an import made first or one a proxy
made live."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from registry.proxy.book import Book
from registry.proxy.identity import Identity
from registry.proxy.recorder import Recorder
from registry.proxy.titles import TitlePolicy
from registry.service import SessionRegistry
from tests.importing import SID, prompt, reply, run_import, session_file, write_lines

# One step of the script: a window's next step (its turn begins, the agent writes the turn, the turn is answered,
# in that order, a window one turn at a time) or an import of the agent's files.
STEP = st.sampled_from(["A", "B", "import"])


class _Window:
    """One proxy: its own registry on the shared store, and the recorder that writes what it sees."""

    def __init__(self, url: str, agent: str) -> None:
        self.registry = SessionRegistry.open(url, follow=False)
        identity = Identity([agent])
        identity.told(agent)
        self.recorder = Recorder(
            self.registry, identity, Book(self.registry.read_model, identity), TitlePolicy(lambda _line: None)
        )
        self.step = 0


@contextmanager
def _windows(url: str, agent: str) -> Iterator[tuple[_Window, _Window]]:
    first, second = _Window(url, agent), _Window(url, agent)
    try:
        yield first, second
    finally:
        first.registry.close()
        second.registry.close()


def _play(tmp: Path, script: list[str], *, made: str, agent: str = "claude-agent-acp") -> tuple[int, int]:
    """Play ``script``; the session's count at the end, and the count the agent's own files give it."""
    url = f"sqlite://{tmp / 'sessions.db'}"
    root = tmp / "claude"
    records: list[Any] = []
    imported = agent == "claude-agent-acp"
    if made == "import":  # the session's past, read before any proxy
        records += [prompt("2026-03-02T09:00:00.000Z", "first"), reply("2026-03-02T09:00:01.000Z", "msg_0")]
        write_lines(session_file(root), records)
        with SessionRegistry.open(url) as registry:
            run_import(registry.store, "claude-code", root)
    with _windows(url, agent) as (a, b):
        if made == "live":
            a.recorder.session(SID, "/home/dev/acme-api", live=True, made=True)
        turns = 0

        def advance(window: _Window) -> None:
            nonlocal turns
            kind = window.step % 3
            window.step += 1
            if kind == 0:
                window.recorder.turn_began(SID)
            elif kind == 1:  # the agent writes the turn to its files, then answers it
                turns += 1
                n = len(records) // 2 + 1
                records.extend(
                    [
                        prompt(f"2026-03-02T09:{n:02}:00.000Z", f"turn {n}"),
                        reply(f"2026-03-02T09:{n:02}:01.000Z", f"msg_{n}"),
                    ]
                )
                if imported:
                    write_lines(session_file(root), records)
            else:
                window.recorder.turn(SID, answered=True)

        for step in script:
            if step == "import":
                if imported and records:
                    run_import(a.registry.store, "claude-code", root)
            else:
                advance(a if step == "A" else b)
        for window in (a, b):  # every turn under way ends
            while window.step % 3:
                advance(window)
        if imported and records:
            run_import(a.registry.store, "claude-code", root)  # the next start's import
        sid = f"{a.recorder.identity.name}:{SID}"
        state = a.registry.state(sid)
        assert state is not None
        return state.messages, len(records)


@settings(max_examples=40, deadline=None)
@given(script=st.lists(STEP, min_size=1, max_size=14), made=st.sampled_from(["import", "live"]))
def test_two_windows_and_imports_in_any_order_count_every_turn_once(
    tmp_path_factory: Any, script: list[str], made: str
) -> None:
    messages, in_files = _play(tmp_path_factory.mktemp("windows"), script, made=made)
    assert messages == in_files


@settings(max_examples=25, deadline=None)
@given(script=st.lists(st.sampled_from(["A", "B"]), min_size=1, max_size=14))
def test_two_windows_on_an_agent_without_an_importer_count_every_turn(tmp_path_factory: Any, script: list[str]) -> None:
    messages, turns_written = _play(tmp_path_factory.mktemp("windows"), script, made="live", agent="fast-agent-acp")
    assert messages == turns_written


def test_two_overlapping_turns_are_both_counted(tmp_path: Path) -> None:
    """The regression: both windows' turns begin at the same count; ``record_turn`` used to keep only one."""
    messages, written = _play(tmp_path, ["A", "B", "A", "B", "A", "B"] * 4, made="live", agent="fast-agent-acp")
    assert (messages, written) == (16, 16)
