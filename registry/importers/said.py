"""What a parser reads of a conversation: the messages of a session's records, in order, and the usage the agent
reported among them - one shape for every agent, which the importer turns into a session's turns
(``registry.importers.turns``).

- ``Said``: what one read of a session's file said - messages (``events.Message``: role, text, time or None),
  and usage, each placed after the messages read before it (the turn that used it). ``fresh`` when the read
  began at the session's start (a first read, or a file rewritten), not where the last pass stopped.
- A tool call is one ``Role.TOOL`` message: the tool's name, a one-line summary of its input, then what it gave
  back (``tool_text``; ``registry.conversation.prepare`` bounds it). A parser holds a call (``Call``) until its
  result is read, so the call and its result are one message, in the call's place among the replies
  (``hold_call``, ``say_result``; ``say_unanswered`` at a new prompt, for the calls whose results never came).
- Token counts are ``events.Usage``, whose five counts are disjoint (``events.model.Usage``): a parser passes
  ``usage`` every token the model produced as ``output_tokens`` - its reasoning included - and the part of that
  the source names as reasoning as ``thought``, and ``usage`` keeps the reasoning in ``thought_tokens`` alone
  (``output_tokens`` the rest); ``input_tokens`` is the input not read from or written to a cache,
  ``cached_read_tokens`` / ``cached_write_tokens`` those. A cost only where the agent's file states one (``cost``
  in ``currency``), never estimated.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import msgspec

from events.model import Message, Role, Usage
from registry.usage import with_tokens

__all__ = [
    "MAX_PENDING_CALLS",
    "Call",
    "Said",
    "add_usage",
    "anchor",
    "arguments_summary",
    "hold_call",
    "result_text",
    "say_result",
    "say_unanswered",
    "tool_text",
    "usage",
]

MAX_PENDING_CALLS: Final = 64
"""Tool calls a parser holds while their results are awaited (older ones are said without a result)."""
SUMMARY_CHARS: Final = 200
"""Characters of a tool call's input summary."""
_INPUT_KEYS: Final = (
    "command",
    "cmd",
    "file_path",
    "filePath",
    "path",
    "absolute_path",
    "pattern",
    "query",
    "url",
    "description",
    "prompt",
)


class Said:
    """What one read of a session's file said: ``messages`` in order and ``usage``, each ``(n, at, usage)``: after
    the first ``n`` messages, at ``at`` (epoch ns, None: unknown). ``fresh``: the read began at the session's
    start, so it restates everything an earlier pass read."""

    __slots__ = ("fresh", "messages", "usage")

    def __init__(self, *, fresh: bool) -> None:
        self.fresh = fresh
        self.messages: list[Message] = []
        self.usage: list[tuple[int, int | None, Usage]] = []

    def say(self, role: Role, text: object, at: int | None) -> None:
        """A message (blank text says nothing)."""
        if isinstance(text, str) and text.strip():
            self.messages.append(Message(role=role, text=text, at=at))

    def used(self, spent: Usage | None, at: int | None) -> None:
        """Usage the agent reported here (None: nothing to count)."""
        if spent is not None:
            self.usage.append((len(self.messages), at, spent))

    def beside(self, other: Said) -> None:
        """Take the usage of a file kept beside the session's (a subagent's transcript), each placed after the
        messages said at or before its time (at the end when it has none)."""
        for _, at, spent in other.usage:
            self.usage.append((anchor(self.messages, at), at, spent))
        self.usage.sort(key=lambda item: item[0])

    def __bool__(self) -> bool:
        return bool(self.messages or self.usage)


def anchor(messages: list[Message], at: int | None) -> int:
    """How many of ``messages`` were said at or before ``at`` (all of them for an unknown time)."""
    if at is None:
        return len(messages)
    return sum(1 for m in messages if m.at is None or m.at <= at)


class Call(msgspec.Struct, array_like=True, frozen=True):
    """A tool call whose result is awaited: its name, its input's summary, and when it was made."""

    name: str
    summary: str
    at: int | None


_Say = Callable[[Role, object, int | None], None]
"""Where a parser says a message (``FileSource.say``)."""


def _as_is(summary: str) -> str:
    return summary


def hold_call(
    calls: dict[str, Call], key: str, call: Call, say: _Say, *, summary: Callable[[str], str] = _as_is
) -> None:
    """Hold ``call`` under ``key`` until its result is read; beyond ``MAX_PENDING_CALLS`` held, the oldest is said
    without one. ``summary`` makes a held call's ``summary`` the one said (a parser that holds raw arguments)."""
    if len(calls) >= MAX_PENDING_CALLS:
        oldest = calls.pop(next(iter(calls)))
        say(Role.TOOL, tool_text(oldest.name, summary(oldest.summary)), oldest.at)
    calls[key] = call


