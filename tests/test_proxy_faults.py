"""The proxy's faults and its many-agents store, with real processes: crashes (SIGKILL), exits, a stubborn agent,
a corrupt store, a store that refuses writes mid-session, two proxies on one SQLite file or PostgreSQL schema."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events.sqlite import SqliteStore
from registry.proxy import Proxy
from registry.service import SessionRegistry
from tests.proxy_wire import AGENT, ProxyProcess, prompt, proxy_command, started, write_locked
from tests.waiting import children, ignores_signal, next_millisecond, wait_until


@pytest.mark.parametrize(("script", "how"), [("crash", "was killed by signal 9"), ("exit", "exited with code 3")])
def test_an_agent_that_ends_mid_turn_fails_each_pending_request_and_the_proxy_exits_1(
    url: str, tmp_path: Path, script: str, how: str
) -> None:
    proxy, session = started(url, cwd=str(tmp_path))
    with proxy:
        proxy.send({"id": 7, "method": "session/prompt", "params": prompt(session, "slow 30")})
        proxy.send({"id": 8, "method": "session/prompt", "params": prompt(session, script)})
        for request_id in (7, 8):
            error = proxy.pump(request_id)["error"]
            assert error["code"] == -32603
            assert "scripted-agent" in error["message"] and how in error["message"]
        assert proxy.proc.wait(20) == 1
    own = [line for line in proxy.stderr_lines if line.startswith("acp-registry proxy:")]
    named, ended = own[:1], own[1:]  # the name it records under, said once; then how the agent ended, once
    assert named == ["acp-registry proxy: recording as agent 'scripted-agent' (from agentInfo)"], own
    assert len(ended) == 1 and how in ended[0], proxy.stderr_lines


@pytest.mark.slow
def test_client_eof_ends_an_agent_that_ignores_its_stdin(url: str, tmp_path: Path) -> None:
    stubborn = [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)",
    ]
    with ProxyProcess(proxy_command(url, command=stubborn)) as proxy:
        pid = proxy.proc.pid
        wait_until(lambda: any(ignores_signal(c, signal.SIGTERM) for c in children(pid)), 30, "the agent to start")
        started_at = time.monotonic()
        assert proxy.close(timeout=30) == 0
        assert time.monotonic() - started_at < 15


def test_client_eof_closes_the_agents_stdin_and_exits_0(url: str, tmp_path: Path) -> None:
    proxy, _ = started(url, cwd=str(tmp_path))
    with proxy:
        assert proxy.close() == 0
    assert "scripted agent: stdin closed" in proxy.stderr_lines


def test_client_eof_ends_what_the_agent_started_that_holds_its_stdout(url: str, tmp_path: Path) -> None:
    """An agent that leaves a child of its own holding its stdout (as npm wrappers do) still lets the proxy end."""
    agent = ["sh", "-c", f"sleep 60 & exec {sys.executable} {AGENT}"]
    with ProxyProcess(proxy_command(url, command=agent)) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        started_at = time.monotonic()
        assert proxy.close(timeout=30) == 0
        assert time.monotonic() - started_at < 10


def _agent_leaving_its_pid(marker: Path) -> list[str]:
    """An agent that writes its pid to ``marker`` and then lives a minute unless ended."""
    code = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    return [sys.executable, "-c", code]


def _ended(marker: Path) -> bool:
    """Whether the agent that wrote ``marker`` has been ended (it started: the store opens while it starts)."""
    deadline = time.monotonic() + 10
    while not marker.exists() or not marker.read_text():
        if time.monotonic() > deadline:
            return True  # ended before it got to write
        time.sleep(0.05)  # the next look, bounded by the deadline
    try:
        os.kill(int(marker.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


def test_a_corrupt_store_is_one_line_exit_2_and_the_agent_ended(tmp_path: Path) -> None:
    store = tmp_path / "corrupt.db"
    store.write_bytes(b"this is not a database" * 100)
    marker = tmp_path / "agent-pid"
    with ProxyProcess(proxy_command(f"sqlite://{store}", command=_agent_leaving_its_pid(marker))) as proxy:
        assert proxy.proc.wait(20) == 2
        assert proxy.next() is None  # nothing on stdout
    assert len(proxy.stderr_lines) == 1 and proxy.stderr_lines[0].startswith("acp-registry: ")
    assert _ended(marker)


def test_an_unreachable_postgresql_is_one_line_exit_2_and_the_agent_ended(tmp_path: Path) -> None:
    marker = tmp_path / "agent-pid"
    url = "postgresql://postgres@127.0.0.1:1/test"
    with ProxyProcess(proxy_command(url, command=_agent_leaving_its_pid(marker))) as proxy:
        assert proxy.proc.wait(60) == 2
        assert proxy.next() is None
    assert len(proxy.stderr_lines) == 1 and "cannot open the store" in proxy.stderr_lines[0]
    assert _ended(marker)


def test_an_agent_that_cannot_start_is_one_line_exit_2(url: str, tmp_path: Path) -> None:
    with ProxyProcess(proxy_command(url, command=[str(tmp_path / "no-such-agent")])) as proxy:
        assert proxy.proc.wait(20) == 2
    assert len(proxy.stderr_lines) == 1 and "cannot start the agent" in proxy.stderr_lines[0]


def test_a_store_that_refuses_writes_degrades_the_list_never_the_conversation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The library piece in a host's process: a real SQLite store whose writers give up after 0.3 s, locked by
    another connection mid-session, then released."""
    path = tmp_path / "sessions.db"
    with proxied_on_sqlite(path, tmp_path) as (_, client, session):
        with write_locked(path):  # every writer now gets SQLITE_BUSY (readers of the WAL go on)
            assert client.result(3, "session/prompt", prompt(session, "while locked")) == {"stopReason": "end_turn"}
            second = client.result(4, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
            listed = client.call(5, "session/list", {})
            assert _degraded(listed), listed

        def resumed() -> bool:  # recording resumes: the second session arrives
            listed = client.result(6, "session/list", {})
            ids = {s["sessionId"] for s in listed["sessions"]}
            return "acp-session-registry/degraded" not in listed["_meta"] and second in ids

        wait_until(resumed, 30, "recording to resume with the second session")
        assert client.end() == 0
    messages = _said_once_and_kept(caplog, f"sqlite://{path}", f"scripted-agent:{session}")
    assert any("records again" in m for m in messages)


def test_postgresql_refusing_writes_degrades_the_list_never_the_conversation(
    postgres_schemas: Callable[[], str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same on PostgreSQL: another connection holds the schema's append lock, so every append of the proxy's
    gives up after 0.3 s (its ``lock_timeout``) - the conversation goes on, the list says so, and recording
    resumes when the lock is released."""
    import psycopg  # noqa: PLC0415 - the dev extra has it; the fixture skips without a server

    from events.postgres import PostgresStore  # noqa: PLC0415
    from events.postgres_sql import lock_key  # noqa: PLC0415

    url = postgres_schemas()
    conninfo, _, query = url.partition("?")
    schema = query.removeprefix("schema=")
    registry = SessionRegistry(
        PostgresStore(conninfo, schema=schema, lock_timeout=0.3, retry_timeout=0.5), owns_store=True
    )
    client = InProcessClient(registry, [sys.executable, AGENT])
    try:
        client.result(0, "initialize", {"protocolVersion": 1})
        session = client.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert client.result(2, "session/list", {})["sessions"]
        with psycopg.connect(conninfo) as blocker:
            blocker.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("append", schema),))
            assert client.result(3, "session/prompt", prompt(session, "while locked")) == {"stopReason": "end_turn"}
            listed = client.call(4, "session/list", {})
            assert _degraded(listed), listed
            blocker.rollback()
        wait_until(lambda: not _degraded(client.call(5, "session/list", {})), 30, "recording to resume")
        assert client.end() == 0
    finally:
        registry.close()
    _said_once_and_kept(caplog, url, f"scripted-agent:{session}")


def _degraded(listed: dict[str, Any]) -> Any:
    """What a ``session/list`` call says of recording being down: its answer's ``_meta`` note, or its error's data."""
    return listed.get("result", {}).get("_meta", {}).get("acp-session-registry/degraded") or listed.get(
        "error", {}
    ).get("data")


def _said_once_and_kept(caplog: pytest.LogCaptureFixture, url: str, session_id: str) -> list[str]:
    """The proxy said once that it cannot record, and the turn made meanwhile is in the store: its messages."""
    messages = [r.getMessage() for r in caplog.records if r.name == "acp_registry.proxy"]
    assert len([m for m in messages if "cannot record" in m]) == 1, messages
    with SessionRegistry.open(url) as reopened:
        state = reopened.state(session_id)
        assert state is not None and state.messages == 2  # the turn made while the store refused
    return messages


@contextlib.contextmanager
def proxied_on_sqlite(path: Path, cwd: Path) -> Iterator[tuple[SessionRegistry, InProcessClient, str]]:
    """A proxy in this process in front of the scripted agent, on a SQLite store whose writers give up after 0.3 s:
    the registry, the client, and a session made and listed."""
    registry = SessionRegistry(SqliteStore(path, busy_timeout=0.3), owns_store=True)
    client = InProcessClient(registry, [sys.executable, AGENT])
    try:
        client.result(0, "initialize", {"protocolVersion": 1})
        session = client.result(1, "session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
        assert client.result(2, "session/list", {})["sessions"]
        yield registry, client, session
    finally:
        registry.close()


class InProcessClient:
    """A client of ``Proxy`` in this process, on two pipes."""

    def __init__(self, registry: SessionRegistry, command: list[str]) -> None:
        to_proxy_r, self._to_proxy = os.pipe()
        self._from_proxy, from_proxy_w = os.pipe()
        self.proxy = Proxy(registry, command, client_in=to_proxy_r, client_out=from_proxy_w)
        self._code: list[int] = []
        self._thread = threading.Thread(target=lambda: self._code.append(self.proxy.run()), daemon=True)
        self._thread.start()
        self._reader = os.fdopen(self._from_proxy, "rb")
        self._pending: dict[object, dict[str, object]] = {}

    def call(self, request_id: int, method: str, params: object) -> dict[str, Any]:
        line = msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        os.write(self._to_proxy, line + b"\n")
        while True:
            message = msgspec.json.decode(self._reader.readline())
            if "method" not in message and message.get("id") == request_id:
                return message  # type: ignore[no-any-return]

    def result(self, request_id: int, method: str, params: object) -> Any:
        answer = self.call(request_id, method, params)
        assert "result" in answer, answer
        return answer["result"]

    def end(self) -> int:
        os.close(self._to_proxy)
        self._thread.join(30)
        self.proxy.close()
        self._reader.close()
        return self._code[0]


def test_two_proxies_two_agents_one_store(store_urls: Callable[[], str], tmp_path: Path) -> None:
    url = store_urls()
    first, a = started(url, "--name", "alpha-agent", cwd=str(tmp_path))
    second, b = started(url, "--name", "beta-agent", cwd=str(tmp_path))
    with first, second:
        first.result(2, "session/prompt", prompt(a, "from alpha"))
        second.result(2, "session/prompt", prompt(b, "from beta"))
        assert [s["sessionId"] for s in first.result(3, "session/list", {})["sessions"]] == [a]
        assert [s["sessionId"] for s in second.result(3, "session/list", {})["sessions"]] == [b]
        assert first.close() == 0 and second.close() == 0
    with SessionRegistry.open(url) as registry:
        assert {s.session_id for s in registry.list().sessions} == {f"alpha-agent:{a}", f"beta-agent:{b}"}


def test_two_proxies_one_agent_one_store(store_urls: Callable[[], str], tmp_path: Path) -> None:
    url = store_urls()
    first, a = started(url, cwd=str(tmp_path))
    second, b = started(url, cwd=str(tmp_path))
    with first, second:
        first.result(2, "session/prompt", prompt(a, "window one"))
        next_millisecond()  # the list orders by updatedAt to the millisecond (then by id): two turns, two milliseconds
        second.result(2, "session/prompt", prompt(b, "window two"))
        first.result(6, "session/list", {})  # each list waits for its own proxy's recorder: both have written
        second.result(6, "session/list", {})
        for proxy in (second, first):
            listed = proxy.result(3, "session/list", {})["sessions"]
            assert [s["title"] for s in listed] == ["window two", "window one"]
        second.result(4, "session/delete", {"sessionId": a})
        assert [s["sessionId"] for s in first.result(5, "session/list", {})["sessions"]] == [b]
        assert first.close() == 0 and second.close() == 0


@pytest.mark.slow
def test_an_agent_that_crashes_leaving_a_child_holding_its_stdout_is_still_reported(url: str, tmp_path: Path) -> None:
    agent = ["sh", "-c", f"sleep 60 & exec {sys.executable} {AGENT}"]
    with ProxyProcess(proxy_command(url, command=agent)) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        proxy.send({"id": 2, "method": "session/prompt", "params": prompt(session, "crash")})
        assert "killed by signal 9" in proxy.pump(2, timeout=30)["error"]["message"]
        assert proxy.proc.wait(30) == 1
