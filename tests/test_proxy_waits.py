"""A client is never left waiting, and the relay never waits on the store: real proxy processes, real signals, a
real SQLite write lock held by another connection, and the recorder's memory bounds."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from events.memory import MemoryStore
from registry.limits import MAX_TITLE_LENGTH
from registry.proxy.book import Book
from registry.proxy.identity import Identity
from registry.proxy.recorder import EARLY_TITLE_BYTES, Recorder
from registry.proxy.titles import TitlePolicy
from registry.service import SessionRegistry
from tests.proxy_wire import AGENT, SIGTERM_IN_CLOSE, ProxyProcess, prompt, proxy_command, started, write_locked
from tests.waiting import wait_until


def test_with_the_stores_write_lock_held_elsewhere_no_answer_and_no_relayed_line_waits_for_it(
    url: str, tmp_path: Path
) -> None:
    """The store's writers wait up to 30 s for a lock (its busy timeout); the conversation must not. The bound
    below is a third of that, so that a loaded machine cannot make the test fail, yet waiting on the lock would."""
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.result(2, "session/prompt", prompt(session, "before the lock"))
        with write_locked(tmp_path / "sessions.db"):  # every writer now waits for the lock (readers of the WAL go on)
            began = time.monotonic()
            proxy.send({"id": 3, "method": "session/set_title", "params": {"sessionId": session, "title": "Locked"}})
            proxy.send({"id": 4, "method": "session/prompt", "params": prompt(session, "while locked")})
            assert proxy.pump(4)["result"] == {"stopReason": "end_turn"}  # the prompt reached the agent at once
            assert proxy.pump(3)["result"] == {"title": "Locked"}  # answered from memory
            assert time.monotonic() - began < 10
        wait_until(lambda: _title(proxy) == "Locked", 60, "the title to be written once the lock is free")
        assert proxy.close() == 0


def _title(proxy: ProxyProcess) -> str | None:
    """The title of the session the proxy lists first."""
    title: str | None = proxy.result(5, "session/list", {})["sessions"][0].get("title")
    return title


def test_ctrl_c_answers_the_waiting_request_with_an_error_and_says_so(url: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    proxy, session = started(url, "--log", str(log), cwd=str(tmp_path))
    with proxy:
        proxy.send({"id": 2, "method": "session/prompt", "params": prompt(session, "slow 60")})
        # the prompt is with the agent (its answer is a minute away): seen in the agent's own log of what it got
        wait_until(lambda: log.exists() and b"slow 60" in log.read_bytes(), 30, "the prompt to reach the agent")
        proxy.proc.send_signal(signal.SIGINT)
        error = proxy.pump(2)["error"]
        assert error["code"] == -32603 and "SIGINT" in error["message"]
        assert proxy.proc.wait(30) == 0
    said = [line for line in proxy.stderr_lines if "SIGINT" in line]
    assert said == [
        "acp-registry proxy: stopped (SIGINT): 1 requests were waiting for the agent; each was answered with an error"
    ]


def test_a_sigterm_while_the_proxy_closes_does_not_cut_the_recorders_writes_short(url: str, tmp_path: Path) -> None:
    """SIGTERM and Ctrl-C stay the proxy's own until ``close`` has written what the recorder holds: a second
    signal then asks again (on main before this, the handlers were restored first and it killed the proxy)."""
    command = [sys.executable, "-c", SIGTERM_IN_CLOSE, *proxy_command(url)[3:]]
    with ProxyProcess(command) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert proxy.result(2, "session/prompt", prompt(session, "kept")) == {"stopReason": "end_turn"}
        assert proxy.close() == 0
    with SessionRegistry.open(url, follow=False) as registry:
        state = registry.state(f"scripted-agent:{session}")
    assert state is not None and state.messages == 2 and state.title == "kept"


@pytest.mark.parametrize("attempt", range(3))
def test_an_agent_crash_is_exit_1_and_one_line_however_soon_the_client_goes(
    url: str, tmp_path: Path, attempt: int
) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.send({"id": 2, "method": "session/prompt", "params": prompt(session, "crash")})
        assert "killed by signal 9" in proxy.pump(2)["error"]["message"]
        assert proxy.close() == 1  # the client goes right after the error
    assert len([line for line in proxy.stderr_lines if "was killed by signal 9" in line]) == 1


@pytest.mark.slow
def test_an_agent_that_crashes_while_a_setsid_child_holds_its_stdout_fails_the_prompt_at_once(
    url: str, tmp_path: Path
) -> None:
    """The child lives a minute in a session of its own (no signal to the agent's group reaches it): the pending
    prompt must not wait for it. 20 s: a third of the child's life."""
    agent = ["sh", "-c", f"setsid sleep 60 & exec {sys.executable} {AGENT}"]
    with ProxyProcess(proxy_command(url, command=agent)) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        began = time.monotonic()
        proxy.send({"id": 2, "method": "session/prompt", "params": prompt(session, "crash")})
        assert "killed by signal 9" in proxy.pump(2, timeout=30)["error"]["message"]
        assert time.monotonic() - began < 20
        assert proxy.proc.wait(30) == 1


def test_titles_for_sessions_not_recorded_yet_are_bounded_in_bytes() -> None:
    """An agent that titles sessions nobody made (150 titles of 4 MB grew the proxy by 600 MB for its life)."""
    with SessionRegistry(MemoryStore(), owns_store=True) as registry:
        identity = Identity(["agent"])
        recorder = Recorder(registry, identity, Book(registry.read_model, identity), TitlePolicy(lambda _line: None))
        for n in range(150):
            recorder.agent_title(f"ghost-{n}", "t" * (4 << 20))  # over the title limit: refused as the store would
        for n in range(10_000):
            recorder.agent_title(f"ghost-{n}", "t" * MAX_TITLE_LENGTH)
        held = sum(len(k) + len(v or "") for k, v in recorder._early_titles.items())
        assert 0 < held <= EARLY_TITLE_BYTES


def test_a_host_that_closes_its_proxy_gets_every_thread_back(tmp_path: Path) -> None:
    """Embedded: ``Proxy`` on two pipes of the host's, the client's input still open when the host stops it."""
    import os  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from registry.proxy import Proxy  # noqa: PLC0415

    before = set(threading.enumerate())
    to_proxy_read, to_proxy = os.pipe()
    from_proxy, from_proxy_write = os.pipe()
    with SessionRegistry.open(f"sqlite://{tmp_path}/sessions.db") as registry:
        proxy = Proxy(registry, [sys.executable, AGENT, "--list"], client_in=to_proxy_read, client_out=from_proxy_write)
        runner = threading.Thread(target=proxy.run)
        runner.start()
        reader = os.fdopen(from_proxy, "rb")
        for request_id, method in enumerate(("initialize", "session/list")):
            os.write(to_proxy, b'{"jsonrpc":"2.0","id":%d,"method":"%s","params":{}}\n' % (request_id, method.encode()))
            assert b'"result"' in reader.readline()
        proxy.stop("the host is done")
        runner.join(30)
        proxy.close()
        left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
        assert left == [], left
    for fd in (to_proxy, to_proxy_read, from_proxy_write):
        os.close(fd)
    reader.close()
