"""A real ``acp-registry proxy`` process in front of a real agent process, driven with raw lines.

Every line the proxy writes on stdout is checked to be JSON-RPC as it is read (``acp_wire.check_line``), so any
test that reads output also proves stdout holds only protocol.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import msgspec

ROOT = Path(__file__).resolve().parent.parent
AGENT = str(Path(__file__).with_name("proxy_agent.py"))

Message = dict[str, Any]


def proxy_command(url: str, *agent_args: str, agent: str | None = None, command: list[str] | None = None) -> list[str]:
    named = ["--agent", agent] if agent is not None else []
    return [
        sys.executable,
        "-m",
        "registry.cli",
        "proxy",
        "--store",
        url,
        *named,
        "--",
        *(command or [sys.executable, AGENT, *agent_args]),
    ]


def prompt(session_id: str, text: str) -> Message:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def check_line(line: bytes) -> Message | list[Message]:
    """The message a line of the proxy's stdout holds: a request or notification (the agent's, relayed), or a
    response; AssertionError when it is not JSON-RPC."""
    decoded = msgspec.json.decode(line)
    items = decoded if isinstance(decoded, list) else [decoded]
    for item in items:
        assert isinstance(item, dict) and item.get("jsonrpc") == "2.0", f"not JSON-RPC: {line[:200]!r}"
        if "method" in item:
            assert isinstance(item["method"], str), f"not JSON-RPC: {line[:200]!r}"
        else:
            assert "id" in item and ("result" in item) != ("error" in item), f"not a response: {line[:200]!r}"
    return decoded  # type: ignore[no-any-return]


SIGTERM_IN_CLOSE: Final = """
import os, signal, sys
from registry.proxy.proxy import Proxy
close = Proxy.close
def closing(self):
    os.kill(os.getpid(), signal.SIGTERM)  # a SIGTERM that lands while the proxy closes (a conductor's, after EOF)
    close(self)
Proxy.close = closing
from registry.cli import main
raise SystemExit(main(sys.argv[1:]))
"""
"""``python -c SIGTERM_IN_CLOSE proxy ...``: ``acp-registry``, sending itself SIGTERM as ``Proxy.close`` begins."""


@contextlib.contextmanager
def write_locked(path: Path | str) -> Iterator[None]:
    """Another process's writer, as SQLite sees it: a connection of its own holds the store file's write lock for
    the block (the store's writers wait for it, readers of the WAL go on)."""
    blocker = sqlite3.connect(path, timeout=30, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def piped(command: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``command`` started with pipes on its stdin, stdout and stderr, in this checkout (or ``cwd``), with ``env``
    over the tests' environment."""
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd or str(ROOT),
        env={**os.environ, **(env or {})},
    )


class ProxyProcess:
    """The proxy as a child process: send lines, read messages (responses by id, the rest in order)."""

    def __init__(self, command: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        self.proc = piped(command, cwd=cwd, env=env)
        self.lines: queue.Queue[Message | list[Message] | None] = queue.Queue()
        self.stderr_lines: list[str] = []
        self.notifications: list[Message] = []
        self.requests: list[Message] = []
        self._responses: dict[Any, Message] = {}
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(check_line(line.rstrip(b"\n")))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line.decode(errors="replace").rstrip("\n"))

    def send(self, message: Message | bytes) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else msgspec.json.encode({"jsonrpc": "2.0", **message})
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float = 20.0) -> Message | list[Message] | None:
        return self.lines.get(timeout=timeout)

    def pump(self, until: Any, timeout: float = 20.0) -> Message:
        """Read until the response with id ``until``; notifications and agent requests are kept in order."""
        deadline = time.monotonic() + timeout
        while until not in self._responses:
            item = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if item is None:
                raise EOFError(f"the proxy ended before answering {until!r}; stderr: {self.stderr_lines[-5:]}")
            if isinstance(item, list):
                raise AssertionError(f"a batch: {item}")
            self._keep(item)
        return self._responses.pop(until)

    def _keep(self, item: Message) -> None:
        """File a message read from the proxy: an agent's request, a notification or a response."""
        if "method" in item and "id" in item:
            self.requests.append(item)
        elif "method" in item:
            self.notifications.append(item)
        else:
            self._responses[item["id"]] = item

    def call(self, request_id: Any, method: str, params: Any = None, timeout: float = 20.0) -> Message:
        message: Message = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.pump(request_id, timeout)

    def result(self, request_id: Any, method: str, params: Any = None) -> Any:
        answer = self.call(request_id, method, params)
        assert "result" in answer, answer
        return answer["result"]

    def wait_request(self, method: str, timeout: float = 20.0) -> Message:
        deadline = time.monotonic() + timeout
        while True:
            for kept in self.requests:
                if kept["method"] == method:
                    self.requests.remove(kept)
                    return kept
            item = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if item is None or isinstance(item, list):
                raise AssertionError(f"no {method} request: {item}")
            self._keep(item)

    def updates(self, kind: str) -> list[Message]:
        return [
            n["params"]["update"]
            for n in self.notifications
            if n["method"] == "session/update" and n["params"]["update"].get("sessionUpdate") == kind
        ]

    def titles(self) -> list[str | None]:
        """The titles the client was told, in order: the ``session_info_update``s that carry one (the others carry
        what a turn, an archive or ``_meta`` changed)."""
        return [u["title"] for u in self.updates("session_info_update") if "title" in u]

    def close(self, timeout: float = 20.0) -> int:
        """Close stdin (the client's EOF) and wait for the proxy to end: its exit code."""
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        return self.proc.wait(timeout)

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def started(url: str, *agent_args: str, cwd: str, agent: str | None = None) -> tuple[ProxyProcess, str]:
    """A proxy in front of the scripted agent, initialized, with one new session in ``cwd``."""
    proxy = ProxyProcess(proxy_command(url, *agent_args, agent=agent))
    proxy.result(0, "initialize", {"protocolVersion": 1})
    session = proxy.result(1, "session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]
    return proxy, session
