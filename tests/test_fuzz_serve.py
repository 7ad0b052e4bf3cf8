"""Fuzzing a real `acp-registry serve` process with hypothesis-generated JSON-RPC lines.

Every method, every param replaced by a value of every JSON type, odd ids, huge and deep values, invalid
UTF-8, NUL bytes and lone surrogates, batches, and responses sent to the server. After each line a probe
request must be answered; every line on stdout must be JSON-RPC; no answer may be an internal error (-32603:
every bad input has its own code); the server's memory must stay bounded. Where the line is a well-formed
JSON value, an oracle written from the JSON-RPC 2.0 spec (not from the server's code) says exactly which
answer it gets: one response with the request's id, one with ``null``, or nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.acp.methods import served
from registry.limits import MAX_MESSAGE_BYTES, MAX_MESSAGE_DEPTH
from registry.session_commands import COMMANDS, wire_params
from tests.acp_wire import WireServer, request
from tests.fuzzing import fuzz_settings, json_values, texts

RSS_GROWTH_KIB = 256 * 1024  # the server may hold a line at the limit a few times over while it answers it
PROBE = "\u2603probe"

METHODS = [method.name for method in served("serve")]  # every method serve answers, read from the method table
BLOCKS: list[dict[str, Any]] = [
    {"type": "text", "text": "Fix the build"},
    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png", "uri": "file:///i.png"},
    {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
    {"type": "resource_link", "name": "a.py", "uri": "file:///a.py", "size": 3, "title": "A"},
    {"type": "resource", "resource": {"uri": "file:///b.md", "text": "# B", "mimeType": "text/markdown"}},
    {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAEC"}},
    {"type": "future_block", "anything": [1, 2]},
]


class Expect(msgspec.Struct, frozen=True):
    """What a line must get: ``ids`` - the ids of the responses in order (one line, or one batch array);
    ``batch`` - whether they come as an array; ``any`` - the line was mangled, so only the general rules hold."""

    ids: tuple[Any, ...] = ()
    batch: bool = False
    any: bool = False


def _valid_id(value: object) -> bool:
    return value is None or (isinstance(value, int | float | str) and not isinstance(value, bool))


def _answer(message: Any) -> tuple[bool, Any]:
    """JSON-RPC 2.0 for one message: (whether it is answered, with which id)."""
    if not isinstance(message, dict):
        return True, None
    if "id" in message and not _valid_id(message["id"]):
        return True, None
    request_id = message.get("id")
    if message.get("jsonrpc") != "2.0":
        return True, request_id
    if "method" not in message and ("result" in message or "error" in message):
        return False, None  # a response: never answered
    method, params = message.get("method"), message.get("params")
    if not isinstance(method, str) or not method or not (params is None or isinstance(params, dict | list)):
        return True, request_id
    return "id" in message, request_id  # a request is answered; a notification is not


def expect(message: Any) -> Expect:
    if isinstance(message, list):
        if not message:
            return Expect(ids=(None,))
        answers = [_answer(item) for item in message]
        return Expect(ids=tuple(i for yes, i in answers if yes), batch=True)
    answered, request_id = _answer(message)
    return Expect(ids=(request_id,) if answered else ())


# -- strategies --------------------------------------------------------------------------------------------


@st.composite
def _params(draw: st.DrawFn, method: str, sessions: list[str]) -> Any:
    session_id = draw(st.one_of(st.sampled_from(sessions), texts, json_values))
    templates: dict[str, dict[str, Any]] = {
        "initialize": {"protocolVersion": 1, "clientCapabilities": {}, "_meta": {"k": 1}},
        "session/new": {"cwd": "/work/fuzz", "mcpServers": [], "additionalDirectories": ["/work/extra"]},
        "session/load": {"sessionId": session_id, "cwd": "/work/fuzz", "mcpServers": []},
        "session/resume": {"sessionId": session_id, "cwd": "/work/fuzz"},
        "session/close": {"sessionId": session_id},
        "session/prompt": {"sessionId": session_id, "prompt": draw(_prompt())},
        "session/list": {"cwd": "/work/fuzz", "archived": draw(st.sampled_from(["exclude", "include", "only", "x"]))},
        "session/delete": {"sessionId": session_id},
        "session/cancel": {"sessionId": session_id},
        "_registry/rename": {"sessionId": session_id, "title": draw(st.one_of(texts, st.none()))},
        "session/set_title": {"sessionId": session_id, "title": draw(texts)},
        "session/archive": {"sessionId": session_id},
        "session/unarchive": {"sessionId": session_id},
        "session/status": {"sessionId": session_id},
        "session/fork": {"sessionId": session_id, "cwd": "/work/fuzz/fork", "mcpServers": []},
    }
    for row in COMMANDS:  # a session command without a template of its own: its params as its method types them
        if row.method not in templates:
            fields = msgspec.structs.fields(wire_params(row))[1:]
            templates[row.method] = {
                "sessionId": session_id,
                **{f.encode_name: draw(st.from_type(f.type)) for f in fields},
            }
    assert set(METHODS) <= set(templates), (
        f"a method of the table has no fuzz template: {set(METHODS) - set(templates)}"
    )
    params = dict(templates.get(method, {}))
    for key in list(params):
        action = draw(st.sampled_from(["keep", "keep", "wrong", "drop"]))
        if action == "wrong":
            params[key] = draw(json_values)
        elif action == "drop":
            del params[key]
    params.update(draw(st.dictionaries(texts, json_values, max_size=2)))
    return draw(st.one_of(st.just(params), st.just(params), json_values))


@st.composite
def _prompt(draw: st.DrawFn) -> Any:
    blocks = []
    for block in draw(st.lists(st.sampled_from(BLOCKS), max_size=3)):
        mangled = dict(block)
        if draw(st.booleans()):
            key = draw(st.sampled_from(sorted(mangled)))
            mangled[key] = draw(json_values)
        blocks.append(draw(st.one_of(st.just(mangled), st.just(mangled), json_values)))
    return draw(st.one_of(st.just(blocks), st.just(blocks), json_values))


_ids = st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), texts, st.none(), json_values)


@st.composite
def _message(draw: st.DrawFn, sessions: list[str]) -> Any:
    kind = draw(st.sampled_from(["request", "request", "request", "notification", "response", "odd"]))
    method = draw(st.one_of(st.sampled_from(METHODS), st.sampled_from(METHODS), texts, json_values))
    message: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0, None]))}
    if kind in ("request", "response", "odd"):
        message["id"] = draw(_ids)
    if kind == "response":
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
        return message
    message["method"] = method
    if draw(st.booleans()) or kind == "odd":
        message["params"] = draw(_params(method if isinstance(method, str) else "", sessions))
    if kind == "odd":
        del message[draw(st.sampled_from(sorted(message)))]
    return message


@st.composite
def lines(draw: st.DrawFn, sessions: list[str]) -> tuple[bytes, Expect]:
    """A line to send and what it must get."""
    shape = draw(st.sampled_from(["message", "message", "message", "batch", "value", "mangled", "deep", "huge"]))
    if shape == "batch":
        batch = draw(st.lists(_message(sessions), max_size=4))
        return msgspec.json.encode(batch), expect(batch)
    if shape == "value":
        value = draw(json_values)
        return msgspec.json.encode(value), expect(value)
    message = draw(_message(sessions))
    line = msgspec.json.encode(message)
    if shape == "message":
        return line, expect(message)
    if shape == "mangled":
        return draw(_mangled(line)), Expect(any=True)
    request_id = draw(st.one_of(st.integers(), texts))
    head = b'{"jsonrpc":"2.0","id":' + msgspec.json.encode(request_id) + b',"method":"session/list","params":{'
    if shape == "deep":
        depth = draw(st.sampled_from([MAX_MESSAGE_DEPTH - 2, MAX_MESSAGE_DEPTH - 1, 1_000, 100_000]))
        return head + b'"_meta":' + b"[" * depth + b"]" * depth + b"}}", Expect(ids=(request_id,))
    size = draw(st.sampled_from([1_000, 100_000, MAX_MESSAGE_BYTES + 1]))
    return head + b'"pad":"' + b"p" * size + b'"}}', Expect(ids=(request_id,))


@st.composite
def _mangled(draw: st.DrawFn, line: bytes) -> bytes:
    """The bytes of a line, broken: cut short, or with invalid UTF-8, a NUL, a lone surrogate or junk inserted."""
    at = draw(st.integers(min_value=0, max_value=len(line)))
    junk = draw(
        st.one_of(
            st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\\ud800", b'"\\udfff"', b"\n", b"}"]),
            st.binary(min_size=1, max_size=8),
        )
    )
    return draw(st.sampled_from([line[:at], line[:at] + junk + line[at:]]))


# -- the server ------------------------------------------------------------------------------------------


class _Fuzzed:
    """A running server, restarted if an example killed it (so a failure shrinks instead of cascading)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.probes = 0
        self.server = self._start()

    def _start(self) -> WireServer:
        server = WireServer(self.url)
        assert "result" in server.call("init", "initialize", {"protocolVersion": 1})
        self.sessions = [
            server.call(f"new{n}", "session/new", {"cwd": "/work/fuzz", "mcpServers": []})["result"]["sessionId"]
            for n in range(2)
        ]
        self.baseline_kib = server.rss_kib()
        return server

    def alive(self) -> WireServer:
        if self.server.process.poll() is not None:
            self.server = self._start()
        return self.server


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Fuzzed]:
    state = _Fuzzed(f"sqlite://{tmp_path_factory.mktemp('fuzz')}/log.db")
    yield state
    assert state.server.close() == 0
    assert b"Traceback" not in state.server.stderr, bytes(state.server.stderr[-4000:]).decode(errors="replace")


