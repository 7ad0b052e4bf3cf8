"""What the proxy holds and keeps of a conversation is bounded, whatever the agent sends: a 100 MB message, 10^5
chunks in one turn, bytes that are not UTF-8, NUL characters, a store that is locked while turns go on. Each
gives a bounded, correct record - never a traceback, never memory that grows with the input."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import msgspec

from registry.limits import MAX_STORED_MESSAGE_BYTES, MAX_TURN_MESSAGES
from registry.proxy.capture import Capture
from registry.service import SessionRegistry
from tests.proxy_wire import ROOT, prompt, proxy_command, write_locked
from tests.test_proxy_faults import proxied_on_sqlite
from tests.waiting import wait_until


class RawClient:
    """A client that reads the proxy's stdout as bytes and keeps only the answers: an agent's flood is read and
    dropped, and a line that is not UTF-8 (relayed as the agent wrote it) does not stop it."""

    def __init__(self, url: str, *agent_args: str) -> None:
        self.proc = subprocess.Popen(
            proxy_command(url, *agent_args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        self.answers: dict[Any, Any] = {}
        self.lines = 0
        self.stderr = b""
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines += 1
                if b'"method"' not in line[:64]:  # an answer (the scripted agent's lines begin with their method)
                    answer = json.loads(line.decode("utf-8", "replace"))
                    self.answers[answer["id"]] = answer
                    self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def result(self, request_id: int, method: str, params: Any, timeout: float = 120.0) -> Any:
        assert self.proc.stdin is not None
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        with self._cond:
            assert self._cond.wait_for(lambda: request_id in self.answers, timeout), f"no answer to {method}"
            answer = self.answers.pop(request_id)
        assert "result" in answer, answer
        return answer["result"]

    def peak_rss(self) -> int:
        """The proxy process's peak resident memory so far, in bytes."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(60)
        assert b"Traceback" not in self.stderr, self.stderr.decode(errors="replace")
        return code


def _session(client: RawClient, cwd: Path) -> str:
    client.result(0, "initialize", {"protocolVersion": 1})
    return str(client.result(1, "session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"])


def _lines(url: str, session: str) -> list[tuple[str, str]]:
    with SessionRegistry.open(url) as registry:
        return [(line.role, line.text) for line in registry.transcript(f"scripted-agent:{session}").lines()]


