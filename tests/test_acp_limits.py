"""Every size limit, at every way in but the importers: `SessionRegistry`, its `handle`, and the SDK adapter.

(`acp-registry serve` is held to the same limits on the wire in test_acp_edge.py.) A refused write raises
``InvalidParams`` - a ``ValueError`` - naming the field, and the log does not move.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from acp import RequestError, spawn_agent_process

from events.memory import MemoryStore
from registry import SessionRegistry
from registry.errors import InvalidParams, rpc_error
from registry.limits import (
    MAX_DIRECTORIES,
    MAX_META_BYTES,
    MAX_META_DEPTH,
    MAX_PATH_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_SESSION_ID_BYTES,
    MAX_TITLE_LENGTH,
)

ROOT = Path(__file__).resolve().parent.parent
LONG_PATH = "/" + "p" * MAX_PATH_BYTES  # one byte over
WIDE_PATH = "/" + "\u00e9" * (MAX_PATH_BYTES // 2)  # 4095 bytes: at the limit, in two-byte characters


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.fixture
def registry() -> Iterator[SessionRegistry]:
    with SessionRegistry(MemoryStore(), follow=False) as opened:
        opened.create("/work/app", session_id="s")
        yield opened


WRITES: list[tuple[str, Callable[[SessionRegistry], Any], str]] = [
    ("cwd over PATH_MAX", lambda r: r.create(LONG_PATH), "cwd is 4096 bytes long; at most 4095"),
    ("cwd in wide characters", lambda r: r.create(WIDE_PATH + "\u00e9"), "cwd is 4097 bytes long"),
    ("cwd with a lone surrogate", lambda r: r.create("/work/\udcff"), "cwd is not valid Unicode"),
    ("cwd with a NUL", lambda r: r.create("/work/\x00"), "cwd must not contain a NUL"),
    (
        "a long additional directory",
        lambda r: r.create("/w", additional_directories=["/a", LONG_PATH]),
        "additionalDirectories[1] is 4096 bytes long",
    ),
    (
        "too many additional directories",
        lambda r: r.create("/w", additional_directories=[f"/d{n}" for n in range(MAX_DIRECTORIES + 1)]),
        f"at most {MAX_DIRECTORIES} are allowed",
    ),
    ("a long session id", lambda r: r.create("/w", session_id="i" * (MAX_SESSION_ID_BYTES + 1)), "sessionId is"),
    ("a long title", lambda r: r.create("/w", title="t" * (MAX_TITLE_LENGTH + 1)), "title is 501 characters"),
    ("a big _meta", lambda r: r.create("/w", meta={"k": "v" * MAX_META_BYTES}), "_meta is"),
    ("a deep _meta", lambda r: r.create("/w", meta={"k": _deep(MAX_META_DEPTH)}), "_meta nests deeper"),
    ("_meta with a surrogate", lambda r: r.create("/w", meta={"k": "\ud800"}), "_meta must hold only JSON"),
    ("rename: a long title", lambda r: r.change_info("s", title="t" * 501), "title is 501 characters"),
    ("change: a big _meta", lambda r: r.change_info("s", meta={"k": "v" * MAX_META_BYTES}), "_meta is"),
    ("change: a deep _meta", lambda r: r.change_info("s", meta={"k": _deep(40)}), "_meta nests deeper"),
    (
        "activity: a big payload",
        lambda r: r.record_activity("s", payload={"turn": b"x" * MAX_PAYLOAD_BYTES}),
        "payload is",
    ),
    ("activity: a deep payload", lambda r: r.record_activity("s", payload=_deep(100_000)), "payload nests deeper"),
    ("activity: a payload of objects", lambda r: r.record_activity("s", payload=object()), "payload must be plain"),
    ("change: an integer msgpack cannot hold", lambda r: r.change_info("s", meta={"n": 2**70}), "_meta holds an"),
    ("delete: a reason of bytes", lambda r: r.delete("s", reason=cast(Any, b"why")), "reason must be a string"),
    ("delete: a long reason", lambda r: r.delete("s", reason="r" * 501), "reason is 501 characters"),
    ("get: an id that is no string", lambda r: r.get(cast(Any, {})), "sessionId must be a non-empty string"),
    ("list: a cursor that is no string", lambda r: r.list(cursor=cast(Any, 1.5)), "cursor must be a string"),
    ("list: a long cwd", lambda r: r.list(cwd=LONG_PATH), "cwd is 4096 bytes long"),
    ("handle: a long cwd", lambda r: r.handle("session/list", {"cwd": LONG_PATH}), "cwd is 4096 bytes long"),
]


@pytest.mark.parametrize(("write", "message"), [(w, m) for _, w, m in WRITES], ids=[name for name, _, _ in WRITES])
def test_a_write_over_a_limit_is_refused_and_writes_nothing(
    registry: SessionRegistry, write: Callable[[SessionRegistry], Any], message: str
) -> None:
    head = registry.store.head()
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        write(registry)
    assert isinstance(caught.value, InvalidParams) and rpc_error(caught.value).code == -32602
    assert registry.store.head() == head
    assert [s.session_id for s in registry.list().sessions] == ["s"]


def test_values_at_the_limits_are_kept(registry: SessionRegistry) -> None:
    longest = "/" + "p" * (MAX_PATH_BYTES - 1)
    info = registry.create(
        WIDE_PATH,
        session_id="i" * MAX_SESSION_ID_BYTES,
        additional_directories=[longest] * MAX_DIRECTORIES,
        title="t" * MAX_TITLE_LENGTH,
        meta={"k": _deep(MAX_META_DEPTH - 1)},
    )
    assert info.cwd == WIDE_PATH and info.additional_directories == [longest] * MAX_DIRECTORIES
    assert registry.list(cwd=WIDE_PATH).sessions == [info]


def test_the_sdk_adapter_refuses_a_long_cwd(tmp_path: Path) -> None:
    """The SDK example agent answers session/new and session/list through the registry's checks."""
    from tests.test_acp_agent import RecordingClient  # noqa: PLC0415 - the client the ACP tests share

    async def main() -> None:
        example = str(ROOT / "examples" / "sdk_agent.py")
        client = cast(Any, RecordingClient())
        async with spawn_agent_process(client, sys.executable, example, f"sqlite://{tmp_path}/log.db", cwd=ROOT) as (
            conn,
            _,
        ):
            await conn.initialize(protocol_version=1)
            for call in (
                conn.new_session(cwd=LONG_PATH, mcp_servers=[]),
                conn.list_sessions(cwd=LONG_PATH),
            ):
                with pytest.raises(RequestError) as caught:
                    await call
                assert caught.value.code == -32602 and "4096 bytes" in str(caught.value)
            assert (await conn.list_sessions()).sessions == []

    asyncio.run(main())
