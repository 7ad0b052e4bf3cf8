"""A turn's conversation put together from what the agent streams (``session/update``), within bounds.

ACP v1 streams a message as chunks that carry no message id: consecutive chunks of one kind are one message (a
chunk naming a ``messageId`` other than the open message's starts another). A tool call is a ``tool_call`` and its
``tool_call_update``s: one message per tool call id, where it first appeared, holding its latest title, kind,
status and content (an update's content replaces the content before it, as ACP says). A plan is ``plan`` updates
that each replace the whole plan: one message per turn, its latest entries with their status. A
``usage_update`` is a reading, not a message (``Reading``).

Bounded as it streams in, so that a hostile agent cannot make the proxy hold more than it keeps: a message holds at
most the bytes the registry keeps of it (``MAX_STORED_MESSAGE_BYTES``, a tool call's ``MAX_TOOL_OUTPUT_BYTES``);
beyond that its text is only counted, for the cut marker (the same marker ``registry.conversation.cut`` writes); a
turn holds at most ``MAX_TURN_MESSAGES`` messages, and every byte it holds is taken from a ``Budget`` that says no
when the proxy holds ``MAX_CAPTURE_BYTES`` already (then the text is counted as cut, the message as left out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from events.model import Message, Role
from registry.acp.content import block_text
from registry.limits import MAX_STORED_MESSAGE_BYTES, MAX_TOOL_OUTPUT_BYTES, MAX_TURN_MESSAGES

__all__ = ["MESSAGE_BYTES", "Reading", "Said", "Take", "Turn", "model_of", "text_bytes", "tokens_of"]

MESSAGE_BYTES: Final = 256
"""What a message costs beside its text while it is put together (its objects), as the budget counts it."""
_NAMED: Final = 4096  # characters kept of a tool call's title, kind or status, or of a plan entry
_CHUNKS: Final = {"agent_message_chunk": Role.AGENT, "agent_thought_chunk": Role.THOUGHT}

Take = Callable[[int], bool]
"""The budget: whether ``n`` more bytes may be held (and if so, they are counted as held; negative: let go)."""
_SLICE: Final = 64 * 1024  # bytes a turn takes from the budget at a time, so that a chunk rarely asks it


def text_bytes(text: str) -> int:
    """What ``text`` costs in memory, as the budget counts it: a character a byte when it is ASCII (CPython keeps
    it so), else four (the most a character takes in any of CPython's string forms)."""
    return len(text) if text.isascii() else 4 * len(text)


def _utf8(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class Reading(NamedTuple):
    """What the agent said of usage during a turn, as it said it: the last ``usage_update``'s context figures and
    cumulative cost, the prompt answer's token report (``None``: none) and the model, where one was named."""

    context_used: int | None = None
    context_size: int | None = None
    cost: tuple[str, int] | None = None  # (currency, cumulative nanos) as the agent reported it
    tokens: tuple[int, int, int, int, int] | None = None  # input, output, cached read, cached write, thought
    model: str | None = None
    cost_before: tuple[str, int] | None = None  # the last cost seen before the turn on this connection
    tokens_before: tuple[int, int, int, int, int] | None = None  # the last token report before it


class Said(NamedTuple):
    """A turn as the proxy saw it: its messages in order, what it used (``Reading``), and the bytes it holds."""

    messages: list[Message]
    reading: Reading
    held: int


class _Text:
    """A message's text as it streams in: pieces kept up to ``limit`` characters (at least ``limit`` UTF-8 bytes:
    enough to cut it where the registry would), the rest only counted."""

    __slots__ = ("kept", "limit", "over", "pieces")

    def __init__(self, limit: int) -> None:
        self.pieces: list[str] = []
        self.kept = 0
        self.over = 0
        self.limit = limit

    def add(self, text: str, hold: Take) -> int:
        """Keep ``text`` (or count it, beyond the limit or the budget); the bytes it holds now."""
        if self.kept < self.limit:
            held = len(text) if text.isascii() else 4 * len(text)
            if hold(held):
                self.pieces.append(text)
                self.kept += len(text)
                return held
        self.over += len(text) if text.isascii() else _utf8(text)
        return 0

    def ends_in_space(self) -> bool:
        return not self.pieces or self.pieces[-1][-1:].isspace()

    def text(self) -> str:
        whole = "".join(self.pieces) if len(self.pieces) != 1 else self.pieces[0]
        if not self.over:
            return whole
        raw = whole.encode("utf-8", "surrogatepass")
        kept = raw[: max(0, self.limit - 64)].decode("utf-8", "ignore")  # room for the marker within the limit
        return f"{kept}\n[... cut: {len(raw) + self.over - len(kept.encode('utf-8', 'surrogatepass')):,} more bytes]"


class _Chunks:
    __slots__ = ("after_marker", "at", "message_id", "role", "text")

    def __init__(self, role: Role, message_id: Any, at: int) -> None:
        self.after_marker = False
        self.role = role
        self.message_id = message_id
        self.at = at
        self.text = _Text(MAX_STORED_MESSAGE_BYTES)

    def message(self) -> Message:
        return Message(role=self.role, text=self.text.text(), at=self.at)


class _Tool:
    __slots__ = ("at", "content", "held", "kind", "status", "title")

    def __init__(self, at: int) -> None:
        self.at = at
        self.title = self.kind = self.status = ""
        self.content = _Text(MAX_TOOL_OUTPUT_BYTES)
        self.held = 0

    def message(self) -> Message:
        shown = ", ".join(part for part in (self.kind, self.status) if part)
        head = f"{self.title} [{shown}]" if shown else self.title
        body = self.content.text()
        return Message(role=Role.TOOL, text=f"{head}\n{body}" if head and body else head or body, at=self.at)


class _Plan:
    __slots__ = ("at", "held", "text")

    def __init__(self, at: int) -> None:
        self.at = at
        self.text = ""
        self.held = 0

    def message(self) -> Message:
        return Message(role=Role.PLAN, text=self.text, at=self.at)


_Part = _Chunks | _Tool | _Plan


class Turn:
    """One turn (or one replayed past) being put together; ``take`` is the budget its bytes come from."""

    def __init__(
        self,
        take: Take,
        *,
        replay: bool = False,
        cost_before: tuple[str, int] | None = None,
        tokens_before: tuple[int, int, int, int, int] | None = None,
    ) -> None:
        self._take = take
        self.replay = replay
        self._before = cost_before, tokens_before
        self.parts: list[_Part] = []
        self.held = 0
        self._reserve = 0  # bytes taken from the budget and not used yet
        self.left_out = 0  # messages over MAX_TURN_MESSAGES or the budget
        self._open: _Chunks | None = None
        self._tools: dict[str, _Tool] = {}
        self._plan: _Plan | None = None
        self.context: tuple[int, int] | None = None
        self.cost: tuple[str, int] | None = None
        self.model: str | None = None

    def _hold(self, size: int) -> bool:
        """Count ``size`` more bytes as this turn's (negative: let go), from its reserve, which is taken from the
        budget a slice at a time."""
        if size > self._reserve:
            want = max(size - self._reserve, _SLICE)
            if not self._take(want):
                want = size - self._reserve
                if not self._take(want):
                    return False
            self._reserve += want
        self._reserve -= size
        self.held += size
        return True

    def let_go(self) -> None:
        """What the turn holds goes back to the budget (it is written, or dropped)."""
        self._take(-(self.held + self._reserve))
        self.held = self._reserve = 0

    def _start(self, part: _Part) -> bool:
        if len(self.parts) >= MAX_TURN_MESSAGES or not self._hold(MESSAGE_BYTES):
            self.left_out += 1
            return False
        self.parts.append(part)
        return True

    def said(self, role: Role, text: str, at: int) -> None:
        """A whole message (the user's prompt)."""
        self._open = None
        part = _Chunks(role, None, at)
        if self._start(part):
            part.text.add(text, self._hold)

    def update(self, update: Any, at: int) -> None:
        """One ``session/update``'s ``update``, as the capture decoded it."""
        kind = update.session_update
        role = _CHUNKS.get(kind)
        if role is None and kind == "user_message_chunk" and self.replay:  # in a turn, the prompt says it
            role = Role.USER
        if role is not None:
            self._chunk(role, update.content, update.message_id, at)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update, at)
        elif kind == "plan":
            self._planned(update.entries, at)
        elif kind == "usage_update":
            self.read_usage(update)

    def _chunk(self, role: Role, content: Any, message_id: Any, at: int) -> None:
        if type(content) is dict and content.get("type") == "text":  # the common case, first
            text = content.get("text")
            if type(text) is not str or not text:
                return
            marker = False
        else:
            text = block_text(content)
            if not text:
                return
            marker = True
        part = self._open
        if part is None or part.role is not role or (message_id is not None and message_id != part.message_id):
            part = _Chunks(role, message_id, at)
            self._open = part if self._start(part) else None
            if self._open is None:
                return
        elif (marker or part.after_marker) and not text[:1].isspace() and not part.text.ends_in_space():
            text = " " + text  # a marker inside a message stands apart from the words around it
        part.after_marker = marker
        part.text.add(text, self._hold)

    def _tool(self, update: Any, at: int) -> None:
        key = update.tool_call_id
        if not isinstance(key, str):
            return
        tool = self._tools.get(key)
        if tool is None:
            tool = _Tool(at)
            if not self._start(tool):
                return
            self._open = None
            self._tools[key] = tool
        for name in ("title", "kind", "status"):
            value = getattr(update, name)
            if isinstance(value, str):
                setattr(tool, name, value[:_NAMED])
        if isinstance(update.content, list):
            self._hold(-tool.held)
            tool.content = _Text(MAX_TOOL_OUTPUT_BYTES)
            tool.held = 0
            for n, item in enumerate(update.content):
                text = _tool_content(item)
                if text:
                    tool.held += tool.content.add(text if n == 0 else f"\n{text}", self._hold)

    def _planned(self, entries: Any, at: int) -> None:
        if not isinstance(entries, list):
            return
        plan = self._plan
        if plan is None:
            plan = _Plan(at)
            if not self._start(plan):
                return
            self._open = None
            self._plan = plan
        lines = []
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("content"), str):
                status = entry.get("status")
                mark = f"[{status[:64]}] " if isinstance(status, str) and status else ""
                lines.append(f"{mark}{entry['content'][:_NAMED]}")
        text = "\n".join(lines)
        held = text_bytes(text)
        self._hold(-plan.held)
        if self._hold(held):
            plan.text, plan.held = text, held
        else:
            plan.text, plan.held = f"[a plan of {len(lines)} entries, not kept: over the capture bound]", 0

    def read_usage(self, update: Any) -> None:
        """A ``usage_update``: the context as it is now, and the session's cumulative cost."""
        used, size = _count(update.used), _count(update.size)
        if used is not None and size is not None:
            self.context = (used, size)
        cost = update.cost
        if isinstance(cost, dict):
            nanos = _nanos(cost.get("amount"))
            currency = cost.get("currency")
            if nanos is not None and isinstance(currency, str) and 0 < len(currency) <= 16:
                self.cost = (currency, nanos)
        self.model = model_of(update.meta) or self.model

    def finish(self, tokens: tuple[int, int, int, int, int] | None = None, model: str | None = None) -> Said:
        """The turn as it is kept: its messages in order (a last line says how many were left out). A replayed
        past's messages have no time: the agent said them before, and ACP does not say when."""
        messages = [part.message() for part in self.parts]
        if self.replay:
            messages = [Message(role=m.role, text=m.text) for m in messages]
        if self.left_out and messages:
            last = messages[-1]
            note = f"\n[... {self.left_out:,} more messages of this turn not kept: over the capture bound]"
            messages[-1] = Message(role=last.role, text=last.text + note, at=last.at)
        used, size = self.context if self.context is not None else (None, None)
        reading = Reading(used, size, self.cost, tokens, model or self.model, *self._before)
        self._take(-self._reserve)  # what it holds now is the finished turn's
        self._reserve = 0
        return Said(messages, reading, self.held)


