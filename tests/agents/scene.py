"""What every real-agent test shares: a fake home and project folder, a store, the LLM stub, proxies to start.

A ``Scene`` is one test's world: ``tmp/home`` (the agents' HOME), ``tmp/project`` (the session cwd and the
processes' working directory), ``tmp/sessions.db`` (the registry's store). ``proxy()`` starts
``acp-registry proxy`` in front of an agent there and ``direct()`` the agent alone (to make history before a
proxy ever ran, or to ask the agent what it holds after). Every process is ended when the scene closes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from registry import SessionRegistry
from tests.agents import peers
from tests.agents.acp_client import AcpProcess, Message
from tests.agents.llm_stub import LLMStub

INITIALIZE: Message = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
    "clientInfo": {"name": "acp-session-registry-tests", "version": "1"},
}


def text_prompt(text: str) -> list[Message]:
    return [{"type": "text", "text": text}]


class Scene:
    def __init__(self, tmp: Path, agent: peers.Agent, *, stub: LLMStub | None = None) -> None:
        self.tmp = tmp
        self.agent = agent
        self.stub = stub
        env = peers.fake_home(tmp)
        if stub is not None and agent in (peers.CLAUDE_AGENT_ACP, peers.CLAUDE_CODE_ACP):
            env = peers.anthropic_env(env, stub.url)
        elif stub is not None and agent is peers.GEMINI:
            env = peers.gemini_env(env, stub.url)
        elif stub is not None and agent is peers.CODEX_ACP:
            env = peers.codex_env(env, stub.url)
        elif stub is not None and agent is peers.MISTRAL_VIBE:
            env = peers.vibe_env(env, stub.url)
        self.env = env
        self.home = Path(env["HOME"])
        self.project = tmp / "project"
        self.project.mkdir(exist_ok=True)
        self.store_url = f"sqlite://{tmp / 'sessions.db'}"
        self._processes: list[AcpProcess] = []

    def _start(self, argv: list[str]) -> AcpProcess:
        process = AcpProcess(argv, env=self.env, cwd=self.project)
        self._processes.append(process)
        return process

    def proxy(self, *extra: str, name: str | None = None, initialize: bool = True) -> AcpProcess:
        """``acp-registry proxy`` in front of the agent (``name`` for ``--agent``), initialized unless told not."""
        process = self._start(peers.proxy_command(self.store_url, self.agent, *extra, name=name))
        if initialize:
            process.init_result = process.call("initialize", INITIALIZE, timeout=120)
        return process

    def direct(self, initialize: bool = True) -> AcpProcess:
        """The agent without a proxy."""
        process = self._start(self.agent.command())
        if initialize:
            process.init_result = process.call("initialize", INITIALIZE, timeout=120)
        return process

    def new_session(self, process: AcpProcess) -> str:
        result = process.call("session/new", {"cwd": str(self.project), "mcpServers": []}, timeout=60)
        session_id = result["sessionId"]
        assert isinstance(session_id, str) and session_id
        return session_id

    def turn(self, process: AcpProcess, session_id: str, text: str, *, timeout: float = 90) -> Message:
        """One prompt answered with ``end_turn``; its result."""
        result = process.call("session/prompt", {"sessionId": session_id, "prompt": text_prompt(text)}, timeout=timeout)
        assert result["stopReason"] == "end_turn", result
        return dict(result)

    def load(self, process: AcpProcess, session_id: str) -> Any:
        params = {"sessionId": session_id, "cwd": str(self.project), "mcpServers": []}
        return process.call("session/load", params, timeout=60)

    def past(self, *prompts: str, check: Callable[[AcpProcess, str, str], None] | None = None) -> list[str]:
        """Sessions the agent makes alone, before any proxy ran, one real turn each (``check``ed with the agent,
        the session and the prompt when given); their ids."""
        direct = self.direct()
        ids = []
        for text in prompts:
            sid = self.new_session(direct)
            self.turn(direct, sid, text)
            if check is not None:
                check(direct, sid, text)
            ids.append(sid)
        direct.close(timeout=5)
        return ids

    def registry(self) -> SessionRegistry:
        return SessionRegistry.open(self.store_url, follow=False)

    def close(self) -> None:
        for process in self._processes:
            with contextlib.suppress(Exception):
                process.kill() if process.process.poll() is None else None


def list_all(process: AcpProcess, **params: Any) -> list[Message]:
    """Every session ``session/list`` returns, following ``nextCursor`` to the end."""
    sessions: list[Message] = []
    cursor: str | None = None
    for _ in range(1000):
        page = process.call("session/list", params | ({"cursor": cursor} if cursor else {}), timeout=60)
        sessions += page["sessions"]
        cursor = page.get("nextCursor")
        if cursor is None:
            return sessions
    raise AssertionError("session/list kept giving a nextCursor")


def wait_for_list(
    process: AcpProcess, done: Callable[[list[Message]], bool], *, timeout: float = 60, **params: Any
) -> list[Message]:
    """``list_all`` until ``done`` accepts it (a proxy imports an agent's history in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        sessions = list_all(process, **params)
        if done(sessions) or time.monotonic() > deadline:
            return sessions
        time.sleep(0.5)  # the next look (bounded by the deadline; the caller asserts on what it returns)


def by_id(sessions: list[Message]) -> dict[str, Message]:
    ids = [s["sessionId"] for s in sessions]
    assert len(ids) == len(set(ids)), f"a session listed twice: {ids}"
    return {s["sessionId"]: s for s in sessions}


@contextlib.contextmanager
def scene(tmp: Path, agent: peers.Agent, *, stub: bool = False) -> Iterator[Scene]:
    agent.require()
    with contextlib.ExitStack() as stack:
        llm = stack.enter_context(LLMStub()) if stub else None
        world = Scene(tmp, agent, stub=llm)
        stack.callback(world.close)
        yield world
