"""Offered means openable (``registry.proxy.kept``): the agent's own list, asked after a session's turn, says
whether the agent kept it - and only a list asked after the session's latest turn says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from registry.proxy.kept import KeptCheck
from registry.proxy.wire import AgentLine

Answer = Callable[[AgentLine | None], None]


class _Agent:
    """The agent's side of the check: each ``session/list`` asked is held until the test answers it."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, Answer]] = []

    def request(self, method: str, params: Any, answer: Answer) -> None:
        assert method == "session/list"
        self.asked.append((params, answer))

    def answer(self, index: int, *session_ids: str) -> None:
        _, answer = self.asked[index]
        page = {"sessions": [{"sessionId": s, "cwd": "/work"} for s in session_ids]}
        answer(AgentLine(id=index, result=msgspec.Raw(msgspec.json.encode(page))))


def test_a_list_after_the_latest_turn_that_leaves_the_session_out_says_the_agent_did_not_keep_it() -> None:
    agent = _Agent()
    check = KeptCheck(agent.request)
    check.opened("s1", "/work")
    check.turned("s1")
    assert agent.asked[0][0] == {"cwd": "/work"}
    agent.answer(0, "other")
    assert check.unkept == {"s1"}


def test_a_later_turn_takes_back_what_an_earlier_list_said() -> None:
    """claude-agent-acp keeps a session whose first turn was cancelled only at its next turn; the connection may end
    before the list asked after that turn answers: the earlier list is no evidence then."""
    agent = _Agent()
    check = KeptCheck(agent.request)
    check.opened("s1", "/work")
    check.turned("s1")
    agent.answer(0)  # after the cancelled turn: not there yet
    assert check.unkept == {"s1"}
    check.turned("s1")  # the next turn: the agent saves it now
    assert check.unkept == set()  # unknown until this turn's list answers (or never, if the connection ends first)
    agent.answer(1, "s1")
    assert check.kept == {"s1"} and check.unkept == set()


def test_a_list_asked_before_the_latest_turn_that_answers_late_proves_nothing() -> None:
    agent = _Agent()
    check = KeptCheck(agent.request)
    check.opened("s1", "/work")
    check.turned("s1")
    check.turned("s1")
    agent.answer(0)  # the first turn's list, answered after the second turn
    assert check.unkept == set()
    agent.answer(1)  # the latest turn's list
    assert check.unkept == {"s1"}


def test_an_error_or_no_answer_proves_nothing() -> None:
    agent = _Agent()
    check = KeptCheck(agent.request)
    check.opened("s1", "/work")
    check.turned("s1")
    agent.asked[0][1](None)
    assert check.unkept == set() and check.kept == set()