def test_a_100_mb_message_is_kept_cut_and_the_proxy_holds_a_bounded_amount(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"
    client = RawClient(url)
    session = _session(client, tmp_path)
    client.result(2, "session/prompt", prompt(session, "hello"))
    before = client.peak_rss()
    size = 1 << 20
    assert client.result(3, "session/prompt", prompt(session, f"flood 100 {size}")) == {"stopReason": "end_turn"}
    grown = client.peak_rss() - before
    assert client.close() == 0
    (said, answer) = _lines(url, session)[2:]
    assert said == ("user", f"flood 100 {size}")
    role, text = answer
    kept = text.partition("\n[... cut: ")[0]
    assert (
        role == "agent" and set(kept) == {"x"} and MAX_STORED_MESSAGE_BYTES - 64 <= len(kept) < MAX_STORED_MESSAGE_BYTES
    )
    assert text == f"{kept}\n[... cut: {100 * size - len(kept):,} more bytes]"  # how much more: all of it counted
    assert grown < 64 << 20, f"the proxy grew by {grown >> 20} MiB relaying 100 MiB"


def test_ten_to_the_fifth_chunks_in_one_turn_are_bounded(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"
    client = RawClient(url)
    session = _session(client, tmp_path)
    client.result(2, "session/prompt", prompt(session, "flood 100000 8"))  # one message of 10^5 chunks
    client.result(3, "session/prompt", prompt(session, "alternate 100000"))  # 10^5 messages
    assert client.close() == 0
    lines = _lines(url, session)
    assert lines[:2] == [("user", "flood 100000 8"), ("agent", "x" * 800_000)]
    turn = lines[2:]
    assert len(turn) == MAX_TURN_MESSAGES and turn[0] == ("user", "alternate 100000")
    assert [role for role, _ in turn[1:5]] == ["agent", "thought", "agent", "thought"]
    assert [text for _, text in turn[1:4]] == ["c0", "c1", "c2"]
    left_out = 100_000 - (MAX_TURN_MESSAGES - 1)
    assert turn[-1][1].endswith(f"[... {left_out:,} more messages of this turn not kept: over the capture bound]")
    with SessionRegistry.open(url) as registry:
        state = registry.state(f"scripted-agent:{session}")
        assert state is not None and state.messages == 4  # the count is the turns', as before


def test_bytes_that_are_not_utf8_and_nul_characters_are_kept_readable(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/sessions.db"
    client = RawClient(url)
    session = _session(client, tmp_path)
    client.result(2, "session/prompt", prompt(session, "badutf8"))
    client.result(3, "session/prompt", prompt(session, "nul"))
    client.result(4, "session/prompt", prompt(session, "after \u0000 in a prompt"))
    assert client.close() == 0
    assert _lines(url, session) == [
        ("user", "badutf8"),
        ("agent", "bad \ufffd\ufffd bytes"),
        ("user", "nul"),
        ("agent", "before\ufffdafter"),
        ("user", "after \ufffd in a prompt"),
        ("agent", "after \ufffd in a prompt"),
    ]


def _update(session: str, update: dict[str, Any]) -> list[msgspec.Raw]:
    return [msgspec.Raw(msgspec.json.encode({"sessionId": session, "update": update}))]


def test_what_waits_for_the_store_is_bounded_in_bytes_oldest_text_first() -> None:
    """The capture itself, as the proxy uses it, with a small budget: turns that end while the recorder cannot
    write them wait, and beyond the budget the oldest waiting turns lose their text (not their usage) - the account
    never goes over (but for the marks that begin and end turns, a few bytes each, which are always kept)."""
    budget = 400_000
    slack = 8 * 2 * 128
    capture = Capture(budget=budget)
    try:
        taken = []
        for n in range(8):
            capture.prompt("s", [{"type": "text", "text": f"turn {n}"}])
            for _ in range(10):
                chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "y" * 10_000}}
                capture.updates(_update("s", chunk))
                assert capture.held <= budget + slack
            cost = {"sessionUpdate": "usage_update", "used": n, "size": 10, "cost": {"amount": n, "currency": "USD"}}
            capture.updates(_update("s", cost))
            taken.append(capture.answered("s", msgspec.Raw(b'{"stopReason":"end_turn"}')))
            assert capture.held <= budget + slack
            # its thread reads a flood as it comes (else updates are refused)
            wait_until(lambda: capture.unread < budget // 8, 30, "the capture's thread to read the flood")
        saids = [take() for take in taken]  # the recorder gets to them, in order
        assert capture.held == 0
    finally:
        capture.close()
    assert all(said is not None for said in saids)
    texts = [[m.text for m in said.messages] for said in saids if said is not None]
    assert texts[0] == [] and texts[-1] == ["turn 7", "y" * 100_000]  # the oldest let go, the latest whole
    kept = [n for n, said in enumerate(texts) if said]
    assert kept == list(range(kept[0], 8))  # let go oldest first
    assert [said.reading.cost for said in saids if said is not None] == [("USD", n * 10**9) for n in range(8)]
    assert capture.dropped > 0


def test_turns_while_the_store_is_locked_are_written_in_order_when_it_is_back(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with proxied_on_sqlite(path, tmp_path) as (registry, client, session):
        with write_locked(path):
            for n in range(3):
                client.result(3 + n, "session/prompt", prompt(session, f"rich locked{n}"))
            assert client.proxy.surface.capture.held > 0 or client.proxy.recorder.degraded is not None
        wait_until(lambda: registry.search("locked2").hits, 30, "the turns to be written after the store came back")
        assert client.end() == 0
    users = [text for role, text in _lines(f"sqlite://{path}", session) if role == "user"]
    assert users == ["rich locked0", "rich locked1", "rich locked2"]
