"""What an import adds to a session's conversation: the turns read from the agent's files that the registry does
not hold yet, with the usage that goes with them, cut into the events that keep them.

**One message, one copy.** A turn is a user message and what follows it up to the next one. What a pass read
(``Said``) is compared with what the session holds (``registry.conversation.unseen``: turns matched by their
user message), so a turn a proxy recorded live and the same turn read from the file are one turn, and reading a
file again from its start (a lost import state, a rewritten file) adds nothing. A pass that continues where the
last one stopped is compared as if the whole file had been read: the user messages read before (``Thread.users``,
kept as short fingerprints) are taken out of what the session holds first, so a "continue" typed again is a new
turn, not the old one; and the messages that continue the turn under way follow that turn - added when the import
added it (``Thread.ours``), not when a proxy did.

**Usage goes with its turn**: counted when the import adds the turn that used it, not when the turn was held
already - one turn, one count, in either order. A source whose usage comes before any message of a pass (a token
count after the reply was read) gives it to the turn under way.

**Events**: the added turns become ``SessionUpdated`` events with their messages (``content``) and usage, one per
run of turns of one UTC day, one model and one currency, at most ``MAX_GROUP_MESSAGES`` messages or about
``MAX_GROUP_CHARS`` of text each (a session's whole history is not one event), each at its turns' time (never
moving ``updatedAt`` back); the message count the import brings goes with them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Final, NamedTuple

import msgspec

from events.content import content_ref
from events.model import ContentRef, Message, Role, SessionUpdated, Usage
from registry.conversation import counted, fingerprint, prepare, unseen
from registry.importers.said import Said, add_usage

__all__ = ["MAX_GROUP_CHARS", "MAX_GROUP_MESSAGES", "Group", "Thread", "Turns", "activity", "added", "digest"]

MAX_GROUP_MESSAGES: Final = 1000
"""Messages one imported event keeps at most."""
MAX_GROUP_CHARS: Final = 4 << 20
"""Characters of text one imported event keeps at about most (a single larger message is one event of its own)."""
_FINGERPRINT: Final = 8
_DAY: Final = 86_400 * 1_000_000_000
_USER: Final = Role.USER  # looked up once: an enum member's lookup is an attribute call each time


class Thread(msgspec.Struct, array_like=True):
    """What the importer remembers of a session's file between passes: the fingerprints of the user messages read
    from it so far, whether the turn under way was added by the import (None: no turn read yet), and how many
    messages the import added after that turn's user message (``tail``: a proxy that answered the turn since adds
    more, and the turn is then the proxy's)."""

    users: bytes = b""
    ours: bool | None = None
    tail: int = 0


class Group(NamedTuple):
    """Turns kept by one event: their messages (and the reference the event keeps them by), the usage they
    reported, and when the last of them was said."""

    messages: list[Message]
    ref: ContentRef | None
    usage: Usage | None
    at: int | None


class Turns(NamedTuple):
    groups: list[Group]
    thread: Thread


def added(stored: Sequence[Message], thread: Thread | None, said: Said, *, keep_secrets: bool = False) -> Turns:
    """What ``said`` adds to a session holding ``stored`` (its messages as kept), given what earlier passes read of
    the same file (``thread``; ignored when ``said`` is fresh): the added turns in groups, and the thread after."""
    messages, anchors = _prepared(said, keep_secrets)
    base = thread if thread is not None and not said.fresh else Thread()
    users = base.users + b"".join(fingerprint(m)[:_FINGERPRINT] for m in messages if m.role is _USER)
    if not stored:  # nothing held (a first import): every turn is added, with all its usage
        ours = True if any(m.role is _USER for m in messages) else base.ours
        return Turns(_groups(messages, anchors), Thread(users=users, ours=ours, tail=_tail(messages, base)))
    if base.ours and _answered_since(stored, base):
        base = Thread(users=base.users, ours=False)  # a proxy answered the turn under way: the rest is its
    read = Counter(base.users[i : i + _FINGERPRINT] for i in range(0, len(base.users), _FINGERPRINT))
    held: list[Message] = []
    for message in stored:
        if message.role is _USER:
            key = fingerprint(message)[:_FINGERPRINT]
            if read[key] > 0:  # a turn an earlier pass read from this file: not one a proxy recorded
                read[key] -= 1
                continue
        held.append(message)
    first = next((i for i, m in enumerate(messages) if m.role is _USER), len(messages))
    if base.ours is None:
        kept = unseen(held, messages, answers=True)
    else:
        kept = (messages[:first] if base.ours else []) + unseen(held, messages[first:], answers=True)
    taken = {id(m) for m in kept}
    prefix_ours = base.ours if base.ours is not None else (not stored or any(id(m) in taken for m in messages[:first]))
    turn = [0] * len(messages)  # which turn each message is in (0: the one under way when the pass began)
    counted_turns = {0} if prefix_ours else set()
    number = 0
    for i, message in enumerate(messages):
        number += message.role is _USER
        if number and id(message) in taken:  # a turn added, or the answer of one held without it
            counted_turns.add(number)
        turn[i] = number
    before = [0]  # added messages among the first n
    for message in messages:
        before.append(before[-1] + (id(message) in taken))
    usage = [(before[n], spent) for n, spent in anchors if (turn[n - 1] if n else 0) in counted_turns]
    ours = (number in counted_turns) if number else base.ours
    return Turns(_groups(kept, usage), Thread(users=users, ours=ours, tail=_tail(kept, base) if ours else 0))


