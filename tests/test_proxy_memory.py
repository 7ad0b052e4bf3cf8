"""What the proxy keeps while another process holds the store's write lock is bounded in bytes (issue 42: 150
agent titles of 4 MB took a proxy to 604 MB, still 600 MB after the unlock). A real second connection holds
``BEGIN IMMEDIATE`` on the real SQLite file; what is kept is measured - the proxy process's resident memory, and
in process the bytes the recorder's queue holds (``tracemalloc``)."""

from __future__ import annotations

import gc
import logging
import random
import tracemalloc
from pathlib import Path

import pytest

from registry.commands import PROMPT_TITLE_LENGTH, one_line, prompt_title
from registry.limits import MAX_CAPTURE_BYTES
from registry.proxy.book import Book
from registry.proxy.identity import Identity
from registry.proxy.recorder import MAX_BACKLOG_BYTES, Recorder
from registry.proxy.titles import TitlePolicy
from registry.service import SessionRegistry
from registry.session_commands import command
from tests.proxy_wire import ProxyProcess, prompt, proxy_command, write_locked
from tests.waiting import wait_until

_MB = 1 << 20
_BIG = 4 << 20


def _resident(pid: int) -> int:
    """The process's resident memory in bytes (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("flood", ["agent titles", "prompts"])
def test_a_flood_while_the_store_is_locked_does_not_grow_the_proxy(tmp_path: Path, flood: str) -> None:
    """A turn under the lock holds the recorder on its write; then the flood: what it leaves in the queue must not
    be the flood itself (4 MB titles are refused before they are queued; a prompt is queued as the title it makes,
    and its conversation - the prompt and the agent's echo - waits in the capture's budget). What stays is within
    the two budgets (the recorder's and the capture's) and 32 MiB of the interpreter's own (memory that held a 4 MB
    line a moment is not all given back to the system); the flood is more than twice that."""
    path = tmp_path / "sessions.db"
    with ProxyProcess(proxy_command(f"sqlite://{path}")) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        proxy.result(2, "session/prompt", prompt(session, "before the lock"))
        before = _resident(proxy.proc.pid)
        with write_locked(path):
            proxy.result(3, "session/prompt", prompt(session, "while locked"))  # the recorder waits on its turn
            count = 60
            if flood == "agent titles":
                proxy.result(4, "session/prompt", prompt(session, f"retitle {count} {_BIG}"))
            else:
                for n in range(count):
                    proxy.result(10 + n, "session/prompt", prompt(session, "abcdefghij"[n % 10] * _BIG))
            grown = _resident(proxy.proc.pid) - before
            bound = MAX_BACKLOG_BYTES + MAX_CAPTURE_BYTES + 32 * _MB
            assert bound * 2 < count * _BIG
            assert grown < bound, f"{grown / _MB:.0f} MB kept for a flood of {count} x 4 MB"
        wait_until(lambda: _messages(proxy) >= 6, 60, "the turns to be written once the lock is free")
        assert proxy.close() == 0


def _messages(proxy: ProxyProcess) -> int:
    """The message count of the session the proxy lists first."""
    count: int = proxy.result(99, "session/list", {})["sessions"][0]["_meta"]["acp-session-registry/messageCount"]
    return count


def _recorder(registry: SessionRegistry) -> Recorder:
    identity = Identity(["agent"])
    return Recorder(registry, identity, Book(registry.read_model, identity), TitlePolicy(lambda _line: None))


def _kept_while(recorder: Recorder, put: int, hold: int) -> tuple[int, int]:
    """Bytes still allocated after ``put`` observations each holding a prompt of ``hold`` characters were queued
    (the test's own references dropped), and the bytes the recorder says they hold."""
    gc.collect()
    start, declared = tracemalloc.get_traced_memory()[0], recorder.held
    for n in range(put):
        native, text = f"s{n}", "abcdefghij"[n % 10] * hold
        recorder.put(lambda r, native=native, text=text: r.prompt_title(native, text), held=(native, text))  # type: ignore[misc]
        del native, text
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - start, recorder.held - declared


def test_the_recorders_queue_is_bounded_in_bytes_under_a_real_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every observation declares the strings it holds; the queue keeps ``MAX_BACKLOG_BYTES`` of them, the oldest
    going first (counted, and said when recording resumes); measured with ``tracemalloc``, not taken on trust."""
    path = tmp_path / "sessions.db"
    tracemalloc.start()
    try:
        with SessionRegistry.open(f"sqlite://{path}", follow=False) as registry:
            registry.create("/w", session_id="agent:first", agent="agent")
            recorder = _recorder(registry)
            recorder.start()
            with write_locked(path):
                title = command("session/set_title")
                assert title is not None
                recorder.put(lambda r: r.command("first", title, {"title": "Waits on the lock"}), held=("first",))
                kept, declared = _kept_while(recorder, 10_000, 64)
                assert 0 < kept <= declared  # what each declares is a bound on what it keeps
                flood = (MAX_BACKLOG_BYTES // _BIG) * 3  # three budgets' worth of 4 MB observations
                kept, _ = _kept_while(recorder, flood, _BIG)
                assert MAX_BACKLOG_BYTES - _BIG < recorder.held <= MAX_BACKLOG_BYTES  # full: the store took nothing
                assert registry.state("agent:first").title is None  # type: ignore[union-attr]
                assert tracemalloc.get_traced_memory()[0] < MAX_BACKLOG_BYTES + 8 * _MB
                assert kept < MAX_BACKLOG_BYTES
            assert recorder.wait_idle(60)
            recorder.close()
            assert recorder.held == 0
            assert registry.state("agent:first").title == "Waits on the lock"  # type: ignore[union-attr]
    finally:
        tracemalloc.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "acp_registry.proxy" and r.levelno == logging.ERROR]
    assert said[0] == (
        f"{MAX_BACKLOG_BYTES >> 20} MiB of observations are waiting for the store (it is slow or locked); the oldest"
        " are dropped from now on"
    )
    assert said[-1].startswith("the recorder has caught up; ") and said[-1].endswith(
        " observations were dropped in all"
    )


def test_an_observation_larger_than_the_budget_is_not_kept(tmp_path: Path) -> None:
    with SessionRegistry.open(f"sqlite://{tmp_path}/sessions.db", follow=False) as registry:
        recorder = _recorder(registry)
        huge = "/" + "x" * MAX_BACKLOG_BYTES
        recorder.put(lambda r: r.session("s", huge), held=("s", huge))
        assert recorder.held == 0
        recorder.start()
        assert recorder.wait_idle(30)
        recorder.close()
        assert registry.state("agent:s") is None


def test_a_prompts_title_read_from_its_head_is_the_title_of_the_whole_prompt() -> None:
    """The proxy queues the title a prompt makes (``prompt_title``), which reads a long prompt's head only: the same
    title, whatever the prompt holds (runs of white space and control characters across the head's end)."""
    rng = random.Random(42)
    alphabet = "ab \t\n\x01\u2026\u00e9"
    for _ in range(2000):
        text = "".join(rng.choices(alphabet, k=rng.choice([10, 300, 4095, 4096, 4097, 9000])))
        if rng.random() < 0.3:
            text = " " * rng.choice([4000, 4096, 5000]) + text
        assert prompt_title(text) == one_line(text, PROMPT_TITLE_LENGTH), repr(text[:60])
