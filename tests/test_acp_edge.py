"""The JSON-RPC edge of `acp-registry serve` under hostile lines: a real process fed raw bytes.

Whatever a line holds - any depth, any size, any bytes - it gets one JSON-RPC error carrying the request's id
when that can be read (or nothing, for a valid notification), and the next request is answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from registry.limits import (
    MAX_DIRECTORIES,
    MAX_MESSAGE_BYTES,
    MAX_MESSAGE_DEPTH,
    MAX_PATH_BYTES,
    MAX_STORED_MESSAGE_BYTES,
)
from registry.service import SessionRegistry
from tests.acp_wire import WireServer, request


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireServer]:
    """One server for the module (each test makes sessions of its own): every hostile line is survived."""
    with WireServer(f"sqlite://{tmp_path_factory.mktemp('edge')}/log.db") as running:
        assert "result" in running.call(0, "initialize", {"protocolVersion": 1})
        yield running
    assert b"Traceback" not in running.stderr, bytes(running.stderr).decode(errors="replace")


def _error(server: WireServer, line: bytes, request_id: Any) -> dict[str, Any]:
    server.send(line)
    answer, _ = server.response(request_id)
    assert "error" in answer, answer
    error: dict[str, Any] = answer["error"]
    return error


def _still_serving(server: WireServer) -> None:
    assert server.call("alive?", "session/list", {})["result"]["sessions"] is not None


def _nested(depth: int) -> bytes:
    """A JSON value of ``depth`` nested arrays."""
    return b"[" * depth + b"]" * depth


_cwds: dict[str, str] = {}


def _new_session(server: WireServer, request_id: Any = "new") -> str:
    """A session in a cwd of its own, so a test can look at just its sessions on the shared server."""
    cwd = f"/work/t{len(_cwds)}"
    session_id: str = server.call(request_id, "session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    _cwds[session_id] = cwd
    return session_id


def _session(server: WireServer, session_id: str) -> dict[str, Any]:
    (session,) = server.call("list", "session/list", {"cwd": _cwds[session_id]})["result"]["sessions"]
    assert session["sessionId"] == session_id
    return session  # type: ignore[no-any-return]


def _total(server: WireServer) -> int:
    """How many sessions the store holds, every page walked."""
    count, cursor = 0, None
    while True:
        page = server.call("walk", "session/list", {} if cursor is None else {"cursor": cursor})["result"]
        count += len(page["sessions"])
        cursor = page.get("nextCursor")
        if cursor is None:
            return count


# -- 1. one line never kills the server ----------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_MESSAGE_DEPTH - 1, 1_000, 100_000])
def test_deep_nesting_is_an_invalid_request_with_its_id(server: WireServer, depth: int) -> None:
    line = b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"_meta":' + _nested(depth) + b"}}"
    error = _error(server, line, 1)
    assert error["code"] == -32600 and f"deeper than {MAX_MESSAGE_DEPTH}" in error["message"]
    _still_serving(server)


def test_nesting_up_to_the_limit_is_read(server: WireServer) -> None:
    # The message is level 1, params level 2, _meta level 3: the limit leaves MAX - 2 levels for _meta.
    fits = b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"_meta":' + _nested(MAX_MESSAGE_DEPTH - 2)
    server.send(fits + b"}}")
    assert "result" in server.response(2)[0]
    server.send(
        b'{"jsonrpc":"2.0","id":3,"method":"session/list","params":{"_meta":'
        + _nested(MAX_MESSAGE_DEPTH - 2)
        + b',"k":"[[[["}}'
    )
    assert "result" in server.response(3)[0]  # brackets inside strings are text, not nesting


def test_a_deep_notification_is_answered_once_without_an_id(server: WireServer) -> None:
    server.send(b'{"jsonrpc":"2.0","method":"session/cancel","params":' + _nested(5_000) + b"}")
    server.send(request("after", "session/list", {}))
    answer, before = server.response("after")
    assert "result" in answer
    assert [m["error"]["code"] for m in before if "error" in m and m["id"] is None] == [-32600]


def test_an_over_long_line_is_refused_and_the_next_is_read(server: WireServer) -> None:
    baseline, sessions = server.rss_kib(), _total(server)
    filler = b"x" * (MAX_MESSAGE_BYTES + 1024)
    for n in range(3):
        line = b'{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/w","pad":"' % n + filler + b'"}}'
        error = _error(server, line, n)
        assert error["code"] == -32600 and f"at most {MAX_MESSAGE_BYTES}" in error["message"]
        _still_serving(server)
    assert _total(server) == sessions  # nothing of the refused lines was written
    assert server.rss_kib() - baseline < 64 * 1024  # the line was never held whole (it is 8 MiB, three times)


def test_a_line_at_the_size_limit_is_read(server: WireServer) -> None:
    head = b'{"jsonrpc":"2.0","id":"big","method":"session/list","params":{"pad":"'
    line = head + b"y" * (MAX_MESSAGE_BYTES - len(head) - 3) + b'"}}'
    assert len(line) == MAX_MESSAGE_BYTES
    server.send(line)
    assert "result" in server.response("big")[0]


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"cwd":"/w\xff\xfe"}}',  # invalid UTF-8
        b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"cwd":"\\ud800"}}',  # a lone surrogate
        b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"cwd":"/a"}}\x00',  # a NUL after it
        b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":{',  # cut short
        b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"n":1e999}}',  # a number out of range
    ],
)
def test_undecodable_lines_are_parse_errors_that_keep_a_readable_id(server: WireServer, line: bytes) -> None:
    error = _error(server, line, 4)
    assert error["code"] == -32700
    _still_serving(server)


def test_garbage_gets_a_parse_error_without_an_id(server: WireServer) -> None:
    for line in [b"{this is not json", b"\xff\xfe\x00\x01", b'"id": 5', b"\x00" * 100]:
        server.send(line)
        server.send(request("after", "session/list", {}))
        answer, before = server.response("after")
        assert "result" in answer
        assert [(m["id"], m["error"]["code"]) for m in before if "error" in m] == [(None, -32700)], line


# -- 3. invalid requests keep their id -------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":""}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', 7),
        (b'{"jsonrpc":"2.0","id":"seven","method":null}', "seven"),
        (b'{"jsonrpc":"2.0","id":7}', 7),
        (b'{"id":7,"method":"session/list"}', 7),
        (b'{"jsonrpc":"1.0","id":7,"method":"session/list"}', 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":5}', 7),
        (b'{"jsonrpc":"2.0","id":7.5,"method":""}', 7.5),
        (b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":""}', 123456789012345678901234567890),
    ],
)
def test_invalid_requests_are_answered_with_their_id(server: WireServer, line: bytes, request_id: Any) -> None:
    error = _error(server, line, request_id)
    assert error["code"] == -32600
    _still_serving(server)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":[7],"method":"session/list"}',
        b'{"jsonrpc":"2.0","id":{"n":7},"method":"session/list"}',
        b'{"jsonrpc":"2.0","id":true,"method":"session/list"}',
        b'{"jsonrpc":"2.0","method":5}',
        b'{"foo":"bar"}',
        b"[]",
        b"42",
    ],
)
def test_an_unreadable_id_is_null(server: WireServer, line: bytes) -> None:
    server.send(line)
    server.send(request("after", "session/list", {}))
    answer, before = server.response("after")
    assert "result" in answer
    assert [(m["id"], m["error"]["code"]) for m in before if "error" in m] == [(None, -32600)]


def test_a_batch_gets_one_error_per_request_in_it(server: WireServer) -> None:
    server.send(
        b'[{"jsonrpc":"2.0","id":1,"method":"session/list"},{"jsonrpc":"2.0","method":"session/cancel"},'
        b'{"jsonrpc":"2.0","id":"b","method":"session/list","params":{}}, 5]'
    )
    server.send(request("after", "session/list", {}))
    _answer, before = server.response("after")
    batches = [m for m in before if isinstance(m, list)]
    assert len(batches) == 1
    assert [(m["id"], m["error"]["code"]) for m in batches[0]] == [(1, -32600), ("b", -32600), (None, -32600)]
    assert "one message per line" in batches[0][0]["error"]["message"]
    server.send(b'[{"jsonrpc":"2.0","method":"session/cancel"}]')  # notifications only: nothing comes back
    server.send(request("again", "session/list", {}))
    assert server.response("again")[1] == []


def test_valid_notifications_and_responses_get_nothing(server: WireServer) -> None:
    for line in [
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}',
        b'{"jsonrpc":"2.0","method":"no/such/notification","params":{"a":[1,2]}}',
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":5}}',
        b'{"jsonrpc":"2.0","id":99,"result":{}}',
        b'{"jsonrpc":"2.0","id":98,"error":{"code":-32000,"message":"no"}}',
    ]:
        server.send(line)
    server.send(request("after", "session/list", {}))
    assert server.response("after")[1] == []


# -- 2. prompt content blocks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "field"),
    [
        ([{"type": "text", "text": 5}], "prompt[0].text"),
        ([{"type": "text", "text": None}], "prompt[0].text"),
        ([{"type": "text", "text": ["a"]}], "prompt[0].text"),
        ([{"type": "text", "text": {"a": 1}}], "prompt[0].text"),
        ([{"type": "text"}], "prompt[0].text"),
        ([{"type": "text", "text": "ok"}, 5], "prompt[1]"),
        ([{"type": "text", "text": "ok"}, "text"], "prompt[1]"),
        ([{"text": "no type"}], "prompt[0].type"),
        ([{"type": 3, "text": "x"}], "prompt[0].type"),
        ([{"type": "image", "data": "AAAA"}], "prompt[0].mimeType"),
        ([{"type": "audio", "mimeType": "audio/wav"}], "prompt[0].data"),
        ([{"type": "resource_link", "name": "a"}], "prompt[0].uri"),
        ([{"type": "resource", "resource": {"uri": "file:///a"}}], "prompt[0].resource"),
        ([{"type": "resource", "resource": {"uri": "file:///a", "text": 1}}], "prompt[0].resource.text"),
        ("hello", "prompt"),
        (None, "prompt"),
    ],
)
def test_bad_prompt_blocks_are_invalid_params_naming_the_field(server: WireServer, prompt: Any, field: str) -> None:
    sid = _new_session(server)
    error = _error(server, request(5, "session/prompt", {"sessionId": sid, "prompt": prompt}), 5)
    assert error["code"] == -32602 and field in error["message"], error
    assert error.get("data", {}).get("field") == field
    assert _session(server, sid)["_meta"]["acp-session-registry/messageCount"] == 0  # nothing written


def test_every_acp_block_is_read_and_unknown_types_are_ignored(server: WireServer) -> None:
    sid = _new_session(server)
    prompt = [
        {"type": "text", "text": "Look at ", "annotations": {"priority": 1}, "_meta": {"k": 1}},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        {"type": "resource_link", "name": "main.py", "uri": "file:///w/main.py", "size": 10},
        {"type": "resource", "resource": {"uri": "file:///w/a.md", "text": "# A"}},
        {"type": "resource", "resource": {"uri": "file:///w/b.bin", "blob": "AAEC"}},
        {"type": "hologram", "frames": [1, 2, 3]},  # a block type from a future ACP: ignored
        {"type": "text", "text": "this", "annotations": "not an object"},  # a bad optional field: dropped
    ]
    server.send(request(6, "session/prompt", {"sessionId": sid, "prompt": prompt}))
    answer, before = server.response(6)
    assert answer["result"] == {"stopReason": "end_turn"}
    echoed = "".join(
        m["params"]["update"]["content"]["text"]
        for m in before
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    assert echoed == "Look at this"
    server.send(request(7, "session/load", {"sessionId": sid, "cwd": _cwds[sid], "mcpServers": []}))
    _, replay = server.response(7)
    replayed = [
        m["params"]["update"]["content"]
        for m in replay
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]
    # Replayed from the transcript: every block the agent knows, as the conversation keeps it (media by a marker,
    # never their bytes; resources by name and URI), the unknown block left out.
    assert replayed == [
        {
            "type": "text",
            "text": "Look at [image: image/png] [audio: audio/wav] [resource: main.py <file:///w/main.py>] "
            "[resource: a.md <file:///w/a.md>] [resource: b.bin <file:///w/b.bin>] this",
        }
    ]


# -- 4. size limits at the edge ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cwd": "/" + "a" * MAX_PATH_BYTES}, "cwd"),
        ({"cwd": "/" + "\u00e9" * (MAX_PATH_BYTES // 2 + 1)}, "cwd"),  # 2 bytes a character: bytes are counted
        ({"cwd": "/w", "additionalDirectories": ["/ok", "/" + "b" * MAX_PATH_BYTES]}, "additionalDirectories[1]"),
        (
            {"cwd": "/w", "additionalDirectories": [f"/d{n}" for n in range(MAX_DIRECTORIES + 1)]},
            "additionalDirectories",
        ),
        ({"cwd": "/w", "additionalDirectories": "/not/a/list"}, "additionalDirectories"),
        ({"cwd": "/w\u0000x"}, "cwd"),
    ],
)
def test_session_new_refuses_what_breaks_a_limit(server: WireServer, params: dict[str, Any], field: str) -> None:
    sessions = _total(server)
    error = _error(server, request(8, "session/new", {"mcpServers": [], **params}), 8)
    assert error["code"] == -32602 and field in error["message"], error
    assert _total(server) == sessions


def test_paths_at_the_limit_are_stored(server: WireServer) -> None:
    longest = "/" + "a" * (MAX_PATH_BYTES - 1)
    directories = [f"/d{n}" for n in range(MAX_DIRECTORIES - 1)] + [longest]
    made = server.call(9, "session/new", {"cwd": longest, "additionalDirectories": directories, "mcpServers": []})
    sid = made["result"]["sessionId"]
    _cwds[sid] = longest
    assert _session(server, sid)["additionalDirectories"] == directories
    error = server.call(10, "session/list", {"cwd": longest + "a"})["error"]
    assert error["code"] == -32602 and "cwd" in error["message"]  # the same rule on read


def test_a_turn_over_the_stored_message_limit_is_answered_and_kept_cut(server: WireServer) -> None:
    sid = _new_session(server)
    text = "z" * (3 * 1024 * 1024)  # the prompt and its echo, each over what one stored message keeps
    server.send(request(11, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}))
    answer, before = server.response(11)
    assert answer["result"] == {"stopReason": "end_turn"}
    updates = [m["params"]["update"] for m in before if m.get("method") == "session/update"]
    echoed = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert sum(map(len, echoed)) == len(text)  # the whole echo streamed
    assert _session(server, sid)["_meta"]["acp-session-registry/messageCount"] == 2
    with SessionRegistry.open(server.url) as registry:
        kept = registry.transcript(sid).lines()
    assert [line.role for line in kept] == ["user", "agent"]
    more = len(text) - MAX_STORED_MESSAGE_BYTES
    assert all(line.text == "z" * MAX_STORED_MESSAGE_BYTES + f"\n[... cut: {more:,} more bytes]" for line in kept)


def test_a_rename_over_the_title_limit_writes_nothing(server: WireServer) -> None:
    sid = _new_session(server)
    error = server.call(12, "_registry/rename", {"sessionId": sid, "title": "t" * 501})["error"]
    assert error["code"] == -32602 and "title" in error["message"]
    error = server.call(
        13, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/rename " + "t" * 501}]}
    )["error"]
    assert error["code"] == -32602 and "title" in error["message"]
    session = _session(server, sid)
    assert "title" not in session and session["_meta"]["acp-session-registry/messageCount"] == 0


# -- 7. a turn's own updates come before its response; load of a deleted session ------------------------


def _info_updates(messages: list[Any], session_id: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if isinstance(m, dict)
        and m.get("method") == "session/update"
        and m["params"]["sessionId"] == session_id
        and m["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]


def test_a_turns_title_update_reaches_the_client_before_its_response(server: WireServer) -> None:
    for n in range(40):
        sid = _new_session(server, f"new-{n}")
        server.send(
            request(
                f"p-{n}", "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"Task {n}\nmore"}]}
            )
        )
        _, before = server.response(f"p-{n}")
        titles = [u.get("title") for u in _info_updates(before, sid) if "title" in u]
        assert titles == [f"Task {n} more"], f"run {n}: {before}"  # the whole prompt on one line (prompt_title)
        server.send(request(f"r-{n}", "_registry/rename", {"sessionId": sid, "title": f"Renamed {n}"}))
        _, before = server.response(f"r-{n}")
        assert [u.get("title") for u in _info_updates(before, sid)] == [f"Renamed {n}"], f"run {n}"


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_loading_a_deleted_session_says_it_was_deleted(server: WireServer, method: str) -> None:
    sid = _new_session(server)
    assert server.call(14, "session/delete", {"sessionId": sid})["result"] == {}
    error = server.call(15, method, {"sessionId": sid, "cwd": _cwds[sid], "mcpServers": []})["error"]
    assert error["code"] == -32002 and "was deleted" in error["message"] and "changed" not in error["message"]
    assert error["data"]["sessionId"] == sid
