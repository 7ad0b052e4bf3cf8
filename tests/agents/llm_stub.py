"""A local stand-in for the LLM HTTP APIs, so that real agents finish real turns offline in the tests.

It answers what claude-agent-acp / claude-code-acp (Anthropic ``POST /v1/messages`` and
``/v1/messages/count_tokens``), gemini-cli (Gemini ``:generateContent``, ``:streamGenerateContent`` with or
without ``alt=sse``, ``:countTokens``), codex-acp (OpenAI ``POST /v1/responses``) and mistral-vibe (OpenAI
``POST /v1/chat/completions``) ask for, streaming and not. The reply is derived from the request - the last user
text it holds, prefixed with ``REPLY_PREFIX`` - so a test can tell that the prompt it sent went through the agent
to the model and the model's answer came back to the client. Every request is recorded
(method, path, decoded body) for the tests to inspect; nothing is answered from a fixed transcript.

Agents point at it with ``ANTHROPIC_BASE_URL=<url>``, ``GOOGLE_GEMINI_BASE_URL=<url>`` or a codex
``config.toml`` provider whose ``base_url`` is ``<url>/v1``, and a dummy key.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY_PREFIX = "stub model heard: "
HOLD = "(hold)"
"""A prompt starting with this is answered only once ``LLMStub.release`` is set (or after ``HOLD_LIMIT`` seconds):
the agent sits in a turn for as long as a test needs (to cancel it, or to kill the agent in the middle)."""
HOLD_LIMIT = 60.0
TOOL = "(tool)"
"""A prompt starting with this gets, from the Anthropic API, a ``tool_use`` of ``Bash`` running ``TOOL_COMMAND``
first (so the agent asks its client for permission), then ``TOOL_DONE`` (each such prompt text: one tool call)."""
TOOL_COMMAND = "touch stub-tool-ran"
TOOL_DONE = "stub model saw the tool result"


@dataclass(frozen=True)
class StubRequest:
    method: str
    path: str
    body: Any


def _texts(value: Any) -> Iterator[str]:
    """Every text part of an Anthropic ``content`` or a Gemini ``parts`` value, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for part in value:
            kind = part.get("type", "text") if isinstance(part, dict) else None
            if kind in ("text", "input_text") and isinstance(part.get("text"), str):
                yield part["text"]


def last_user_text(body: Any) -> str:
    """The last user turn's text in an Anthropic (``messages``) or Gemini (``contents``) request, or ``""``."""
    if not isinstance(body, dict):
        return ""
    turns = body.get("messages") or body.get("contents") or body.get("input") or []
    for turn in reversed(turns if isinstance(turns, list) else []):
        if isinstance(turn, dict) and turn.get("role") == "user":
            # Agents wrap the user's words in reminders (<system-reminder>...); the user's own text is the last part.
            texts = [t for t in _texts(turn.get("content", turn.get("parts"))) if not t.startswith("<")]
            if texts:
                return texts[-1].strip()
    return ""


