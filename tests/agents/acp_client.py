"""A small ACP client over stdio for the real-agent tests: it plays the editor in front of a real process.

It starts the process in a session (process group) of its own, reads its stdout on a thread and checks that every
line is one JSON-RPC message (stdout must carry nothing else), keeps every notification, and answers the
agent-to-client requests a real agent may send mid-turn the way a cautious editor would:
``session/request_permission`` is cancelled (or answered with the option a test chose), anything else gets
-32601. Closing sends EOF and waits; a process
that outlives the wait is ended with SIGTERM, then SIGKILL, by its own process group id.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Message = dict[str, Any]


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, method: str, error: Message) -> None:
        super().__init__(f"{method}: {error.get('code')} {error.get('message')}")
        self.code: int | None = error.get("code")
        self.error = error


class AcpProcess:
    """One ACP peer process (the proxy in front of an agent, or an agent itself) driven as an editor would."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> None:
        self.argv = list(argv)
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        self._ids = itertools.count(1)
        self._changed = threading.Condition()
        self._responses: dict[Any, Message] = {}
        self._write_lock = threading.Lock()
        self.notifications: list[Message] = []
        self.agent_requests: list[Message] = []
        self.bad_lines: list[bytes] = []
        self.stderr = bytearray()
        self.init_result: Message = {}  # what initialize answered, kept by whoever sent it
        self.permission: str | None = None  # the optionId to select on session/request_permission; None: cancel
        self._stdout_done = False
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # --- reading -------------------------------------------------------------------------------------------

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr += line

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                self.bad_lines.append(line)
                continue
            if "method" in message and "id" in message:
                self.agent_requests.append(message)
                self._answer(message)
                continue
            with self._changed:
                if "method" in message:
                    self.notifications.append(message)
                else:
                    self._responses[message.get("id")] = message
                self._changed.notify_all()
        with self._changed:
            self._stdout_done = True
            self._changed.notify_all()

    def _answer(self, request: Message) -> None:
        if request["method"] == "session/request_permission":
            choice = self.permission
            outcome = {"outcome": "selected", "optionId": choice} if choice else {"outcome": "cancelled"}
            self._write({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": outcome}})
        else:
            error = {"code": -32601, "message": f"the test client does not offer {request['method']}"}
            self._write({"jsonrpc": "2.0", "id": request["id"], "error": error})

    # --- writing -------------------------------------------------------------------------------------------

    def _write(self, message: Message) -> None:
        assert self.process.stdin is not None
        with self._write_lock, contextlib.suppress(BrokenPipeError, ValueError):
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()

    def send(self, method: str, params: Any = None) -> int:
        """Sends a request and returns its id (for ``wait``)."""
        request_id = next(self._ids)
        message: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)
        return request_id

    def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def wait(self, request_id: int, timeout: float) -> Message:
        """The response to ``request_id``; AssertionError (with the stderr tail) when none comes in time."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while request_id not in self._responses:
                remaining = deadline - time.monotonic()
                if self._stdout_done or remaining <= 0:
                    reason = "its stdout closed" if self._stdout_done else f"nothing within {timeout} s"
                    raise AssertionError(f"no answer to request {request_id} ({reason}); stderr: {self.stderr_tail()}")
                self._changed.wait(remaining)
            return self._responses.pop(request_id)

    def request(self, method: str, params: Any = None, *, timeout: float = 60) -> Message:
        """The whole response message (``result`` or ``error``)."""
        return self.wait(self.send(method, params), timeout)

    def call(self, method: str, params: Any = None, *, timeout: float = 60) -> Any:
        """The result; RpcError for an error answer."""
        response = self.request(method, params, timeout=timeout)
        if "error" in response:
            raise RpcError(method, response["error"])
        return response["result"]

    # --- what was received ---------------------------------------------------------------------------------

    def updates(self, session_id: str, kind: str | None = None) -> list[Message]:
        """The ``update`` objects of the ``session/update`` notifications received for a session, in order."""
        with self._changed:
            notes = list(self.notifications)
        found = []
        for note in notes:
            params = note.get("params") or {}
            if note.get("method") == "session/update" and params.get("sessionId") == session_id:
                update = params.get("update") or {}
                if kind is None or update.get("sessionUpdate") == kind:
                    found.append(update)
        return found

    def titles(self, session_id: str) -> list[Message]:
        """The ``session_info_update``s of a session that carry a title (the others carry what a turn, an archive or
        ``_meta`` changed: the registry's changes, as ``serve`` sends them)."""
        return [update for update in self.updates(session_id, "session_info_update") if "title" in update]

    def wait_for_update(self, session_id: str, kind: str, timeout: float, *, titled: bool = False) -> Message:
        deadline = time.monotonic() + timeout
        while True:
            found = self.titles(session_id) if titled else self.updates(session_id, kind)
            if found:
                return found[-1]
            if time.monotonic() > deadline:
                raise AssertionError(f"no {kind} for {session_id} within {timeout} s; stderr: {self.stderr_tail()}")
            with self._changed:
                self._changed.wait(0.2)

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        """The concatenated text of the chunks of one kind received for a session."""
        parts = []
        for update in self.updates(session_id, kind):
            content = update.get("content") or {}
            if isinstance(content, dict) and content.get("type") == "text":
                parts.append(str(content.get("text", "")))
        return "".join(parts)

    def stderr_tail(self, size: int = 2000) -> str:
        return bytes(self.stderr[-size:]).decode(errors="replace")

    # --- ending --------------------------------------------------------------------------------------------

    def close(self, timeout: float = 20) -> int | None:
        """EOF on stdin, then the exit status; None when it had to be ended by signal after ``timeout``."""
        if self.process.stdin is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.process.stdin.close()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """Ends the process group this client started (the process and the agent it spawned)."""
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        # Children that outlived their parent still hold the group id.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def __enter__(self) -> AcpProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
