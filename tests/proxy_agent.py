"""A scripted ACP agent for the proxy's tests: the things real agents cannot be made to do on demand.

Run as ``python tests/proxy_agent.py [--name N] [--list] [--delete] [--fork] [--past FILE] [--log FILE] [--banner]
[--keep FILE] [--reuse-ids] [--slow-list S] [--v2] [--uuid-ids] [--page-size N] [--per-cwd] [--order asc|desc]
[--forget-cwd DIR]``.
Stdlib only. Each line it receives is appended to ``--log`` (so a test sees exactly what the proxy forwarded).
A prompt's first text block is a script:

- ``permission`` / ``fs``: asks the client (``session/request_permission`` / ``fs/read_text_file``) mid-turn, with
  the agent's own ids (0, 1, ... - the same ids clients use), and replies with the client's answer;
- ``flood N [SIZE]``: N ``agent_message_chunk`` notifications (SIZE characters each), then ends the turn;
- ``big N``: one chunk of N characters;
- ``bigask N``: an ``fs/write_text_file`` request of N characters to the client, then replies with its answer;
- ``title T``: a ``session_info_update`` with title T;
- ``retitle N SIZE``: N ``session_info_update`` s with titles of SIZE characters (over the title limit, say);
- ``later ...``: answers the turn, then, half a second later, titles the session with the whole prompt (and an
  ``updatedAt``);
- ``crash``: one chunk, then the process ends itself with SIGKILL mid-turn;
- ``exit``: one chunk, then exits with code 3 mid-turn;
- ``garbage``: a line that is not JSON, a line that is JSON but not JSON-RPC, then replies;
- ``slow S``: waits S seconds (``session/cancel`` ends the wait: stopReason ``cancelled``);
- ``error``: answers the prompt with a JSON-RPC error;
- ``rich WORDS``: a whole turn of every kind - a thought, a plan, a tool call and its update (a text block and a
  diff), the answer in two chunks around a resource link, the plan again with its entry done - each naming WORDS;
- ``spend IN OUT COST``: adds IN input and OUT output tokens and COST dollars to the session's running totals,
  sends them as a ``usage_update`` (context used, window, cumulative cost) and answers with the session's
  cumulative ``usage``, as the schema words it;
- ``alternate N``: N chunks alternating agent text and thought (every chunk a message of its own);
- ``badutf8`` / ``nul``: a chunk whose text holds bytes that are not UTF-8 / a NUL character;
- anything else: echoed back as one chunk.

``--keep FILE`` makes it an agent that keeps a session only once it had a turn (as claude-agent-acp, codex-acp
and fast-agent do): those are written to FILE and read back by the next process; ``session/load`` / ``resume`` of
any other answers -32002. ``--reuse-ids`` numbers sessions "0", "1", ... afresh in every process (as the Python
SDK's example agent does). ``--slow-list S`` makes its ``session/list`` take S seconds.
``--v2`` answers an ``initialize`` of protocol version 2 in the v2 draft's shape (``info``, ``capabilities.session``;
its session list is baseline there).
``--forget-cwd DIR`` (with ``--keep``) never keeps a session in DIR, turn or not (an agent that does not save
sessions of another folder). ``--uuid-ids`` makes its session ids UUIDs (as claude-agent-acp's and codex-acp's
are). ``--page-size N`` answers ``session/list`` N sessions a page (with ``nextCursor``); ``--per-cwd`` makes it a
list that answers one cwd at a time (without ``cwd``: only the folder it runs in, as fast-agent's does);
``--order desc`` lists newest first.
``--banner`` prints a non-JSON line on stdout at start (as a misbehaving agent does). ``--past FILE`` holds a JSON
array of sessions it had before (listed by ``session/list`` when ``--list`` is given; ``session/load`` of one
replays its title as a ``session_info_update`` before answering, and its ``history`` - ``[[kind, text], ...]``
with kind ``user``, ``agent`` or ``thought`` - as chunks). ``--name`` is its
``agentInfo.name`` (none at all with ``--name ''``).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
import uuid
from typing import Any

_out_lock = threading.Lock()
_log_lock = threading.Lock()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="scripted-agent")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--delete", action="store_true")
    parser.add_argument("--fork", action="store_true")
    parser.add_argument("--past", default=None)
    parser.add_argument("--log", default=None)
    parser.add_argument("--banner", action="store_true")
    parser.add_argument("--keep", default=None)
    parser.add_argument("--reuse-ids", action="store_true")
    parser.add_argument("--slow-list", type=float, default=0.0)
    parser.add_argument("--v2", action="store_true")
    parser.add_argument("--uuid-ids", action="store_true")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--per-cwd", action="store_true")
    parser.add_argument("--order", default="asc")
    parser.add_argument("--forget-cwd", default=None)
    args = parser.parse_args()
    agent = Agent(args)
    if args.banner:
        agent.raw("this agent prints a banner on stdout")
    for raw in sys.stdin.buffer:
        if args.log:
            with _log_lock, open(args.log, "ab") as log:
                log.write(raw if raw.endswith(b"\n") else raw + b"\n")
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        agent.receive(message)
    sys.stderr.write("scripted agent: stdin closed\n")


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sessions: dict[str, dict[str, Any]] = {}
        if args.past:
            with open(args.past) as file:
                for item in json.load(file):
                    if isinstance(item, dict) and isinstance(item.get("sessionId"), str):
                        self.sessions[item["sessionId"]] = item
        self.kept: dict[str, dict[str, Any]] = {}
        if args.keep and os.path.exists(args.keep):
            with open(args.keep) as file:
                self.kept = json.load(file)
            self.sessions.update(self.kept)
        self.next_id = 0
        self.waiting: dict[Any, queue.Queue[Any]] = {}
        self.cancelled: set[str] = set()
        self.next_session = 0

    def raw(self, text: str) -> None:
        with _out_lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def send(self, message: dict[str, Any]) -> None:
        message["jsonrpc"] = "2.0"
        self.raw(json.dumps(message))

    def notify(self, session_id: str, update: dict[str, Any]) -> None:
        self.send({"method": "session/update", "params": {"sessionId": session_id, "update": update}})

    def chunk(self, session_id: str, text: str) -> None:
        self.notify(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    def ask(self, method: str, params: dict[str, Any]) -> Any:
        request_id = self.next_id
        self.next_id += 1
        box: queue.Queue[Any] = queue.Queue()
        self.waiting[request_id] = box
        self.send({"id": request_id, "method": method, "params": params})
        return box.get(timeout=30)

    def receive(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            box = self.waiting.pop(message.get("id"), None)
            if box is not None:
                box.put(message)
            return
        method, params, request_id = message["method"], message.get("params") or {}, message.get("id")
        if "id" not in message:
            if method == "session/cancel":
                self.cancelled.add(str(params.get("sessionId")))
            return
        if method == "session/prompt":
            threading.Thread(target=self.prompt, args=(request_id, params), daemon=True).start()
            return
        try:
            result = self.answer(method, params)
        except KeyError as exc:
            error = {"code": -32002, "message": f"session {exc} not found", "data": {"sessionId": exc.args[0]}}
            self.send({"id": request_id, "error": error})
            return
        except LookupError as exc:
            self.send({"id": request_id, "error": {"code": -32601, "message": f"method not found: {exc}"}})
            return
        self.send({"id": request_id, "result": result})

    def answer(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            capabilities: dict[str, Any] = {"loadSession": True, "sessionCapabilities": {"resume": {}}}
            if self.args.list:
                capabilities["sessionCapabilities"]["list"] = {}
            if self.args.delete:
                capabilities["sessionCapabilities"]["delete"] = {}
            if self.args.fork:
                capabilities["sessionCapabilities"]["fork"] = {}
            result: dict[str, Any] = {
                "protocolVersion": 1,
                "agentCapabilities": capabilities,
                "authMethods": [{"id": "scripted", "name": "scripted"}],
                "_meta": {"scripted": True},
            }
            if self.args.name:
                result["agentInfo"] = {"name": self.args.name, "version": "1.0"}
            if self.args.v2 and params.get("protocolVersion", 1) >= 2:  # the v2 draft's shape
                session = {key: value for key, value in capabilities["sessionCapabilities"].items() if key != "list"}
                result = {
                    "protocolVersion": 2,
                    "capabilities": {"session": session, "_meta": {"scripted": True}},
                    "authMethods": [],
                    "_meta": {"scripted": True},
                }
                if self.args.name:
                    result["info"] = {"name": self.args.name, "version": "1.0"}
            return result
        if method == "authenticate":
            return {}
        if method == "session/new":
            session_id = str(self.next_session) if self.args.reuse_ids else f"s-{len(self.sessions) + 1}-{os.getpid()}"
            if self.args.uuid_ids:
                session_id = str(uuid.uuid4())
            self.next_session += 1
            self.sessions[session_id] = {"sessionId": session_id, "cwd": params.get("cwd")}
            return {"sessionId": session_id}
        if method == "session/fork" and self.args.fork:
            session_id = f"fork-{len(self.sessions) + 1}-{os.getpid()}"
            self.sessions[session_id] = {"sessionId": session_id, "cwd": params.get("cwd")}
            return {"sessionId": session_id}
        if method in ("session/load", "session/resume"):
            known = self.sessions.get(str(params.get("sessionId")))
            if self.args.keep and known is None:
                raise KeyError(params.get("sessionId"))
            if method == "session/load" and known and known.get("title"):  # a replay, as real agents do
                update = {"sessionUpdate": "session_info_update", "title": known["title"]}
                self.notify(known["sessionId"], update)
            if method == "session/load" and known:
                chunks = {"user": "user_message_chunk", "thought": "agent_thought_chunk"}
                for said, text in known.get("history") or []:
                    content = {"type": "text", "text": text}
                    kind = chunks.get(said, "agent_message_chunk")
                    self.notify(known["sessionId"], {"sessionUpdate": kind, "content": content})
            return {}
        if method == "session/list" and self.args.list:
            time.sleep(self.args.slow_list)  # an agent slow to list, on purpose: what the tests of it are about
            if self.args.keep:
                listed = list(self.kept.values())
            elif self.args.past:  # as written, malformed entries included
                with open(self.args.past) as file:
                    past = json.load(file)
                listed = past + [s for s in self.sessions.values() if s not in past]
            else:
                listed = list(self.sessions.values())
            return self.page(listed, params)
        if method == "session/delete" and self.args.delete:
            self.sessions.pop(str(params.get("sessionId")), None)
            return {}
        if method.startswith("_"):
            return {"echo": params}
        raise LookupError(method)

    def page(self, listed: list[Any], params: dict[str, Any]) -> dict[str, Any]:
        """A ``session/list`` answer: for ``params``' cwd (``--per-cwd``: without one, the folder it runs in),
        from ``params``' cursor, ``--page-size`` at a time."""
        if self.args.per_cwd:
            cwd = params.get("cwd") or os.getcwd()
            listed = [item for item in listed if isinstance(item, dict) and item.get("cwd") == cwd]
        if self.args.order == "desc":
            listed = listed[::-1]
        if not self.args.page_size:
            return {"sessions": listed}
        start = int(params.get("cursor") or 0)
        end = start + self.args.page_size
        answer: dict[str, Any] = {"sessions": listed[start:end]}
        if end < len(listed):
            answer["nextCursor"] = str(end)
        return answer

    def prompt(self, request_id: Any, params: dict[str, Any]) -> None:
        session_id = str(params.get("sessionId"))
        blocks = params.get("prompt") or []
        text = next((b.get("text", "") for b in blocks if b.get("type") == "text"), "")
        word, _, rest = text.partition(" ")
        stop = "end_turn"
        if word == "permission":
            answer = self.ask(
                "session/request_permission",
                {"sessionId": session_id, "toolCall": {"toolCallId": "t1"}, "options": []},
            )
            self.chunk(session_id, json.dumps(answer))
        elif word == "fs":
            answer = self.ask("fs/read_text_file", {"sessionId": session_id, "path": "/etc/hostname"})
            self.chunk(session_id, json.dumps(answer))
        elif word == "flood":
            count, _, size = rest.partition(" ")
            piece = "x" * int(size or 8)
            for _ in range(int(count)):
                self.chunk(session_id, piece)
        elif word == "bigask":  # a request to the client too long for any relay: the agent must get an answer
            answer = self.ask("fs/write_text_file", {"sessionId": session_id, "path": "/x", "content": "z" * int(rest)})
            self.chunk(session_id, json.dumps(answer))
        elif word == "big":
            self.chunk(session_id, "y" * int(rest))
        elif word == "title":
            self.notify(session_id, {"sessionUpdate": "session_info_update", "title": rest})
        elif word == "titled":  # a title with another field in the same update
            update = {"sessionUpdate": "session_info_update", "title": rest, "updatedAt": "2026-12-01T10:00:00Z"}
            self.notify(session_id, update)
        elif word == "titles":  # N titles of SIZE characters each, for sessions nobody has made
            count, _, size = rest.partition(" ")
            for n in range(int(count)):
                self.notify(f"ghost-{n}", {"sessionUpdate": "session_info_update", "title": "t" * int(size)})
        elif word == "retitle":  # N titles of SIZE characters each, for this session
            count, _, size = rest.partition(" ")
            for n in range(int(count)):
                title = "abcdefghij"[n % 10] * int(size)
                self.notify(session_id, {"sessionUpdate": "session_info_update", "title": title})
        elif word == "crash":
            self.chunk(session_id, "about to crash")
            os.kill(os.getpid(), signal.SIGKILL)
        elif word == "exit":
            self.chunk(session_id, "about to exit")
            os._exit(3)
        elif word == "garbage":
            self.raw("not json at all")
            self.raw('{"hello": "world"}')
            self.chunk(session_id, "after garbage")
        elif word == "slow":
            deadline = time.monotonic() + float(rest or 5)
            while time.monotonic() < deadline and session_id not in self.cancelled:
                time.sleep(0.01)  # a turn that lasts, on purpose, until its time is up or it is cancelled
            if session_id in self.cancelled:
                self.cancelled.discard(session_id)
                stop = "cancelled"
        elif word == "rich":
            self.rich(session_id, rest)
        elif word == "spend":
            known = self.sessions.setdefault(session_id, {"sessionId": session_id})
            spent = known.setdefault("spent", [0, 0, 0.0])  # kept with the session (``--keep``), as vibe does
            for n, value in enumerate(rest.split()[:3]):
                spent[n] += float(value)
            cost = {"amount": spent[2], "currency": "USD"}
            used = int(spent[0] + spent[1])
            self.notify(session_id, {"sessionUpdate": "usage_update", "used": used, "size": 200000, "cost": cost})
            self.chunk(session_id, f"spent {rest}")
            usage = {"inputTokens": int(spent[0]), "outputTokens": int(spent[1]), "totalTokens": used}
            self.keep(session_id)
            self.send({"id": request_id, "result": {"stopReason": stop, "usage": usage}})
            return
        elif word == "alternate":
            for n in range(int(rest)):
                kind = "agent_message_chunk" if n % 2 == 0 else "agent_thought_chunk"
                self.notify(session_id, {"sessionUpdate": kind, "content": {"type": "text", "text": f"c{n}"}})
        elif word == "badutf8":
            line = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": session_id,
                        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "BAD"}},
                    },
                }
            )
            with _out_lock:
                sys.stdout.buffer.write(line.encode().replace(b"BAD", b"bad \xff\xfe bytes") + b"\n")
                sys.stdout.flush()
        elif word == "nul":
            self.chunk(session_id, "before\u0000after")
        elif word == "error":
            self.send({"id": request_id, "error": {"code": -32603, "message": "scripted failure"}})
            return
        else:
            self.chunk(session_id, text)
        self.keep(session_id)
        if word == "later":  # titled by the whole prompt, with its time, a moment after the answer (as claude does)
            self.send({"id": request_id, "result": {"stopReason": stop}})
            time.sleep(0.5)  # on purpose: the title comes a moment after the answer, as claude's does
            update = {"sessionUpdate": "session_info_update", "title": text, "updatedAt": "2026-12-01T10:00:00Z"}
            self.notify(session_id, update)
            return
        self.send({"id": request_id, "result": {"stopReason": stop}})

    def keep(self, session_id: str) -> None:
        forgotten = self.args.forget_cwd and self.sessions.get(session_id, {}).get("cwd") == self.args.forget_cwd
        if self.args.keep and session_id in self.sessions and not forgotten:
            self.kept[session_id] = self.sessions[session_id]
            with open(self.args.keep, "w") as file:
                json.dump(self.kept, file)

    def rich(self, session_id: str, words: str) -> None:
        """Every kind of update a turn can hold, in the order a real agent sends them."""
        plan = [{"content": f"plan {words}", "priority": "high", "status": "pending"}]
        self.notify(
            session_id, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": f"think {words}"}}
        )
        self.notify(session_id, {"sessionUpdate": "plan", "entries": plan})
        tool = {"toolCallId": "call-1", "title": f"Edit {words}.py", "kind": "edit", "status": "pending"}
        self.notify(session_id, {"sessionUpdate": "tool_call", **tool})
        content = [
            {"type": "content", "content": {"type": "text", "text": f"output {words}"}},
            {"type": "diff", "path": f"/src/{words}.py", "oldText": "old", "newText": f"new {words}"},
        ]
        update = {"toolCallId": "call-1", "status": "completed", "content": content}
        self.notify(session_id, {"sessionUpdate": "tool_call_update", **update})
        self.chunk(session_id, f"answer {words} ")
        link = {"type": "resource_link", "name": "notes.md", "uri": "file:///notes.md"}
        self.notify(session_id, {"sessionUpdate": "agent_message_chunk", "content": link})
        self.chunk(session_id, " done")
        plan[0]["status"] = "completed"
        self.notify(session_id, {"sessionUpdate": "plan", "entries": plan})


if __name__ == "__main__":
    main()
