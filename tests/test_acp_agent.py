"""`acp-registry serve` end to end: real processes, driven by the official ACP client (and raw bytes)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from acp import RequestError, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.interfaces import Client
from acp.schema import SessionInfoUpdate

from registry.commands import prompt_title
from tests.waiting import async_wait_until, next_millisecond

ROOT = Path(__file__).resolve().parent.parent


def serve_command(url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "registry.cli", "serve", "--store", url, *extra]


class RecordingClient:
    """An ACP client that keeps every session/update it receives and lets a test wait for one."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.extensions: list[tuple[str, dict[str, Any]]] = []
        self._changed = asyncio.Condition()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        async with self._changed:
            self.updates.append((session_id, update))
            self._changed.notify_all()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        async with self._changed:
            self.extensions.append((method, params))
            self._changed.notify_all()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")

    def on_connect(self, conn: Any) -> None:
        pass

    def info_updates(self, session_id: str) -> list[SessionInfoUpdate]:
        return [u for s, u in self.updates if s == session_id and isinstance(u, SessionInfoUpdate)]

    async def wait_for(self, check: Callable[[RecordingClient], bool], timeout: float = 10) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: check(self)), timeout)


@asynccontextmanager
async def agent(url: str, *extra: str) -> AsyncIterator[tuple[ClientSideConnection, RecordingClient]]:
    client = RecordingClient()
    command = serve_command(url, *extra)
    async with spawn_agent_process(cast(Client, client), command[0], *command[1:], cwd=ROOT) as (conn, _process):
        await conn.initialize(protocol_version=1)
        yield conn, client


async def _lists(conn: ClientSideConnection, session_id: str, listed: bool = True) -> bool:
    """Whether the server behind ``conn`` lists ``session_id`` (or, with ``listed=False``, does not)."""
    return (session_id in await _walk(conn)) == listed


def _cleared(update: SessionInfoUpdate) -> bool:
    """A title sent as null: the SDK keeps that apart from "unchanged" only in ``model_fields_set``."""
    return update.title is None and "title" in update.model_fields_set


async def _walk(conn: ClientSideConnection, cwd: str | None = None) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = await conn.list_sessions(cwd=cwd, cursor=cursor)
        seen += [s.session_id for s in page.sessions]
        if page.next_cursor is None:
            return seen
        assert page.sessions, "an empty page with a nextCursor"
        cursor = page.next_cursor


async def _raw_request(conn: ClientSideConnection, method: str, params: dict[str, Any]) -> Any:
    # The SDK 0.12 client has no method for session/delete or our extension; send the request as it is.
    return await conn._conn.send_request(method, params)


def test_capabilities(tmp_path: Path) -> None:
    async def main() -> None:
        client = RecordingClient()
        command = serve_command(f"sqlite://{tmp_path}/log.db")
        async with spawn_agent_process(cast(Client, client), command[0], *command[1:], cwd=ROOT) as (conn, _):
            answer = await conn.initialize(protocol_version=1)
        assert answer.protocol_version == 1
        caps = answer.agent_capabilities
        assert caps is not None and caps.load_session
        session_caps = caps.session_capabilities
        assert session_caps is not None
        for name in ("list", "delete", "additional_directories", "resume", "close"):
            assert getattr(session_caps, name) is not None, name
        assert answer.agent_info is not None and answer.agent_info.name == "acp-session-registry"

    asyncio.run(main())


