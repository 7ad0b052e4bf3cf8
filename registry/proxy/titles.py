"""Which session titles the client hears, and from whom: the title policy, apart from the byte relay.

Three voices title a session: the user (``session/set_title`` on this connection, or elsewhere: another window,
``acp-registry title``), the agent (its ``session_info_update``), and the proxy (after a turn, from the prompt,
for a session that has no title: ``registry.commands.prompt_title``). The rules:

- the user's title wins: once a session has one, an agent's title update is recorded as the agent's but not
  relayed as the session's title - the rest of that update still passes (without its ``title``);
- the proxy's title reaches the client only while the agent has not titled the session itself, and an agent's
  later update that repeats it reaches the client without its ``title`` (nothing at all when that was all it
  said): a title is pushed once after a prompt's answer (claude-agent-acp titles a session by its first prompt too,
  with its ``updatedAt``, a moment after the answer);
- everything else the agent says passes as its own bytes.

Memory is bounded: the policy remembers at most ``REMEMBERED`` sessions per rule (the oldest are forgotten).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

import msgspec

from registry.diffs import SessionInfoUpdate, SessionNotification, encode_session_update

__all__ = ["REMEMBERED", "TitlePolicy"]

REMEMBERED: Final = 10_000

K = TypeVar("K")
V = TypeVar("V")


class _Bounded(Generic[K, V]):
    """A dict that forgets its oldest keys beyond ``REMEMBERED``."""

    def __init__(self) -> None:
        self._items: collections.OrderedDict[K, V] = collections.OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > REMEMBERED:
            self._items.popitem(last=False)

    def pop(self, key: K, default: Any = None) -> Any:
        return self._items.pop(key, default)


_NOT_PUSHED: Final = object()


class TitlePolicy:
    """Decides, per title, what the client hears; thread-safe (the agent's reader, the recorder and the change
    stream's thread all ask)."""

    def __init__(self, send_client: Callable[[bytes], object]) -> None:
        self._send_client = send_client
        self._lock = threading.Lock()
        self._agent_titled: _Bounded[str, None] = _Bounded()
        self._user_titled: _Bounded[str, None] = _Bounded()
        self._pushed: _Bounded[str, str | None] = _Bounded()

    def user_titled(self, native: str) -> None:
        """The session has a user's title (set here or elsewhere, or found on it when it was opened)."""
        with self._lock:
            self._user_titled.put(native, None)

    def agent_update(self, line: bytes, native: str, title: str | None, *, alone: bool) -> bytes | None:
        """The line to relay for an agent's ``session_info_update`` that sets ``title`` (None: relay nothing)."""
        with self._lock:
            self._agent_titled.put(native, None)
            pushed = self._pushed.pop(native, _NOT_PUSHED)
            if native in self._user_titled or pushed == title:  # the user's title wins; the client has this one
                return None if alone else _without_title(line)
        return line

    def push(self, native: str, title: str) -> bool:
        """The proxy's own title for a session, sent to the client unless the agent or the user titled it (checked
        and sent under the lock the agent's reader takes, so the client never hears the proxy after the agent)."""
        with self._lock:
            if native in self._agent_titled or native in self._user_titled:
                return False
            update = SessionNotification(native, SessionInfoUpdate(title=title))
            self._send_client(encode_session_update(update))
            self._pushed.put(native, title)
            return True

    def told(self, native: str) -> bool:
        """Whether the client has heard a title for the session from the agent or the proxy."""
        with self._lock:
            return native in self._agent_titled or native in self._pushed


def _without_title(line: bytes) -> bytes | None:
    """An agent's ``session/update`` line without its update's ``title`` (None when it cannot be read)."""
    try:
        message = msgspec.json.decode(line)
        message["params"]["update"].pop("title")
    except (msgspec.DecodeError, KeyError, TypeError, AttributeError):
        return None
    return msgspec.json.encode(message)