def _tail(kept: Sequence[Message], base: Thread) -> int:
    """The messages the import added after the user message of the turn under way, once ``kept`` is added."""
    last = next((n for n in range(len(kept) - 1, -1, -1) if kept[n].role is _USER), None)
    return base.tail + len(kept) if last is None else len(kept) - last - 1


def _answered_since(stored: Sequence[Message], base: Thread) -> bool:
    """Whether the session holds more messages after the user message of the turn under way than the import added
    there: a proxy recorded the turn's answer (``registry.conversation.unseen(answers=True)``) after the import
    read only its prompt."""
    key = base.users[-_FINGERPRINT:]
    for n in range(len(stored) - 1, -1, -1):
        if stored[n].role is _USER:
            if fingerprint(stored[n])[:_FINGERPRINT] != key:
                return False
            return len(stored) - n - 1 > base.tail
    return False


def _prepared(said: Said, keep_secrets: bool) -> tuple[list[Message], list[tuple[int, Usage]]]:
    """The said messages as they are kept (``prepare``), and each usage's place among them."""
    messages = prepare(said.messages, keep_secrets=keep_secrets)
    anchors = [(n, spent) for n, _, spent in said.usage]
    if len(messages) == len(said.messages):
        return messages, anchors
    # A message left out (blank once made readable): count the places again, one message at a time.
    kept: list[Message] = []
    place = [0]
    for message in said.messages:
        kept.extend(prepare([message], keep_secrets=keep_secrets))
        place.append(len(kept))
    return kept, [(place[n], spent) for n, spent in anchors]


def _groups(kept: list[Message], usage: list[tuple[int, Usage]]) -> list[Group]:
    """The added turns (and the usage after the first n messages) cut into events' groups: a turn joins the group
    unless its day, or the model or currency it used, differ from the group's, or the group would be too large."""
    starts = [i for i, m in enumerate(kept) if m.role is _USER and i]
    bounds = [0, *starts, len(kept)]
    groups: list[Group] = []
    messages: list[Message] = []
    spent: list[Usage] = []
    key: list[object] = [None, None, None]  # day, model, currency
    chars = 0
    place = 0
    for n in range(len(bounds) - 1):
        begin, end = bounds[n], bounds[n + 1]
        turn = kept[begin:end]
        last = n == len(bounds) - 2
        used = []
        while place < len(usage) and (last or usage[place][0] <= end):
            used.append(usage[place][1])
            place += 1
        size = sum(len(m.text) for m in turn)
        when = next((m.at // _DAY for m in turn if m.at is not None), None)
        model = next((u.model for u in used if u.model is not None), None)
        currency = next((u.currency for u in used if u.currency is not None), None)
        fits = len(messages) + len(turn) <= MAX_GROUP_MESSAGES and chars + size <= MAX_GROUP_CHARS
        same = all(a is None or b is None or a == b for a, b in zip(key, (when, model, currency), strict=True))
        if (messages or spent) and not (fits and same):
            groups.append(_group(messages, spent))
            messages, spent, key, chars = [], [], [None, None, None], 0
        if len(turn) > MAX_GROUP_MESSAGES or size > MAX_GROUP_CHARS:
            *parts, turn = _chunks(turn)
            groups.extend(_group(part, []) for part in parts)
            size = sum(len(m.text) for m in turn)
        messages.extend(turn)
        spent.extend(used)
        key = [a if a is not None else b for a, b in zip(key, (when, model, currency), strict=True)]
        chars += size
    spent.extend(item for _, item in usage[place:])
    if messages or spent:
        groups.append(_group(messages, spent))
    return groups


def _chunks(messages: list[Message]) -> list[list[Message]]:
    """A turn too large for one event, in parts."""
    parts: list[list[Message]] = [[]]
    chars = 0
    for message in messages:
        if parts[-1] and (len(parts[-1]) >= MAX_GROUP_MESSAGES or chars + len(message.text) > MAX_GROUP_CHARS):
            parts.append([])
            chars = 0
        parts[-1].append(message)
        chars += len(message.text)
    return parts


def _group(messages: list[Message], usage: list[Usage]) -> Group:
    at = max((m.at for m in messages if m.at is not None), default=None)
    return Group(messages, content_ref(messages) if messages else None, add_usage(usage), at)


def activity(
    groups: Sequence[Group], *, grown: int, last: int, floor: int | None
) -> list[tuple[SessionUpdated, list[Message] | None]]:
    """The activity events of an import: one per group (its messages and usage, at its time - never before
    ``floor``, the session's activity so far, nor after ``last``), the message count the import brings (``grown``)
    spread over them, the last one at ``last``; without groups, one event when the count grows or ``last`` is
    newer than ``floor``. Each with the messages it keeps."""
    out: list[tuple[SessionUpdated, list[Message] | None]] = []
    running = floor if floor is not None else 0
    remaining = grown
    for n, group in enumerate(groups):
        final = n == len(groups) - 1
        at = max(running, last if final or group.at is None else min(group.at, last))
        share = remaining if final else min(counted(group.messages), remaining)
        remaining -= share
        running = at
        event = SessionUpdated(at=at, messages=share, content=group.ref, usage=group.usage)
        out.append((event, group.messages or None))
    if not groups and (grown or floor is None or last > floor):
        out.append((SessionUpdated(at=max(last, running), messages=grown), None))
    return out


def digest(groups: Sequence[Group]) -> bytes:
    """What tells two imports' groups apart (part of their events' ids)."""
    h = hashlib.sha256()
    for group in groups:
        h.update(group.ref.digest if group.ref is not None else b"-")
        h.update(msgspec.msgpack.encode(group.usage))
    return h.digest()[:16]
