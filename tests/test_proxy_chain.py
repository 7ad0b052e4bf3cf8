"""The chain link at the line level: a conductor's lines in on a real pipe, the relay's two ports out, and back.

``registry.proxy.chain.Chain`` alone, without a relay: the test plays the conductor on one side (its lines in,
what the chain writes out) and the relay on the other (a ``Recorded`` relay the two ports deliver to, and what the
test sends through them). Each published form is checked with the exact envelope shapes its conductor uses.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from registry.acp.jsonrpc import OverlongLine
from registry.limits import MAX_MESSAGE_BYTES
from registry.proxy import Proxy
from registry.proxy.chain import ENDED, NOT_A_PROXY, THINKWELL, Chain
from registry.proxy.lines import LineReader
from registry.proxy.ports import AgentEnd, Line
from registry.service import SessionRegistry

Message = dict[str, Any]
TIMEOUT = 20.0  # a deadline only: the threads here answer at once, even on a loaded machine


def _encode(message: Message) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", **message})


class Recorded:
    """A relay that keeps what each port delivers, and on which thread; unlike ``Relay`` it does not end the agent
    when the client ends (the test does, when it means to)."""

    def __init__(self) -> None:
        self.client: queue.Queue[Line | None] = queue.Queue()
        self.agent: queue.Queue[Line | None] = queue.Queue()
        self.ended: list[AgentEnd] = []
        self.threads: dict[str, set[str]] = {"client": set(), "agent": set()}

    def from_client(self, lines: Sequence[Line]) -> None:
        self.threads["client"].add(threading.current_thread().name)
        for line in lines:
            self.client.put(line)

    def client_ended(self) -> None:
        self.client.put(None)

    def from_agent(self, lines: Sequence[Line]) -> None:
        self.threads["agent"].add(threading.current_thread().name)
        for line in lines:
            self.agent.put(line)

    def agent_ended(self, end: AgentEnd) -> None:
        self.ended.append(end)
        self.agent.put(None)


class Link:
    """A started ``Chain`` between a fake conductor (pipes) and a recording relay (both ports started)."""

    def __init__(self) -> None:
        self._to_chain_r, self._to_chain_w = os.pipe()
        self._from_chain_r, self._from_chain_w = os.pipe()
        self.chain = Chain(self._to_chain_r, self._from_chain_w)
        self.relay = Recorded()
        self._written: queue.Queue[Message] = queue.Queue()
        self._drainer = threading.Thread(target=self._drain_out, daemon=True)
        self._drainer.start()
        self.chain.agent.start(self.relay)
        self.chain.client.start(self.relay)

    def _drain_out(self) -> None:
        for batch in LineReader(self._from_chain_r).batches():
            for line in batch:
                assert isinstance(line, bytes)
                self._written.put(msgspec.json.decode(line))

    # the conductor's side
    def conduct(self, *messages: Message | bytes) -> None:
        os.write(self._to_chain_w, b"".join((m if isinstance(m, bytes) else _encode(m)) + b"\n" for m in messages))

    def written(self) -> Message:
        """The next line the chain wrote to the conductor."""
        return self._written.get(timeout=TIMEOUT)

    def nothing_written(self) -> bool:
        # A marker the chain must pass through after whatever it was given before: what came first is written.
        self.chain.client.send([_encode({"method": "marker"})])
        return self.written() == {"jsonrpc": "2.0", "method": "marker"}

    def end(self) -> None:
        os.close(self._to_chain_w)

    # the relay's side
    def to_relay_client(self) -> Message | None:
        line = self.relay.client.get(timeout=TIMEOUT)
        assert not isinstance(line, OverlongLine)
        return None if line is None else msgspec.json.decode(line)

    def to_relay_agent(self) -> Message | None:
        line = self.relay.agent.get(timeout=TIMEOUT)
        assert not isinstance(line, OverlongLine)
        return None if line is None else msgspec.json.decode(line)

    def agent_stream_open(self) -> bool:
        try:
            self.relay.agent.get(timeout=0.2)
        except queue.Empty:
            return True
        return False

    def relay_to_client(self, message: Message) -> None:
        assert self.chain.client.send([_encode(message)])

    def relay_to_agent(self, message: Message) -> None:
        assert self.chain.agent.send([_encode(message)])

    def close(self) -> None:
        self.chain.agent.end()
        with contextlib.suppress(OSError):
            self.end()
        self.chain.agent.join(TIMEOUT)
        self.chain.client.join(TIMEOUT)


@pytest.fixture
def link() -> Iterator[Link]:
    link = Link()
    yield link
    link.close()


INIT = {"protocolVersion": 1, "clientInfo": {"name": "editor", "version": "1"}}


def test_thinkwell_initialize_passes_as_the_client_sent_it_and_its_answer_accepts_the_proxy_role(link: Link) -> None:
    params = {**INIT, "_meta": {"proxy": True, "other": 1}}
    link.conduct({"id": 7, "method": "initialize", "params": params})
    # The relay sees the conductor's initialize, _meta.proxy kept: a proxy after this one must learn it is one.
    assert link.to_relay_client() == {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": params}
    assert link.chain.form is THINKWELL
    link.relay_to_client({"id": 7, "result": {"protocolVersion": 1, "_meta": {"agent": "x"}}})
    assert link.written() == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"protocolVersion": 1, "_meta": {"agent": "x", "proxy": True}},
    }
    link.relay_to_client({"id": 8, "result": {"_meta": {}}})  # only initialize's answer is marked
    assert link.written() == {"jsonrpc": "2.0", "id": 8, "result": {"_meta": {}}}


@pytest.mark.parametrize("spelling", ["proxy/initialize", "_proxy/initialize"])
def test_the_rfds_proxy_initialize_reaches_the_relay_as_initialize(link: Link, spelling: str) -> None:
    link.conduct({"id": "i", "method": spelling, "params": INIT})
    assert link.to_relay_client() == {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": INIT}
    link.relay_to_client({"id": "i", "result": {"protocolVersion": 1}})
    assert link.written() == {"jsonrpc": "2.0", "id": "i", "result": {"protocolVersion": 1}}  # nothing added


@pytest.mark.parametrize(
    ("spelling", "request_method", "notification_method"),
    [
        ("thinkwell", "_proxy/successor/request", "_proxy/successor/notification"),
        ("proxy/initialize", "proxy/successor", "proxy/successor"),
        ("_proxy/initialize", "_proxy/successor", "_proxy/successor"),
    ],
)
def test_the_relays_requests_and_notifications_for_the_agent_go_in_the_forms_envelopes_under_the_chains_ids(
    link: Link, spelling: str, request_method: str, notification_method: str
) -> None:
    if spelling == "thinkwell":
        link.conduct({"id": 0, "method": "initialize", "params": {**INIT, "_meta": {"proxy": True}}})
    else:
        link.conduct({"id": 0, "method": spelling, "params": INIT})
    link.to_relay_client()
    link.relay_to_agent({"id": 1, "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}})
    link.relay_to_agent({"id": 2, "method": "session/list"})
    link.relay_to_agent({"method": "session/cancel", "params": {"sessionId": "s"}})
    first, second, cancel = link.written(), link.written(), link.written()
    assert first["method"] == second["method"] == request_method
    assert first["params"] == {"method": "session/new", "params": {"cwd": "/p", "mcpServers": []}}
    assert second["params"] == {"method": "session/list"}  # no params: none inside either
    assert cancel == {
        "jsonrpc": "2.0",
        "method": notification_method,
        "params": {"method": "session/cancel", "params": {"sessionId": "s"}},
    }
    # Answered out of order under the chain's ids; the relay gets each under its own.
    link.conduct({"id": second["id"], "result": {"sessions": []}})
    link.conduct({"id": first["id"], "error": {"code": -32000, "message": "auth"}})
    assert link.to_relay_agent() == {"jsonrpc": "2.0", "id": 2, "result": {"sessions": []}}
    assert link.to_relay_agent() == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "auth"}}


@pytest.mark.parametrize("envelope", ["_proxy/successor/request", "proxy/successor", "_proxy/successor"])
def test_the_successors_request_reaches_the_client_under_a_chain_id_and_its_answer_goes_back_under_the_envelopes(
    link: Link, envelope: str
) -> None:
    link.conduct({"id": 0, "method": "initialize", "params": {"_meta": {"proxy": True}}})
    link.to_relay_client()
    link.relay_to_agent({"id": 1, "method": "session/new", "params": {}})
    ours = link.written()["id"]
    asked = {"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": []}
    # The conductor's envelope ids come from its own counter, and may equal ids the chain uses.
    link.conduct({"id": ours, "method": envelope, "params": {"method": "session/request_permission", "params": asked}})
    request = link.to_relay_agent()
    assert request == {"jsonrpc": "2.0", "id": ours, "method": "session/request_permission", "params": asked}
    link.relay_to_client(request)  # the relay passes the agent's request on as it is
    relayed = link.written()
    assert relayed["method"] == "session/request_permission" and relayed["params"] == asked
    assert relayed["id"] != ours
    link.conduct({"id": relayed["id"], "result": {"outcome": {"outcome": "cancelled"}}})
    answer = link.to_relay_client()
    assert answer == {"jsonrpc": "2.0", "id": ours, "result": {"outcome": {"outcome": "cancelled"}}}
    assert answer is not None
    link.relay_to_agent(answer)  # the relay passes the client's answer on as it is: to the envelope, unwrapped
    assert link.written() == answer
    link.conduct({"id": ours, "result": {"sessionId": "s"}})  # the conductor answers our own envelope too
    assert link.to_relay_agent() == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}}


@pytest.mark.parametrize("envelope", ["_proxy/successor/notification", "proxy/successor", "_proxy/successor"])
def test_the_successors_notifications_reach_the_relay_unwrapped(link: Link, envelope: str) -> None:
    update = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}}
    link.conduct({"id": 0, "method": "proxy/initialize", "params": {}})
    link.to_relay_client()
    link.conduct({"method": envelope, "params": {"method": "session/update", "params": update, "_meta": {"hop": 1}}})
    assert link.to_relay_agent() == {"jsonrpc": "2.0", "method": "session/update", "params": update}


def test_a_plain_initialize_is_refused_there_is_no_agent_without_a_command(link: Link) -> None:
    link.conduct({"id": 1, "method": "initialize", "params": INIT}, {"id": 2, "method": "session/new", "params": {}})
    assert link.written() == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": NOT_A_PROXY}}
    assert link.to_relay_client() is None  # the client's side ends: the relay stops
    assert link.chain.refused == NOT_A_PROXY
    assert link.nothing_written()  # session/new was not read, let alone answered


def test_what_comes_before_initialize_is_refused_or_dropped(link: Link) -> None:
    link.conduct({"method": "session/cancel", "params": {}}, {"id": 1, "method": "session/list", "params": {}})
    error = link.written()["error"]
    assert error["code"] == -32600 and "before initialize" in error["message"]
    link.conduct({"id": 2, "method": "proxy/initialize", "params": {}})
    assert link.to_relay_client() == {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}}


def test_lines_that_are_not_json_rpc_are_the_relays_to_refuse(link: Link) -> None:
    link.conduct({"id": 0, "method": "proxy/initialize", "params": {}})
    link.to_relay_client()
    link.conduct(b"not json", b"[1, 2]")
    assert link.relay.client.get(timeout=TIMEOUT) == b"not json"
    assert link.relay.client.get(timeout=TIMEOUT) == b"[1, 2]"


def test_an_envelope_without_a_message_is_answered_or_dropped(link: Link) -> None:
    link.conduct({"id": 0, "method": "proxy/initialize", "params": {}})
    link.to_relay_client()
    link.conduct({"method": "proxy/successor", "params": {"no": "method"}}, {"id": 5, "method": "proxy/successor"})
    answer = link.written()
    assert answer["id"] == 5 and answer["error"]["code"] == -32602
    assert link.agent_stream_open()  # nothing reached the relay's agent side


def test_answers_to_nothing_the_chain_sent_go_nowhere(link: Link) -> None:
    link.conduct({"id": 0, "method": "proxy/initialize", "params": {}})
    link.to_relay_client()
    link.conduct({"id": 99, "result": {}})
    link.relay_to_agent({"id": 98, "result": {}})  # a client's answer to a request the successor never made
    assert link.agent_stream_open()
    assert link.nothing_written()


def test_the_conductors_end_ends_the_client_and_the_successor_goes_when_the_relay_lets_it(link: Link) -> None:
    link.conduct({"id": 0, "method": "proxy/initialize", "params": {}})
    link.to_relay_client()
    link.end()
    assert link.to_relay_client() is None
    assert link.agent_stream_open()  # not before the relay has let it go: its end is then no fault
    link.chain.agent.end()
    assert link.to_relay_agent() is None
    assert link.relay.ended == [AgentEnd(ENDED, asked=True)]


def test_the_successors_message_too_long_to_relay_is_answered_if_it_asks_and_dropped_if_not(link: Link) -> None:
    link.conduct({"id": 0, "method": "initialize", "params": {"_meta": {"proxy": True}}})
    link.to_relay_client()
    content = "z" * (MAX_MESSAGE_BYTES + 10)
    write = {"method": "fs/write_text_file", "params": {"sessionId": "s", "path": "/x", "content": content}}
    link.conduct({"id": 31, "method": "_proxy/successor/request", "params": write})
    answer = link.written()
    assert answer["id"] == 31 and answer["error"]["code"] == -32600  # the agent is not left waiting
    link.conduct({"method": "_proxy/successor/notification", "params": write})
    assert link.nothing_written()  # a notification: logged, not answered (it has no id)
    assert link.agent_stream_open() and link.relay.client.empty()  # and neither side of the relay saw either


def test_each_direction_is_delivered_on_a_thread_of_its_own_and_every_thread_is_joined(link: Link) -> None:
    link.conduct({"id": 0, "method": "proxy/initialize", "params": {}})
    link.to_relay_client()
    link.conduct({"method": "proxy/successor", "params": {"method": "session/update", "params": {}}})
    link.to_relay_agent()
    # The successor's lines are delivered by the reader itself; the client's cross to the client port's thread.
    assert link.relay.threads == {"agent": {"acp-registry-proxy-conductor"}, "client": {"acp-registry-proxy-client"}}
    link.end()
    assert link.to_relay_client() is None
    link.chain.agent.end()
    assert link.to_relay_agent() is None
    link.chain.agent.join(TIMEOUT)
    link.chain.client.join(TIMEOUT)
    alive = [
        t.name for t in threading.enumerate() if t.name in ("acp-registry-proxy-conductor", "acp-registry-proxy-client")
    ]
    assert alive == []


def test_the_relay_letting_the_successor_go_stops_the_reader_while_the_conductor_still_writes(link: Link) -> None:
    """SIGTERM, or a client that cannot be written to: the relay ends the agent port with the conductor's input
    still open; the reader stops at once and both ends are delivered (the proxy's run returns)."""
    link.conduct({"id": 0, "method": "proxy/initialize", "params": {}})
    link.to_relay_client()
    link.chain.agent.end()
    assert link.to_relay_client() is None
    assert link.to_relay_agent() is None
    assert link.relay.ended == [AgentEnd(ENDED, asked=True)]


def test_a_cancel_request_names_the_id_the_next_hop_knows_both_ways(link: Link) -> None:
    link.conduct({"id": 0, "method": "initialize", "params": {"_meta": {"proxy": True}}})
    link.to_relay_client()
    # The relay's request to the successor travels under the chain's envelope id; its cancel names that id.
    link.relay_to_agent({"id": 7, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}})
    envelope = link.written()
    link.relay_to_agent({"method": "$/cancel_request", "params": {"requestId": 7}})
    assert link.written() == {
        "jsonrpc": "2.0",
        "method": "_proxy/successor/notification",
        "params": {"method": "$/cancel_request", "params": {"requestId": envelope["id"]}},
    }
    # One naming no request waiting at the successor is not passed on: the id could be another's there.
    link.relay_to_agent({"method": "$/cancel_request", "params": {"requestId": 8}})
    assert link.nothing_written()
    # The successor's request reaches the client under a chain id; the successor's cancel of it names that id.
    asked = {"method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/x"}}
    link.conduct({"id": 3, "method": "_proxy/successor/request", "params": asked})
    link.relay_to_client(link.to_relay_agent() or {})
    relayed = link.written()
    cancel = {"method": "$/cancel_request", "params": {"requestId": 3}}
    link.conduct({"method": "_proxy/successor/notification", "params": cancel})
    link.relay_to_client(link.to_relay_agent() or {})  # the relay passes the agent's notification as it is
    assert link.written() == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": relayed["id"]}}


