"""The conversations the proxy relays, recorded with what each turn used - off the relay's path.

The relay hands over what it already holds, and nothing more is decoded on its threads: a prompt's blocks (the
client's line is decoded to route it; they become the user's message here, ``registry.acp.content.blocks_text``),
a ``session/update``'s params as the bytes ``wire.peek_agent`` left undecoded (``msgspec.Raw``), a prompt answer's
result, and when a ``session/load`` begins and ends. Each is one append to an inbox, and the updates of one read
from the agent one call. The recorder's thread decodes them and puts the turn together (``registry.proxy.assembly``)
when it writes the turn, after the answer was relayed (``answered`` returns what it calls); the capture's own
thread does it as the inbox grows only in a flood, a slice at a time, so that what is held stays small.

What is recorded: each turn as one ``record_turn`` - the user's prompt, then what the agent streamed until it answered
(its messages, thoughts, tool calls, plan) - with its ``Usage``; and on ``session/load``, the past the agent replays,
for a session the registry holds no message of yet (``registry.proxy.turn_usage.record_replay``; one that has messages
keeps them: a replay would repeat them). What an agent streams outside a turn or a load is not a message of either and
is not kept (a ``usage_update`` then still counts: it is the session's cost so far).

Bounded in bytes: the inbox, the turns being put together and the turns waiting for the recorder are counted
against ``MAX_CAPTURE_BYTES`` in one place (``Capture._admit``). Over it, the text of the oldest turn waiting to be
written is dropped first (its count and usage are still recorded), then new updates are not kept; both are said on
stderr, and never slow the relay.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Callable
from time import time_ns
from typing import Any, Final

import msgspec

from events.codec import now_ns
from events.model import Role
from registry.acp.content import blocks_text
from registry.conversation import cut
from registry.limits import MAX_CAPTURE_BYTES, MAX_STORED_MESSAGE_BYTES
from registry.proxy.assembly import Said, Turn, model_of, text_bytes, tokens_of

__all__ = ["Capture"]

log = logging.getLogger("acp_registry.proxy")

_ITEM_BYTES: Final = 128  # what an inbox entry costs beside the bytes it refers to
_WAKE_BYTES: Final = 1 << 20  # the capture's thread reads the inbox when it holds this much...
_WAKE_ITEMS: Final = 8192  # ...or this many entries
_BATCH: Final = 512  # entries the recorder's thread reads at a time (every update of them decoded by one call)
_SLICE: Final = 32  # entries the capture's thread reads before it lets the relay's threads have the interpreter
_REMEMBERED: Final = 10_000  # sessions whose last usage figures are remembered

_PROMPT, _UPDATE, _ANSWERED, _LOAD, _LOADED = range(5)
_Item = tuple[int, Any, Any, int, int, int]  # kind, its two values, when the relay saw it, bytes held, ticket


class _Update(msgspec.Struct, rename="camel"):
    session_update: str
    content: Any = None
    message_id: Any = None
    tool_call_id: Any = None
    title: Any = None
    kind: Any = None
    status: Any = None
    entries: Any = None
    used: Any = None
    size: Any = None
    cost: Any = None
    meta: Any = msgspec.field(default=None, name="_meta")


class _Params(msgspec.Struct, rename="camel"):
    session_id: str
    update: _Update


_params: Final = msgspec.json.Decoder(_Params)
_params_list: Final = msgspec.json.Decoder(list[_Params])


def _decoded_batch(batch: list[_Item]) -> list[tuple[_Params | None, _Item]]:
    """Each entry of ``batch`` with its update's params decoded (None: not an update, or not one that can be read):
    every update of the batch decoded by one call, unless one of them needs a closer look."""
    raws = [item[1] for item in batch if item[0] == _UPDATE]
    try:
        decoded = iter(_params_list.decode(b"[" + b",".join(raws) + b"]"))
    except msgspec.DecodeError:
        return [(_decoded(item[1], _Params) if item[0] == _UPDATE else None, item) for item in batch]
    return [(next(decoded) if item[0] == _UPDATE else None, item) for item in batch]


def _decoded(raw: bytes | msgspec.Raw, shape: type[Any] = object) -> Any:
    """``raw`` decoded (as ``shape``), whatever an agent put in it: bytes that are not UTF-8 (which the relay passes
    on, as it passes any string it does not read) become U+FFFD; None when it is not that shape."""
    try:
        return _params.decode(raw) if shape is _Params else msgspec.json.decode(raw)
    except msgspec.DecodeError:
        pass
    try:
        return msgspec.convert(json.loads(bytes(raw).decode("utf-8", "replace")), shape)
    except (ValueError, RecursionError, msgspec.ValidationError):
        return None


class Capture:
    """What one proxy holds of the conversations it relays until the recorder writes them."""

    def __init__(self, *, budget: int = MAX_CAPTURE_BYTES) -> None:
        self._budget = budget
        self._wake_bytes = min(_WAKE_BYTES, budget // 8)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._draining = threading.Lock()
        self._inbox: collections.deque[_Item] = collections.deque()
        self._inbox_bytes = 0
        self.held = 0
        """Bytes held now: the inbox, the turns being put together and those waiting for the recorder."""
        self._queued = 0  # entries put in the inbox so far; an entry's number is its ticket
        self._read = 0  # entries read so far
        self._finished: dict[int, Said] = {}
        self._turns: dict[str, Turn] = {}
        self._loads: dict[str, Turn] = {}
        self._cost: dict[str, tuple[str, int]] = {}
        self._tokens: dict[str, tuple[int, int, int, int, int]] = {}
        self.dropped = 0
        """Bytes not kept for the bound: updates refused, and the text of waiting turns let go."""
        self._refusals = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="acp-registry-proxy-capture", daemon=True)
        self._thread.start()

    # -- the relay's side: one append each ---------------------------------------------------------

    def prompt(self, native: str, blocks: Any) -> None:
        """A prompt went to the agent (the client's thread): a turn of ``native`` begins with what the user said."""
        text = blocks_text(blocks) if isinstance(blocks, list) else ""
        if len(text) > MAX_STORED_MESSAGE_BYTES:
            text = cut(text, MAX_STORED_MESSAGE_BYTES)
        self._put(_PROMPT, native, text, text_bytes(text))

    def updates(self, said: list[msgspec.Raw]) -> None:
        """The ``session/update``s of one read from the agent, their params as the relay peeked at them (the agent's
        thread): one append each, under one lock."""
        at = time_ns()
        with self._lock:
            budget, inbox = self._budget, self._inbox
            for params in said:
                size = len(params) + _ITEM_BYTES
                if self.held + size <= budget:
                    self.held += size
                elif not self._admit(size):
                    self._refused(size - _ITEM_BYTES)
                    continue
                self._queued += 1
                inbox.append((_UPDATE, params, None, at, size, self._queued))
                self._inbox_bytes += size
            if self._inbox_bytes >= self._wake_bytes or len(inbox) >= _WAKE_ITEMS:
                self._wake.notify()  # a flood: read it now, a slice at a time

    def answered(self, native: str, result: msgspec.Raw | None) -> Callable[[], Said | None]:
        """The agent answered ``native``'s prompt (``result``, or None for an error): the turn ends here. Returns
        what the recorder calls for the turn - the same turn however often it is called (a retried write)."""
        return self._taker(self._put(_ANSWERED, native, result, 0 if result is None else len(result)))

    def load(self, native: str) -> None:
        """A ``session/load`` of ``native`` went to the agent: what it streams until it answers is its past."""
        self._put(_LOAD, native, None, 0)

    def loaded(self, native: str, ok: bool) -> Callable[[], Said | None]:
        """The agent answered the load (``ok``: with a result): what the recorder calls for the replayed past."""
        return self._taker(self._put(_LOADED, native, ok, 0))

    def _put(self, kind: int, a: Any, b: Any, size: int) -> int:
        size += _ITEM_BYTES
        with self._lock:
            if not self._admit(size):
                self._refused(size - _ITEM_BYTES)
                if kind == _UPDATE:
                    return self._queued
                # The marks that begin and end turns and loads are always kept (nothing else makes sense without
                # them), without what they carry: a prompt's text, an answer's usage.
                b = "" if kind == _PROMPT else None if kind == _ANSWERED else b
                size = _ITEM_BYTES
                self.held += size
            self._queued += 1
            self._inbox.append((kind, a, b, now_ns(), size, self._queued))
            self._inbox_bytes += size
            if self._inbox_bytes >= self._wake_bytes or len(self._inbox) >= _WAKE_ITEMS:
                self._wake.notify()
            return self._queued

    @property
    def unread(self) -> int:
        """Bytes of the inbox not read yet (the capture's thread reads it from ``min(1 MiB, budget / 8)`` on)."""
        with self._lock:
            return self._inbox_bytes

    # -- the account ---------------------------------------------------------------------------------

    def _admit(self, size: int) -> bool:
        """Whether ``size`` more bytes may be held (negative: bytes let go), within the budget; the lock is held.
        The one place that counts what the capture holds: the text of the oldest turns waiting for the recorder
        makes room first."""
        if size <= 0 or self.held + size <= self._budget:
            self.held += size
            return True
        for ticket, said in self._finished.items():
            if said.held:
                self._finished[ticket] = Said([], said.reading, 0)
                self.held -= said.held
                self.dropped += said.held
                self._refused(0)
                if self.held + size <= self._budget:
                    self.held += size
                    return True
        return False

    def _refused(self, size: int) -> None:
        self.dropped += max(0, size)
        self._refusals += 1
        if self._refusals == 1 or self._refusals % 1000 == 0:
            log.error(
                "the conversation held for the recorder reached %d MiB (the store is slow or locked): "
                "text is dropped (%d times so far)",
                self._budget >> 20,
                self._refusals,
            )

    def _take(self, size: int) -> bool:
        with self._lock:
            return self._admit(size)

    # -- reading the inbox (the capture's thread, or the recorder's) --------------------------------

    def _taker(self, ticket: int) -> Callable[[], Said | None]:
        box: list[Said | None] = []

        def take() -> Said | None:
            if not box:
                self._drain(until=ticket)
                with self._lock:
                    said = self._finished.pop(ticket, None)
                    if said is not None:
                        self.held -= said.held
                box.append(said)
            return box[0]

        return take

    def _run(self) -> None:
        """Read the inbox when it has grown to ``_WAKE_BYTES`` or ``_WAKE_ITEMS`` (a flood: a slice at a time, the
        relay's threads going first in between). A turn of the usual size is read by the recorder's thread when it
        writes the turn, after the answer was relayed: this thread never wakes for it."""
        while True:
            with self._wake:
                while not self._closed and self._inbox_bytes < self._wake_bytes and len(self._inbox) < _WAKE_ITEMS:
                    self._wake.wait()
                if self._closed:
                    return
            self._drain(pause=True)

    def _drain(self, until: int | None = None, *, pause: bool = False) -> None:
        """Read the inbox (up to entry ``until``) in batches; ``pause``: let the relay's threads have the interpreter
        between batches (else a thread that waits for it waits for the switch interval)."""
        with self._draining:
            while True:
                with self._lock:
                    if not self._inbox or (until is not None and self._read >= until):
                        return
                    batch = [self._inbox.popleft() for _ in range(min(_SLICE if pause else _BATCH, len(self._inbox)))]
                    self._read += len(batch)
                    size = sum(item[4] for item in batch)
                    self._inbox_bytes -= size
                for decoded, item in _decoded_batch(batch):
                    try:
                        if decoded is not None:  # most of what comes in: kept to a few steps
                            self._updated(decoded, item[3])
                        elif item[0] != _UPDATE:
                            self._apply(item)
                    except Exception:  # a bug: this entry is lost, the conversation and the others are not
                        log.exception("a relayed message could not be captured")
                with self._lock:
                    self.held -= size
                if pause:
                    time.sleep(0)

    def _updated(self, params: _Params, at: int) -> None:
        native = params.session_id
        turn = self._turns.get(native) or self._loads.get(native)
        if turn is not None:
            turn.update(params.update, at)
        elif params.update.session_update == "usage_update":  # between turns: the session's cost so far
            reading = Turn(self._take)
            reading.read_usage(params.update)
            if reading.cost is not None:
                _remember(self._cost, native, reading.cost)

    def _apply(self, item: _Item) -> None:
        kind, a, b, at, _, ticket = item
        if kind == _PROMPT:
            self._let_go(self._turns.pop(a, None))
            turn = self._turns[a] = Turn(self._take, cost_before=self._cost.get(a), tokens_before=self._tokens.get(a))
            turn.said(Role.USER, b, at)
        elif kind == _ANSWERED:
            self._answered(a, b, ticket)
        elif kind == _LOAD:
            self._let_go(self._loads.pop(a, None))
            self._loads[a] = Turn(self._take, replay=True)
        else:
            past = self._loads.pop(a, None)
            if past is not None and past.cost is not None:
                _remember(self._cost, a, past.cost)  # the session's cost so far, as the agent keeps it
            if past is not None and b:
                self._finish(ticket, past.finish())
            else:
                self._let_go(past)

    def _answered(self, native: str, result: msgspec.Raw | None, ticket: int) -> None:
        turn = self._turns.pop(native, None)
        answer = _decoded(result) if result is not None else None
        answer = answer if isinstance(answer, dict) else {}
        tokens, model = tokens_of(answer.get("usage")), model_of(answer.get("_meta"))
        if turn is None:  # its prompt was not seen (the proxy started mid-turn)
            turn = Turn(self._take, cost_before=self._cost.get(native), tokens_before=self._tokens.get(native))
        said = turn.finish(tokens, model)
        if said.reading.cost is not None:
            _remember(self._cost, native, said.reading.cost)
        if tokens is not None:
            _remember(self._tokens, native, tokens)
        self._finish(ticket, said)

    def _finish(self, ticket: int, said: Said) -> None:
        with self._lock:
            self._finished[ticket] = said

    def _let_go(self, turn: Turn | None) -> None:
        if turn is not None:
            turn.let_go()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the capture's thread (what it has not read, the recorder reads when it writes the turns)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout)


def _remember(seen: dict[str, Any], native: str, value: Any) -> None:
    seen.pop(native, None)
    seen[native] = value
    while len(seen) > _REMEMBERED:
        del seen[next(iter(seen))]