def say_result(
    calls: dict[str, Call],
    key: object,
    result: str,
    at: int | None,
    say: _Say,
    *,
    name: object = "tool",
    summary: Callable[[str], str] = _as_is,
) -> None:
    """The held call ``key`` names, said with its ``result`` as one tool message at the call's time; a result whose
    call is not held is said alone, as ``name``'s, at its own time ``at``."""
    call = calls.pop(key, None) if isinstance(key, str) else None
    if call is None:
        say(Role.TOOL, tool_text(name, "", result), at)
    else:
        say(Role.TOOL, tool_text(call.name, summary(call.summary), result), call.at)


def say_unanswered(calls: dict[str, Call], say: _Say, *, summary: Callable[[str], str] = _as_is) -> None:
    """Say the held calls whose results never came (an interrupted turn), each without one, and forget them."""
    for call in calls.values():
        say(Role.TOOL, tool_text(call.name, summary(call.summary)), call.at)
    calls.clear()


def tool_text(name: object, summary: str = "", result: str = "") -> str:
    """A tool call as one message: its name and input on the first line, what it gave back after."""
    head = f"{name if isinstance(name, str) and name else 'tool'} {summary}".rstrip()
    return f"{head}\n{result}" if result.strip() else head


def arguments_summary(arguments: object) -> str:
    """A tool call's input on one line: the value of its telling argument (a command, a path, a pattern...), else
    its JSON, cut at ``SUMMARY_CHARS``. Arguments a model sends as a JSON string are read as JSON first."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):
            arguments = json.loads(arguments)
    if isinstance(arguments, Mapping):
        for key in _INPUT_KEYS:
            value = arguments.get(key)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = " ".join(value)
            if isinstance(value, str) and value.strip():
                return _one_line(value)
    if arguments is None or arguments == {} or arguments == "":
        return ""
    if isinstance(arguments, str):
        return _one_line(arguments)
    try:
        return _one_line(json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str))
    except (TypeError, ValueError, RecursionError):
        return ""


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


def result_text(content: object, depth: int = 0) -> str:
    """The text of what a tool gave back, as agents write it: a string, a list of content parts (text parts read,
    an image said as ``[image]``), or an object whose ``output``/``content``/``text``/``result`` holds it."""
    if depth > 4:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = (result_text(part, depth + 1) for part in content)
        return "\n".join(t for t in texts if t)
    if isinstance(content, Mapping):
        kind = content.get("type")
        if kind in ("image", "image_url", "input_image"):
            return "[image]"
        for key in ("text", "output", "content", "result", "llmContent", "returnDisplay", "message", "error"):
            if key in content:
                text = result_text(content[key], depth + 1)
                if text:
                    return text
    return ""


def usage(
    *,
    input_tokens: object = 0,
    output_tokens: object = 0,
    cached_read: object = 0,
    cached_write: object = 0,
    thought: object = 0,
    cost: object = None,
    currency: str = "USD",
    model: object = None,
    context_used: object = None,
    context_size: object = None,
) -> Usage | None:
    """``Usage`` from an agent's figures (anything not a non-negative number is 0; ``cost`` a number of
    ``currency``); None when it reports nothing - no tokens and no cost."""
    tokens = [_count(v) for v in (input_tokens, output_tokens, cached_read, cached_write, thought)]
    tokens[1] = max(0, tokens[1] - tokens[4])  # the reasoning counted once, in thought_tokens (disjoint counts)
    nanos = None
    if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1_000_000_000:
        nanos = round(cost * 1_000_000_000)  # NaN fails the comparison; infinity is out of the range
    if not any(tokens) and not nanos:
        return None
    return with_tokens(
        tokens,
        cost_nanos=nanos,
        currency=currency if nanos is not None else None,
        model=model if isinstance(model, str) and model else None,
        context_used=_count(context_used) or None,
        context_size=_count(context_size) or None,
    )


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, min(int(value), 1 << 53))


def add_usage(items: Iterable[Usage]) -> Usage | None:
    """The sum of ``items`` (a cost where any has one; the model and context of the first and last that name
    them); None for none."""
    total: Usage | None = None
    for item in items:
        if total is None:
            total = item
            continue
        cost = total.cost_nanos
        if item.cost_nanos is not None:
            cost = item.cost_nanos + (cost or 0)
        total = Usage(
            input_tokens=total.input_tokens + item.input_tokens,
            output_tokens=total.output_tokens + item.output_tokens,
            cached_read_tokens=total.cached_read_tokens + item.cached_read_tokens,
            cached_write_tokens=total.cached_write_tokens + item.cached_write_tokens,
            thought_tokens=total.thought_tokens + item.thought_tokens,
            cost_nanos=cost,
            currency=total.currency or item.currency,
            model=total.model or item.model,
            context_used=item.context_used if item.context_used is not None else total.context_used,
            context_size=item.context_size if item.context_size is not None else total.context_size,
        )
    return total