def _tool_uses(body: Any) -> int:
    """How many tool calls the conversation of an Anthropic request already holds."""
    count = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(1 for p in content if isinstance(p, dict) and p.get("type") == "tool_use")
    return count


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the agents' requests are recorded, not logged

    def _send_json(self, obj: Any, status: int = 200) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _start_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, data: Any, name: str | None = None) -> None:
        head = f"event: {name}\n" if name else ""
        self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def do_GET(self) -> None:
        self.server.record(StubRequest("GET", self.path, None))
        # Model listings (Anthropic /v1/models and the like): one model, whatever was asked.
        self._send_json({"data": [{"id": "stub-model", "type": "model", "display_name": "stub-model"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        path, _, query = self.path.partition("?")
        self.server.record(StubRequest("POST", self.path, body))
        if body is None:
            self._send_json({"error": {"type": "invalid_request_error", "message": "body is not JSON"}}, 400)
            return
        heard = last_user_text(body)
        if heard.startswith(HOLD):
            self.server.held.set()
            self.server.release.wait(HOLD_LIMIT)
        reply = REPLY_PREFIX + heard
        if path.endswith("/messages/count_tokens"):
            self._send_json({"input_tokens": 1})
        elif path.endswith("/messages"):
            self._anthropic(body, reply)
        elif path.endswith("/responses"):
            self._responses(body, reply)
        elif path.endswith("/chat/completions"):
            self._chat(body, reply)
        elif path.endswith(":countTokens"):
            self._send_json({"totalTokens": 1})
        elif path.endswith(":generateContent") or path.endswith(":streamGenerateContent"):
            self._gemini(path.endswith(":streamGenerateContent"), "alt=sse" in query, reply)
        else:
            self._send_json({"error": {"message": f"the LLM stub does not serve {path}"}}, 404)

    def _anthropic(self, body: dict[str, Any], reply: str) -> None:
        block: dict[str, Any] = {"type": "text", "text": reply}
        heard = last_user_text(body)
        if heard.startswith(TOOL) and not self.server.first_tool_call(heard):
            block = {"type": "text", "text": TOOL_DONE}  # the tool ran (or was refused): the turn ends
        elif heard.startswith(TOOL):
            tool_input = {"command": TOOL_COMMAND, "description": "Run the stub's command"}
            tool_id = f"toolu_stub_{_tool_uses(body) + 1}"
            block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": tool_input}
        stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
        message: dict[str, Any] = {
            "id": self.server.message_id(),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "stub-model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        if not body.get("stream"):
            self._send_json(message | {"content": [block], "stop_reason": stop})
            return
        if block["type"] == "tool_use":
            start = block | {"input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        self._start_events()
        for name, data in (
            ("message_start", {"message": message}),
            ("content_block_start", {"index": 0, "content_block": start}),
            ("content_block_delta", {"index": 0, "delta": delta}),
            ("content_block_stop", {"index": 0}),
            ("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 2}}),
            ("message_stop", {}),
        ):
            self._event(data | {"type": name}, name)

    def _responses(self, body: dict[str, Any], reply: str) -> None:
        """OpenAI's Responses API (codex-acp), streaming and not."""
        item = {
            "type": "message",
            "id": "msg_stub",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply, "annotations": []}],
        }
        usage = {
            "input_tokens": 1,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 2,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 3,
        }
        response = {
            "id": "resp_stub",
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model", "stub-model"),
            "status": "completed",
            "output": [item],
            "usage": usage,
        }
        if not body.get("stream"):
            self._send_json(response)
            return
        self._start_events()
        for name, data in (
            ("response.created", {"response": response | {"status": "in_progress", "output": []}}),
            (
                "response.output_item.added",
                {"output_index": 0, "item": item | {"status": "in_progress", "content": []}},
            ),
            (
                "response.output_text.delta",
                {"output_index": 0, "content_index": 0, "item_id": "msg_stub", "delta": reply},
            ),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            ("response.completed", {"response": response}),
        ):
            self._event(data | {"type": name}, name)

    def _chat(self, body: dict[str, Any], reply: str) -> None:
        """OpenAI's Chat Completions API (mistral-vibe), streaming and not."""
        base = {"id": "chatcmpl-stub", "created": int(time.time()), "model": body.get("model", "stub-model")}
        usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
            self._send_json(base | {"object": "chat.completion", "usage": usage, "choices": [choice]})
            return
        self._start_events()
        chunk = base | {"object": "chat.completion.chunk"}
        for delta in ({"role": "assistant", "content": ""}, {"content": reply}):
            self._event(chunk | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        self._event(chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _gemini(self, stream: bool, sse: bool, reply: str) -> None:
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": reply}]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2, "totalTokenCount": 3},
            "modelVersion": "stub-model",
        }
        if not stream:
            self._send_json(chunk)
        elif sse:
            self._start_events()
            self._event(chunk)
        else:  # the JSON-array form of streamGenerateContent
            self._send_json([chunk])


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests: list[StubRequest] = []
        self.held = threading.Event()  # a held request arrived
        self.release = threading.Event()  # answer the held requests
        self._tool_prompts: set[str] = set()
        self._replies = itertools.count(1)

    def message_id(self) -> str:
        """A fresh id for each reply, as a real model gives (agents that count messages by id count each once)."""
        return f"msg_stub_{next(self._replies)}"

    def first_tool_call(self, prompt: str) -> bool:
        """True the first time a ``TOOL`` prompt asks (one tool call per prompt; Claude Code keeps the prompt as
        the last text of the request after the tool's result, so the request alone cannot tell)."""
        with self.lock:
            first = prompt not in self._tool_prompts
            self._tool_prompts.add(prompt)
            return first

    def record(self, request: StubRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # agents drop connections when they are ended; that is not a failure of the stub


class LLMStub:
    """The stub on an ephemeral port of 127.0.0.1, served by a thread until ``close``."""

    def __init__(self) -> None:
        self._server = _Server()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def requests(self) -> list[StubRequest]:
        with self._server.lock:
            return list(self._server.requests)

    def model_requests(self) -> list[StubRequest]:
        """The requests that asked for a model answer (not token counts or listings)."""
        return [
            r for r in self.requests if r.method == "POST" and (r.path.split("?")[0].endswith(("/messages", "Content")))
        ]

    @property
    def held(self) -> threading.Event:
        """Set once a request of a prompt starting with ``HOLD`` has arrived (and is being held)."""
        return self._server.held

    @property
    def release(self) -> threading.Event:
        """Set it to answer the held requests."""
        return self._server.release

    def close(self) -> None:
        self._server.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> LLMStub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
