"""The conversations and token counts in the agents' fixture files, read straight from the raw files with ``json``
and ``sqlite3`` - a second reading, written apart from the importers', that their results are held to.

``expected(agent, root)`` gives, per native session id, the conversation as a list of ``Said`` items - ``(role,
text)`` for what the user, the agent and its thinking said, ``("tool", name, result)`` for a tool call (the
importer's message must begin with the tool's name and hold its result) - and the usage totals: input (not from
a cache), output (reasoning included), cache read, cache write, reasoning tokens, and the cost in nanodollars. Each
agent's rules are the ones ``docs/agent-histories.md`` states.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

Said = tuple[str, ...]
Totals = dict[str, int]
Conversation = tuple[list[Said], Totals]

FIELDS = ("input", "output", "cache_read", "cache_write", "thought", "cost_nanos")


def totals(**figures: int) -> Totals:
    return {field: figures.get(field, 0) for field in FIELDS}


def add(into: Totals, **figures: int) -> None:
    for field, value in figures.items():
        into[field] += value


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().endswith("}")]


# -- Claude Code ------------------------------------------------------------------------------------------------


def claude_code(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for path in sorted(root.glob("projects/*/*.jsonl")):
        if path.name.startswith("agent-"):
            continue
        sid = path.stem
        said: list[Said] = []
        names: dict[str, str] = {}
        for record in lines(path):
            if record.get("sessionId") != sid or record.get("isSidechain") or record.get("isMeta"):
                continue
            content: Any = (record.get("message") or {}).get("content") or []
            if record.get("type") == "user":
                if isinstance(content, str):
                    content = [{"type": "text", "text": content}]
                results = [b for b in content if b.get("type") == "tool_result"]
                for block in results:
                    result = block["content"]
                    text = result if isinstance(result, str) else "\n".join(p["text"] for p in result)
                    said.append(("tool", names.get(block["tool_use_id"], "tool"), text))
                texts = [b["text"] for b in content if b.get("type") == "text"]
                real = [t for t in texts if not t.lstrip().startswith(("<", "[Request interrupted"))]
                if not results and real:
                    said.append(("user", "\n\n".join(t.strip() for t in real)))
                elif not results and not texts and any(b.get("type") == "image" for b in content):
                    said.append(("user", "[image]"))  # a pasted picture alone
            elif record.get("type") == "assistant":
                for block in content:
                    if block["type"] == "text":
                        said.append(("agent", block["text"]))
                    elif block["type"] == "thinking":
                        said.append(("thought", block["thinking"]))
                    elif block["type"] == "tool_use":
                        names[block["id"]] = block["name"]
        out[sid] = (said, _claude_usage(path.parent, sid))
    return out


def _claude_usage(project: Path, sid: str) -> Totals:
    """Each ``message.id`` once, at the largest figure its lines reach, over the session's file and the subagent
    transcripts beside it (``<id>/subagents/**``, and older ``agent-*.jsonl`` naming the session)."""
    files = [project / f"{sid}.jsonl", *sorted((project / sid).glob("subagents/**/agent-*.jsonl"))]
    files += sorted(project.glob("agent-*.jsonl"))
    best: dict[str, dict[str, int]] = {}
    for path in files:
        for record in lines(path):
            message = record.get("message") or {}
            if record.get("type") != "assistant" or record.get("sessionId") != sid or "usage" not in message:
                continue
            seen = best.setdefault(message["id"], {})
            for key, value in message["usage"].items():
                if isinstance(value, int):
                    seen[key] = max(seen.get(key, 0), value)
    out = totals()
    for figures in best.values():
        add(
            out,
            input=figures.get("input_tokens", 0),
            output=figures.get("output_tokens", 0),
            cache_read=figures.get("cache_read_input_tokens", 0),
            cache_write=figures.get("cache_creation_input_tokens", 0),
        )
    return out


# -- Codex ------------------------------------------------------------------------------------------------------


def codex(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for path in sorted(root.glob("sessions/**/rollout-*.jsonl")):
        said: list[Said] = []
        names: dict[str, str] = {}
        last: dict[str, int] = {}
        for record in lines(path):
            payload = record["payload"]
            kind = payload.get("type")
            if record["type"] == "event_msg" and kind == "user_message":
                said.append(("user", payload["message"]))
            elif record["type"] == "event_msg" and kind == "agent_message":
                said.append(("agent", payload["message"]))
            elif record["type"] == "event_msg" and kind == "agent_reasoning":
                said.append(("thought", payload["text"]))
            elif record["type"] == "event_msg" and kind == "token_count" and payload.get("info"):
                last = payload["info"]["total_token_usage"]  # running totals: the last ones are the session's
            elif record["type"] == "response_item" and kind in ("function_call", "custom_tool_call"):
                names[payload["call_id"]] = payload["name"]
            elif record["type"] == "response_item" and kind in ("function_call_output", "custom_tool_call_output"):
                said.append(("tool", names[payload["call_id"]], json.loads(payload["output"])["output"]))
        cached = last.get("cached_input_tokens", 0)
        usage = totals(
            input=last.get("input_tokens", 0) - cached,
            cache_read=cached,
            output=last.get("output_tokens", 0),
            thought=last.get("reasoning_output_tokens", 0),
        )
        out[path.name[-42:-6]] = (said, usage)
    return out


# -- Gemini CLI -------------------------------------------------------------------------------------------------


def gemini(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for path in sorted(root.glob("tmp/*/chats/session-*.jsonl")):
        records = lines(path)
        messages: dict[str, dict[str, Any]] = {}
        for record in records:
            if "$rewindTo" in record:
                ids = list(messages)
                for dropped in ids[ids.index(record["$rewindTo"]) :]:
                    del messages[dropped]
            elif "id" in record and "type" in record:
                messages[record["id"]] = record  # the last record of a message wins, in its first place
        said: list[Said] = []
        usage = totals()
        for message in messages.values():
            text = (
                "".join(p.get("text", "") for p in message["content"]) if isinstance(message["content"], list) else ""
            )
            if message["type"] == "user":
                said.append(("user", text))
            elif message["type"] == "gemini":
                said.extend(("thought", f"{t['subject']}: {t['description']}") for t in message.get("thoughts") or [])
                if text:
                    said.append(("agent", text))
                for call in message.get("toolCalls") or []:
                    output = call["result"][0]["functionResponse"]["response"]["output"]
                    said.append(("tool", call["name"], output))
                tokens = message.get("tokens") or {}
                add(
                    usage,
                    input=tokens.get("input", 0) - tokens.get("cached", 0) + tokens.get("tool", 0),
                    cache_read=tokens.get("cached", 0),
                    output=tokens.get("output", 0) + tokens.get("thoughts", 0),
                    thought=tokens.get("thoughts", 0),
                )
        out[records[0]["sessionId"]] = (said, usage)
    return out


# -- Qwen Code --------------------------------------------------------------------------------------------------


def qwen(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for path in sorted(root.glob("projects/*/chats/*.jsonl")):
        said: list[Said] = []
        usage = totals()
        names: dict[str, str] = {}
        seen: set[str] = set()
        for record in lines(path):
            if record["uuid"] in seen or record["type"] == "system":
                continue
            seen.add(record["uuid"])
            parts = record["message"]["parts"]
            if record["type"] == "user":
                said.append(("user", "\n".join(p["text"] for p in parts if "text" in p)))
            elif record["type"] == "tool_result":
                for part in parts:
                    response = part["functionResponse"]
                    said.append(("tool", names[response["id"]], response["response"]["output"]))
            else:
                for part in parts:
                    if "functionCall" in part:
                        names[part["functionCall"]["id"]] = part["functionCall"]["name"]
                    else:
                        said.append(("thought" if part.get("thought") else "agent", part["text"]))
                meta = record.get("usageMetadata") or {}
                cached = meta.get("cachedContentTokenCount", 0)
                add(
                    usage,
                    input=meta.get("promptTokenCount", 0) - cached,
                    cache_read=cached,
                    output=meta.get("candidatesTokenCount", 0) + meta.get("thoughtsTokenCount", 0),
                    thought=meta.get("thoughtsTokenCount", 0),
                )
        out[path.stem] = (said, usage)
    return out


# -- Kimi CLI and Kimi Code -------------------------------------------------------------------------------------


def kimi(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for folder in sorted(p.parent for p in root.glob("sessions/*/*/context.jsonl")):
        wire = folder / "wire.jsonl"
        if wire.exists():
            out[folder.name] = _kimi_wire(wire)
        else:
            said: list[Said] = []
            names: dict[str, str] = {}
            for record in lines(folder / "context.jsonl"):
                content = record.get("content")
                parts: list[dict[str, Any]] = (
                    content if isinstance(content, list) else [{"type": "text", "text": content}]
                )
                if record["role"] == "user" and not str(parts[0].get("text", "")).startswith("<system>"):
                    said.append(("user", parts[0]["text"]))
                elif record["role"] == "assistant":
                    said.extend(("agent", p["text"]) for p in parts if p.get("type") == "text")
                    names.update({c["id"]: c["function"]["name"] for c in record.get("tool_calls") or []})
                elif record["role"] == "tool":
                    said.append(("tool", names[record["tool_call_id"]], parts[0]["text"]))
            out[folder.name] = (said, totals())
    for path in sorted(root.glob("sessions/*/*.jsonl")):  # the oldest layout: a flat context file
        records = [r for r in lines(path) if r["role"] in ("user", "assistant")]
        said = [("user" if r["role"] == "user" else "agent", _kimi_text(r["content"])) for r in records]
        out[path.stem] = (said, totals())
    return out


def _kimi_text(content: object) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content) if isinstance(content, list) else ""


_KIMI_USAGE = {
    "input": "input_other",
    "output": "output",
    "cache_read": "input_cache_read",
    "cache_write": "input_cache_creation",
}
"""Our totals -> kimi's token usage counts (kimi-cli's wire spells them so; Kimi Code's in camel case)."""


def _add_kimi_usage(usage: Totals, spent: dict[str, int], *, camel: bool = False) -> None:
    for total, key in _KIMI_USAGE.items():
        first, *rest = key.split("_")
        usage[total] += spent[first + "".join(word.title() for word in rest) if camel else key]


def _kimi_wire(path: Path) -> Conversation:
    said: list[Said] = []
    usage = totals()
    names: dict[str, str] = {}
    counted: set[str] = set()
    previous = None
    for record in lines(path)[1:]:
        kind, payload = record["message"]["type"], record["message"]["payload"]
        if kind == "TurnBegin":
            said.append(("user", "".join(p["text"] for p in payload["user_input"])))
        elif kind in ("TextPart", "ThinkPart"):
            role, text = ("thought", payload["think"]) if kind == "ThinkPart" else ("agent", payload["text"])
            if previous == kind:  # chunks streamed one after the other are one message
                said[-1] = (role, said[-1][1] + text)
            else:
                said.append((role, text))
        elif kind == "ToolCall":
            names[payload["id"]] = payload["function"]["name"]
        elif kind == "ToolResult":
            said.append(("tool", names[payload["tool_call_id"]], payload["return_value"]["output"]))
        elif kind == "StatusUpdate" and payload["message_id"] not in counted:
            counted.add(payload["message_id"])
            _add_kimi_usage(usage, payload["token_usage"])
        previous = kind
    return said, usage


def kimi_code(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for path in sorted(root.glob("sessions/*/*/agents/main/wire.jsonl")):
        state = json.loads((path.parents[2] / "state.json").read_text())
        if (state.get("custom") or {}).get("imported_from_kimi_cli"):
            continue
        said: list[Said] = []
        usage = totals()
        for record in lines(path):
            kind = record["type"]
            message = record.get("message") or {}
            origin = (message.get("origin") or {}).get("kind")
            if kind == "context.append_message" and message["role"] == "user" and origin in (None, "user"):
                said.append(("user", "".join(p["text"] for p in message["content"])))
            elif kind == "context.append_message" and message["role"] == "assistant" and origin != "hook_result":
                said.extend(("agent", p["text"]) for p in message["content"])
            elif kind == "context.append_loop_event" and record["event"]["type"] == "content.part":
                said.append(("agent", record["event"]["part"]["text"]))
            elif kind == "usage.record":
                _add_kimi_usage(usage, record["usage"], camel=True)
        out[path.parents[2].name] = (said, usage)
    return out


# -- goose and opencode -----------------------------------------------------------------------------------------


def goose(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    db = sqlite3.connect(root / "sessions" / "sessions.db")
    listed = "session_type IN ('user', 'scheduled', 'acp') AND parent_session_id IS NULL"
    sessions = db.execute(
        f"SELECT id, accumulated_input_tokens, accumulated_output_tokens FROM sessions WHERE {listed}"
    )
    for sid, tokens_in, tokens_out in sessions.fetchall():
        said: list[Said] = []
        names: dict[str, str] = {}
        rows = db.execute(
            "SELECT role, content_json, metadata_json FROM messages WHERE session_id = ? ORDER BY id", (sid,)
        )
        for role, content, metadata in rows:
            if metadata and json.loads(metadata).get("userVisible") is False:
                continue
            texts = []
            for part in json.loads(content):
                if part["type"] == "text":
                    texts.append(part["text"])
                elif part["type"] == "thinking":
                    said.append(("thought", part["thinking"]))
                elif part["type"] == "toolRequest":
                    names[part["id"]] = part["toolCall"]["value"]["name"]
                elif part["type"] == "toolResponse":
                    said.append(("tool", names[part["id"]], part["toolResult"]["value"][0]["text"]))
            if texts:
                said.append(("user" if role == "user" else "agent", "\n".join(texts)))
        out[sid] = (said, totals(input=tokens_in or 0, output=tokens_out or 0))
    db.close()
    return out


def opencode(root: Path) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    db = sqlite3.connect(root / "opencode.db")
    for (sid,) in db.execute("SELECT id FROM session WHERE parent_id IS NULL").fetchall():
        said: list[Said] = []
        usage = totals()
        for mid, data in db.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY id", (sid,)).fetchall():
            info = json.loads(data)
            texts = []
            for (part_data,) in db.execute("SELECT data FROM part WHERE message_id = ? ORDER BY id", (mid,)):
                part = json.loads(part_data)
                if part["type"] == "text" and not part.get("synthetic"):
                    texts.append(part["text"])
                elif part["type"] == "reasoning":
                    said.append(("thought", part["text"]))
                elif part["type"] == "tool":
                    state = part["state"]
                    said.append(("tool", part["tool"], state.get("output") or state.get("error")))
            if info["role"] == "user":
                said.append(("user", "\n".join(texts)))
            else:
                said.extend(("agent", t) for t in texts)
                tokens = info["tokens"]
                add(
                    usage,
                    input=tokens["input"],
                    output=tokens["output"] + tokens["reasoning"],
                    thought=tokens["reasoning"],
                    cache_read=tokens["cache"]["read"],
                    cache_write=tokens["cache"]["write"],
                    cost_nanos=round(info["cost"] * 1e9),
                )
        out[sid] = (said, usage)
    db.close()
    return out


READERS: dict[str, Callable[[Path], dict[str, Conversation]]] = {
    "claude-code": claude_code,
    "codex": codex,
    "gemini": gemini,
    "qwen": qwen,
    "kimi": kimi,
    "kimi-code": kimi_code,
    "goose": goose,
    "opencode": opencode,
}


def expected(agent: str, root: Path) -> dict[str, Conversation]:
    """Each session's conversation and usage totals in ``agent``'s files under ``root``, by registry id."""
    return {f"{agent}:{native}": conversation for native, conversation in READERS[agent](root).items()}
