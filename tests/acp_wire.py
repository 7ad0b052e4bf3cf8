"""A real ``acp-registry serve`` process driven with raw bytes, for the edge and fuzz tests.

Every line the server writes is checked to be one JSON-RPC message (or a batch of responses) as it is read, so
a test that reads output also proves stdout holds only protocol.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent

Message = dict[str, Any]


def serve_command(url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "registry.cli", "serve", "--store", url, *extra]


def request(request_id: Any, method: str, params: Any = None) -> bytes:
    message: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return msgspec.json.encode(message)


def check_line(line: bytes) -> Message | list[Message]:
    """The message a line of the server's stdout holds; AssertionError when it is not JSON-RPC."""
    decoded = msgspec.json.decode(line)
    if isinstance(decoded, list):
        assert decoded, f"an empty batch on stdout: {line[:200]!r}"
        for item in decoded:
            _check_response(item, line)
        return decoded
    assert isinstance(decoded, dict) and decoded.get("jsonrpc") == "2.0", f"not JSON-RPC: {line[:200]!r}"
    if "method" in decoded:
        assert isinstance(decoded["method"], str) and "id" not in decoded, f"a request from the server: {line[:200]!r}"
        return decoded
    _check_response(decoded, line)
    return decoded


def _check_response(item: Any, line: bytes) -> None:
    assert isinstance(item, dict) and item.get("jsonrpc") == "2.0", f"not JSON-RPC: {line[:200]!r}"
    assert "id" in item and ("result" in item) != ("error" in item), f"not a response: {line[:200]!r}"
    if "error" in item:
        error = item["error"]
        assert isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)


class WireServer:
    """``acp-registry serve`` on a store URL, its stdout read line by line on a thread of its own."""

    def __init__(self, url: str, *extra: str, command: list[str] | None = None) -> None:
        """``acp-registry serve --store url extra...``, or ``command`` (another agent on the same wire)."""
        self.url = url
        self.process = subprocess.Popen(
            command or serve_command(url, *extra),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr += line

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def read_until(self, done: Callable[[Any], bool], timeout: float = 30) -> list[Any]:
        """Every message up to and including the first one ``done`` accepts (each line checked on the way)."""
        messages: list[Any] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer within {timeout} s; read so far: {messages[-5:]}") from None
            if line is None:
                raise AssertionError(f"the server ended (exit {self.process.wait()}): {bytes(self.stderr[-2000:])!r}")
            message = check_line(line)
            messages.append(message)
            if done(message):
                return messages

    def response(self, request_id: Any, timeout: float = 30) -> tuple[Message, list[Any]]:
        """The response to ``request_id``, and every message before it."""
        messages = self.read_until(
            lambda m: isinstance(m, dict) and "method" not in m and m["id"] == request_id, timeout
        )
        return messages[-1], messages[:-1]

    def call(self, request_id: Any, method: str, params: Any = None) -> Message:
        self.send(request(request_id, method, params))
        return self.response(request_id)[0]

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")  # pragma: no cover - Linux only

    def close(self, timeout: float = 30) -> int:
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:  # pragma: no cover - only when the server hangs
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> WireServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