def _tool_content(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    kind = item.get("type")
    if kind == "content":
        return block_text(item.get("content"))
    if kind == "diff":  # what the file says now, under its path: a diff's old text is the past
        parts = (item.get("path"), item.get("newText"))
        return "\n".join(part for part in parts if isinstance(part, str) and part)
    if kind == "terminal":
        terminal = item.get("terminalId")
        return f"[terminal: {terminal[:_NAMED]}]" if isinstance(terminal, str) else "[terminal]"
    return ""


_MAX_COUNT: Final = 1 << 62  # far beyond any real figure, well within a signed 64-bit column


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_COUNT:
        return value
    return None


def _nanos(amount: Any) -> int | None:
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        return None
    if not 0 <= amount < _MAX_COUNT / 1e9:  # NaN fails this too
        return None
    return round(amount * 1_000_000_000)


def tokens_of(usage: Any) -> tuple[int, int, int, int, int] | None:
    """A prompt answer's ``usage`` as (input, output, cached read, cached write, thought) tokens; None when it is
    not one (input and output tokens are required; the rest default to 0)."""
    if not isinstance(usage, dict):
        return None
    needed = _count(usage.get("inputTokens")), _count(usage.get("outputTokens"))
    if needed[0] is None or needed[1] is None:
        return None
    rest = [_count(usage.get(key)) or 0 for key in ("cachedReadTokens", "cachedWriteTokens", "thoughtTokens")]
    return needed[0], needed[1], rest[0], rest[1], rest[2]


def model_of(meta: Any) -> str | None:
    """The model an update or answer names in its ``_meta`` (ACP has no field for it; agents use a key of their
    own that ends in ``model``: claude-agent-acp's ``_claude/model``)."""
    if not isinstance(meta, dict):
        return None
    for key, value in meta.items():
        if isinstance(key, str) and (key == "model" or key.endswith("/model")) and isinstance(value, str) and value:
            return value[:200]
    return None
