"""Every end of a proxy explained (issue 42): a signal names itself in the waiting requests' answers and on stderr,
however it races the client's end; the client's end is named when it is why the agent ended; no traceback when
the agent is gone before anything started; a proxy without an agent on a terminal says what it waits for. Real
proxy processes, real signals, a real terminal."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.proxy_wire import ROOT, ProxyProcess, prompt, proxy_command
from tests.waiting import wait_until


def _with_a_turn_at_the_agent(url: str, tmp_path: Path) -> ProxyProcess:
    """A proxy whose scripted agent has a minute-long turn under way (seen in the agent's own log of what it got)."""
    log = tmp_path / "agent.log"
    proxy = ProxyProcess(proxy_command(url, "--log", str(log)))
    proxy.result(0, "initialize", {"protocolVersion": 1})
    session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
    proxy.send({"id": 2, "method": "session/prompt", "params": prompt(session, "slow 60")})
    wait_until(lambda: log.exists() and b"slow 60" in log.read_bytes(), 30, "the prompt to reach the agent")
    return proxy


@pytest.mark.parametrize("attempt", range(4))
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_that_comes_with_the_clients_end_names_itself(tmp_path: Path, name: str, attempt: int) -> None:
    """Ctrl-C on a terminal, or a SIGTERM to a process group, reaches the client and the proxy at once: the client
    goes (its end reaches the proxy too). Whichever the proxy sees first, the waiting prompt is told the signal
    (on main before this, most runs told it "the agent exited with code 0", and stderr said nothing)."""
    signum = signal.Signals[name]
    proxy = _with_a_turn_at_the_agent(f"sqlite://{tmp_path}/sessions.db", tmp_path)
    with proxy:
        proxy.proc.send_signal(signum)
        assert proxy.proc.stdin is not None
        proxy.proc.stdin.close()
        error = proxy.pump(2)["error"]
        assert error["code"] == -32603 and f"stopped ({signum.name})" in error["message"], error
        assert proxy.proc.wait(30) == 0
    said = [line for line in proxy.stderr_lines if signum.name in line]
    assert said == [
        f"acp-registry proxy: stopped ({signum.name}): 1 requests were waiting for the agent; each was answered"
        " with an error"
    ], proxy.stderr_lines


def test_a_signal_with_nothing_waiting_is_said_once(tmp_path: Path) -> None:
    proxy = ProxyProcess(proxy_command(f"sqlite://{tmp_path}/sessions.db"))
    with proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        proxy.proc.send_signal(signal.SIGTERM)
        assert proxy.proc.wait(30) == 0
    assert [line for line in proxy.stderr_lines if "SIGTERM" in line] == ["acp-registry proxy: stopped (SIGTERM)"]


def test_the_clients_end_is_named_when_it_is_why_the_agent_ended_before_answering(tmp_path: Path) -> None:
    proxy = _with_a_turn_at_the_agent(f"sqlite://{tmp_path}/sessions.db", tmp_path)
    with proxy:
        assert proxy.proc.stdin is not None
        proxy.proc.stdin.close()
        message = proxy.pump(2)["error"]["message"]
        program = Path(sys.executable).name  # the agent's command, as started: python or python3, as the venv has it
        ended = f"the agent scripted-agent ({program}) exited with code 0 before answering"
        assert message == f"the client's input ended; {ended}"
        assert proxy.proc.wait(30) == 0
    assert [line for line in proxy.stderr_lines if "input ended" in line] == [
        f"acp-registry proxy: {message}; 1 requests were waiting for it, each was answered with an error"
    ]


def _proxy_of_true(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*proxy_command(url, command=["true"])],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )


def test_an_agent_gone_at_once_and_a_client_gone_at_once_end_without_a_traceback(tmp_path: Path) -> None:
    """``proxy -- true`` with nothing on stdin: the agent's end and the client's race the proxy's own start (on main
    before this, one run in six ended in ``cannot join thread before it is started``)."""
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(_proxy_of_true, [f"sqlite://{tmp_path}/s{n}.db" for n in range(24)]))
    for done in runs:
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 1), done.stderr
        assert "the agent true (true) exited with code 0" in done.stderr or done.returncode == 0


def test_a_proxy_without_an_agent_on_a_terminal_says_what_it_waits_for(tmp_path: Path) -> None:
    """No command: a link of a conductor's chain, reading its stdin - on a terminal, a person waits for it."""
    controller, terminal = pty.openpty()
    command = [sys.executable, "-m", "registry.cli", "proxy", "--store", f"sqlite://{tmp_path}/sessions.db"]
    proc = subprocess.Popen(command, stdin=terminal, stdout=terminal, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(terminal)
    try:
        assert proc.stderr is not None
        said = b""
        deadline = time.monotonic() + 30
        while b"waiting" not in said:
            assert time.monotonic() < deadline, said
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                assert chunk, said
                said += chunk
        assert b"no agent command: waiting on stdin for a conductor's initialize" in said
        assert b"acp-registry proxy -- COMMAND [ARGS...]" in said
        os.write(controller, b"\x04")  # Ctrl-D: the end of its input
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)


def test_a_proxy_without_an_agent_on_a_pipe_says_nothing_of_it(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "registry.cli", "proxy", "--store", f"sqlite://{tmp_path}/sessions.db"]
    done = subprocess.run(command, input="", capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert done.returncode == 0 and "waiting" not in done.stderr, done.stderr