def test_sessions_pages_filters_errors_and_delete(tmp_path: Path) -> None:
    async def main() -> None:
        async with agent(f"sqlite://{tmp_path}/log.db", "--page-size", "3") as (conn, _client):
            made: dict[str, list[str]] = {"/work/a": [], "/work/b": [], "/work/c": []}
            for n in range(8):
                cwd = list(made)[n % 3]
                made[cwd].append((await conn.new_session(cwd=cwd + "/", mcp_servers=[])).session_id)
                next_millisecond()  # each in its own millisecond: the list orders ties by id, not by creation
            everything = await _walk(conn)
            assert sorted(everything) == sorted(s for ids in made.values() for s in ids)
            assert everything == list(reversed([s for n in range(8) for s in [made[list(made)[n % 3]][n // 3]]]))
            assert await _walk(conn, "/work/b") == list(reversed(made["/work/b"]))

            with pytest.raises(RequestError) as caught:
                await conn.list_sessions(cwd="work/a")
            assert caught.value.code == -32602 and "absolute" in str(caught.value)
            with pytest.raises(RequestError) as caught:
                await conn.new_session(cwd="relative", mcp_servers=[])
            assert caught.value.code == -32602
            first = await conn.list_sessions()
            assert first.next_cursor is not None
            for bad, reason in [("garbage!", "garbled"), (first.next_cursor[:-5], "truncated")]:
                with pytest.raises(RequestError) as caught:
                    await conn.list_sessions(cursor=bad)
                assert caught.value.code == -32602 and caught.value.data == {"field": "cursor", "reason": reason}
            with pytest.raises(RequestError) as caught:
                await conn.list_sessions(cwd="/work/a", cursor=first.next_cursor)
            assert caught.value.data == {"field": "cursor", "reason": "cwd"}

            doomed = made["/work/a"][0]
            assert await _raw_request(conn, "session/delete", {"sessionId": doomed}) == {}
            assert await _raw_request(conn, "session/delete", {"sessionId": doomed}) == {}
            assert doomed not in await _walk(conn)
            with pytest.raises(RequestError) as caught:
                await conn.prompt(session_id=doomed, prompt=[text_block("hello?")])
            assert caught.value.code == -32002

    asyncio.run(main())


def test_prompts_titles_renames_and_load(tmp_path: Path) -> None:
    async def main() -> None:
        async with agent(f"sqlite://{tmp_path}/log.db") as (conn, client):
            sid = (await conn.new_session(cwd="/work/app", mcp_servers=[])).session_id
            text = "Fix the login form\nIt crashes on submit"
            answer = await conn.prompt(session_id=sid, prompt=[text_block(text)])
            assert answer.stop_reason == "end_turn"
            echoed = "".join(
                u.content.text for s, u in client.updates if getattr(u, "session_update", "") == "agent_message_chunk"
            )
            assert echoed == "Fix the login form\nIt crashes on submit"
            # The prompt-title rule every way in shares (an imported session's first prompt gets the same title).
            titled = "Fix the login form It crashes on submit"
            await client.wait_for(lambda c: any(u.title == titled for u in c.info_updates(sid)))
            assert (await conn.list_sessions()).sessions[0].title == titled == prompt_title(text)

            await _raw_request(conn, "_registry/rename", {"sessionId": sid, "title": "Login bug"})
            await client.wait_for(lambda c: c.info_updates(sid)[-1].title == "Login bug")
            await conn.prompt(session_id=sid, prompt=[text_block("/rename Auth: login form")])
            await client.wait_for(lambda c: any(u.title == "Auth: login form" for u in c.info_updates(sid)))
            await _raw_request(conn, "_registry/rename", {"sessionId": sid, "title": None})
            await client.wait_for(lambda c: _cleared(c.info_updates(sid)[-1]))
            cleared = client.info_updates(sid)[-1]
            assert cleared.title is None and "title" in cleared.model_fields_set  # null, not "unchanged"

            other = (await conn.new_session(cwd="/work/app", mcp_servers=[])).session_id
            await _raw_request(conn, "_registry/rename", {"sessionId": other, "title": "Mine"})
            await conn.prompt(session_id=other, prompt=[text_block("would be the generated title")])
            sessions = {s.session_id: s for s in (await conn.list_sessions()).sessions}
            assert sessions[other].title == "Mine"  # a user title sticks

            before = len(client.updates)
            assert (await conn.load_session(session_id=sid, cwd="/work/app", mcp_servers=[])) is not None
            replay = [getattr(u, "session_update", "") for s, u in client.updates[before:] if s == sid]
            assert replay[:2] == ["user_message_chunk", "agent_message_chunk"]
            assert replay.count("user_message_chunk") == 2  # both turns
            with pytest.raises(RequestError) as caught:
                await conn.load_session(session_id="nope", cwd="/work/app", mcp_servers=[])
            assert caught.value.code == -32002

    asyncio.run(main())


def test_restart_gives_the_same_list(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"

    async def run() -> tuple[list[Any], list[Any]]:
        async with agent(url) as (conn, _):
            for n in range(3):
                await conn.new_session(cwd=f"/work/{n}", mcp_servers=[])
            page = await conn.list_sessions()
        async with agent(url) as (conn, _):
            again = await conn.list_sessions()
        return [s.model_dump() for s in page.sessions], [s.model_dump() for s in again.sessions]

    before, after = asyncio.run(run())
    assert before == after and len(before) == 3


def test_two_servers_on_one_store_see_each_other(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"

    async def main() -> None:
        async with agent(url) as (one, _), agent(url) as (two, watcher):
            sid = (await one.new_session(cwd="/work/shared", mcp_servers=[])).session_id
            await async_wait_until(lambda: _lists(two, sid), 30, "the other server to list the session")
            await _raw_request(one, "_registry/rename", {"sessionId": sid, "title": "Renamed over there"})
            await watcher.wait_for(lambda c: any(u.title == "Renamed over there" for u in c.info_updates(sid)))
            await _raw_request(one, "session/delete", {"sessionId": sid})
            await async_wait_until(lambda: _lists(two, sid, False), 30, "the other server to drop the session")

    asyncio.run(main())


def _exchange(url: str, lines: Sequence[bytes], timeout: float = 30) -> tuple[list[dict[str, Any]], bytes, int]:
    """Write raw lines to a server, close stdin, and return what it wrote (parsed), its stderr and exit code."""
    done = subprocess.run(
        serve_command(url),
        input=b"".join(line + b"\n" for line in lines),
        check=False,
        capture_output=True,
        cwd=ROOT,
        timeout=timeout,
    )
    return [msgspec.json.decode(line) for line in done.stdout.splitlines()], done.stderr, done.returncode


def _request(request_id: int, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return msgspec.json.encode(message)


def test_the_raw_wire(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    out, stderr, code = _exchange(
        url,
        [
            _request(1, "initialize", {"protocolVersion": 1}),
            _request(2, "session/new", {"cwd": "/work/x", "mcpServers": [], "sessionId": "ignored"}),
        ],
    )
    assert code == 0 and b"Traceback" not in stderr
    sid = out[1]["result"]["sessionId"]
    done = subprocess.Popen(serve_command(url), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert done.stdin is not None and done.stdout is not None
    for line in [
        _request(1, "initialize", {"protocolVersion": 1}),
        b"{this is not json",
        b'["a", "batch"]',
        b'{"jsonrpc": "2.0", "id": 9}',
        _request(3, "no/such/method", {}),
        _request(4, "session/prompt", {"sessionId": "ghost", "prompt": [{"type": "text", "text": "hi"}]}),
        _request(5, "session/new", {"cwd": 42}),
        _request(6, "session/list", None),
        _request(7, "_registry/rename", {"sessionId": sid, "title": "Named"}),
        _request(8, "_registry/rename", {"sessionId": sid, "title": None}),
    ]:
        done.stdin.write(line + b"\n")
        done.stdin.flush()
    lines: list[bytes] = []
    while not any(b'"title":null' in line for line in lines):
        line = done.stdout.readline()
        assert line, "the server ended before sending the clear"
        lines.append(line)
    done.stdin.close()
    assert done.wait(30) == 0
    decoded = [msgspec.json.decode(line) for line in lines]
    batches = [m for m in decoded if isinstance(m, list)]  # a refused batch: an array with an error per member
    assert [[(e["id"], e["error"]["code"]) for e in batch] for batch in batches] == [[(None, -32600)] * 2]
    messages = [m for m in decoded if isinstance(m, dict)]
    errors = {m.get("id"): m["error"]["code"] for m in messages if "error" in m}
    assert [m["error"]["code"] for m in messages if "error" in m and m["id"] is None] == [-32700]
    assert errors[9] == -32600  # no method: invalid, answered with its id
    assert errors[3] == -32601 and errors[4] == -32002 and errors[5] == -32602
    assert next(m for m in messages if m.get("id") == 6)["result"]["sessions"][0]["sessionId"] == sid
    clear = next(line for line in lines if b'"title":null' in line)
    assert clear.startswith(b'{"jsonrpc":"2.0","method":"session/update"')
    assert msgspec.json.decode(clear)["params"]["update"]["sessionUpdate"] == "session_info_update"


def test_eof_is_a_clean_exit_and_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"
    out, stderr, code = _exchange(
        url,
        [_request(1, "initialize", {"protocolVersion": 1})]
        + [_request(n, "session/new", {"cwd": f"/w/{n}", "mcpServers": []}) for n in range(2, 12)],
    )
    assert code == 0 and stderr == f"acp-registry: created a new store at {tmp_path}/log.db\n".encode()
    assert all("result" in m for m in out)
    out, _, _ = _exchange(url, [_request(1, "session/list", {})])
    assert len(out[0]["result"]["sessions"]) == 10


def test_the_sdk_example_agent(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/log.db"

    async def main() -> None:
        client = RecordingClient()
        example = str(ROOT / "examples" / "sdk_agent.py")
        async with spawn_agent_process(cast(Client, client), sys.executable, example, url, cwd=ROOT) as (conn, _):
            answer = await conn.initialize(protocol_version=1)
            # the adapter advertises what the method table answers for it; the agent itself says nothing of it
            caps = answer.agent_capabilities
            assert caps is not None and caps.session_capabilities is not None
            assert caps.session_capabilities.list is not None and caps.session_capabilities.delete is not None
            sid = (await conn.new_session(cwd="/work/sdk", mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("Write the docs")])
            await client.wait_for(lambda c: any(u.title == "Write the docs" for u in c.info_updates(sid)))
            for bad in ({"title": "no id"}, {"sessionId": sid, "title": 5}):
                with pytest.raises(RequestError) as caught:
                    await conn.ext_method("registry/rename", bad)
                assert caught.value.code == -32602  # not an internal error
            await conn.ext_method("registry/rename", {"sessionId": sid, "title": None})
            await client.wait_for(lambda c: _cleared(c.info_updates(sid)[-1]))
            assert client.info_updates(sid)[-1].title is None
            page = await conn.list_sessions(cwd="/work/sdk/")
            assert [s.session_id for s in page.sessions] == [sid]
            with pytest.raises(RequestError) as caught:
                await conn.list_sessions(cursor="tampered")
            assert caught.value.code == -32602
            with pytest.raises(RequestError) as caught:  # the table's struct checks it, in serve's words
                await _raw_request(conn, "session/delete", {"sessionId": 5})
            assert (caught.value.code, str(caught.value)) == (
                -32602,
                "sessionId must be a non-empty string, not a number",
            )
            assert caught.value.data == {"field": "sessionId"}
            assert await _raw_request(conn, "session/delete", {"sessionId": sid}) == {}
            assert (await conn.list_sessions()).sessions == []

    asyncio.run(main())