def test_a_host_that_closes_its_chained_proxy_gets_every_thread_back(tmp_path: Path) -> None:
    """Embedded: ``Proxy`` with a ``Chain`` on two pipes of the host's (the host is the conductor), stopped with the
    conductor's output still open - the relay's own rules end the link, and every thread is joined."""
    before = set(threading.enumerate())
    with contextlib.ExitStack() as pipes, SessionRegistry.open(f"sqlite://{tmp_path}/sessions.db") as registry:
        to_link_read, to_link = os.pipe()
        from_link, from_link_write = os.pipe()
        for fd in (to_link_read, to_link, from_link_write):
            pipes.callback(os.close, fd)
        reader = pipes.enter_context(os.fdopen(from_link, "rb"))

        def conduct(message: Message) -> Message:
            os.write(to_link, _encode(message) + b"\n")
            decoded: Message = msgspec.json.decode(reader.readline())
            return decoded

        chain = Chain(to_link_read, from_link_write)
        proxy = Proxy(registry, [], client=chain.client, import_history=False)
        proxy.start(chain.agent)
        runner = threading.Thread(target=proxy.run)
        runner.start()
        envelope = conduct({"id": 0, "method": "proxy/initialize", "params": {"protocolVersion": 1}})
        assert envelope["method"] == "proxy/successor" and envelope["params"]["method"] == "initialize"
        answer = conduct({"id": envelope["id"], "result": {"protocolVersion": 1}})
        assert answer["id"] == 0 and "list" in answer["result"]["agentCapabilities"]["sessionCapabilities"]
        assert conduct({"id": 1, "method": "session/list", "params": {}})["result"]["sessions"] == []
        proxy.stop("the host is done")
        runner.join(TIMEOUT)
        assert not runner.is_alive()  # run returns once stopped: the reader stopped, the conductor still open
        proxy.close()
        assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