def _check(fuzzed: _Fuzzed, line: bytes, expected: Expect) -> None:
    server = fuzzed.alive()
    fuzzed.probes += 1
    probe = f"{PROBE}{fuzzed.probes}"
    server.send(line)
    server.send(request(probe, "session/list", {}))
    answer, before = server.response(probe)  # every line checked to be JSON-RPC on the way
    assert "result" in answer, answer
    responses: list[Any] = [m for m in before if isinstance(m, list) or "method" not in m]
    errors = [r["error"] for m in responses for r in (m if isinstance(m, list) else [m]) if "error" in r]
    assert all(e["code"] != -32603 for e in errors), errors  # an internal error is a bug: every input has a code
    assert server.rss_kib() - fuzzed.baseline_kib < RSS_GROWTH_KIB
    if expected.any:
        return
    if expected.batch:
        got = [tuple(r["id"] for r in m) for m in responses]
        assert got == ([expected.ids] if expected.ids else []), (line[:300], responses)
        return
    assert [m["id"] for m in responses] == list(expected.ids), (line[:300], responses)


@fuzz_settings(250)
@given(data=st.data())
def test_any_line_gets_its_answer_and_the_server_goes_on(fuzzed: _Fuzzed, data: st.DataObject) -> None:
    line, expected = data.draw(lines(fuzzed.sessions))
    _check(fuzzed, line, expected)


def test_the_oracle_reads_the_spec() -> None:
    """The oracle itself, on the JSON-RPC 2.0 spec's own examples (section 7)."""
    assert expect({"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}) == Expect(ids=(1,))
    assert expect({"jsonrpc": "2.0", "method": "update", "params": [1, 2, 3]}) == Expect()
    assert expect({"jsonrpc": "2.0", "method": 1, "params": "bar"}) == Expect(ids=(None,))
    assert expect([]) == Expect(ids=(None,))
    assert expect([1]) == Expect(ids=(None,), batch=True)
    assert expect([{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]) == Expect(batch=True)
    assert expect({"jsonrpc": "2.0", "id": 5, "result": 19}) == Expect()
    assert expect({"jsonrpc": "2.0", "id": True, "method": "x"}) == Expect(ids=(None,))
