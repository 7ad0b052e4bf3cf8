"""What a conversation's messages become before they are kept: one rule for every way in (the proxy, the importers,
``serve`` and embedding hosts all pass through ``prepare``).

- **Readable on disk**: NUL characters and lone surrogates (which no UTF-8 file or PostgreSQL text holds) become
  U+FFFD; the rest of the text is kept as it was.
- **Bounded**: a message keeps at most ``MAX_STORED_MESSAGE_BYTES`` of UTF-8 (a tool call's text
  ``MAX_TOOL_OUTPUT_BYTES``), cut at a character boundary with a last line saying how much more there was.
- **No secrets kept**: API keys and tokens in well-known forms, and private key blocks, are masked before anything
  is stored or indexed (``mask_secrets``), unless the registry was asked to keep them (``keep_secrets``).

It also says when two messages are the same one (``fingerprint``: a message seen live and read again from the
agent's files) and which of an import's messages a session does not hold yet (``unseen``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

from events.model import Message, Role
from registry.limits import MAX_STORED_MESSAGE_BYTES, MAX_TOOL_OUTPUT_BYTES

__all__ = [
    "SECRET_KINDS",
    "counted",
    "cut",
    "fingerprint",
    "mask_secrets",
    "prepare",
    "readable",
    "unseen",
]

# Each well-known form of a secret, with what stays visible of it (its kind's prefix) so a reader still sees that
# a key was there. Ordered: the more specific prefix first (sk-ant- before sk-).
_SECRETS: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "private key",
        r"-----BEGIN (?P<pem>(?:[A-Z0-9]+ )*)PRIVATE KEY-----[\s\S]*?-----END (?P=pem)PRIVATE KEY-----",
        "",
    ),
    ("anthropic", r"\bsk-ant-[A-Za-z0-9_\-]{16,}", "sk-ant-"),
    ("openai", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", "sk-"),
    ("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "AKIA"),
    ("github", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})", "gh"),
    ("slack", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", "xox"),
    ("bearer", r"\bBearer\s+[A-Za-z0-9._~+/=\-]{12,}", "Bearer "),
)
SECRET_KINDS: Final = tuple(kind for kind, _, _ in _SECRETS)
"""The kinds of secrets ``mask_secrets`` finds."""


@functools.cache
def _pattern() -> re.Pattern[str]:
    """Every secret's pattern as one, compiled when a text first has a candidate (a process that only reads, as
    ``acp-registry list`` does, never compiles it: about 1 ms)."""
    return re.compile("|".join(f"(?P<s{n}>{pattern})" for n, (_, pattern, _) in enumerate(_SECRETS)))


_SHOWN: Final = {f"s{n}": (kind, shown) for n, (kind, _, shown) in enumerate(_SECRETS)}
_HINTS: Final = (
    "sk-",
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "Bearer",
    "PRIVATE KEY",
)


def _masked(match: re.Match[str]) -> str:
    kind, shown = _SHOWN[match.lastgroup or ""]
    if kind == "private key":
        return "[private key masked]"
    return f"{shown}[{kind} key masked]" if kind != "bearer" else "Bearer [token masked]"


def mask_secrets(text: str) -> str:
    """``text`` with every secret of a well-known form (``SECRET_KINDS``) replaced by a marker naming its kind."""
    if not any(hint in text for hint in _HINTS):  # the common case: no candidate, no regular expression run
        return text
    return _pattern().sub(_masked, text)


def readable(text: str) -> str:
    """``text`` as every store can keep it: NUL characters and lone surrogates become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def cut(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its first part that does (at a character boundary), with a
    last line saying how many bytes were left out."""
    if len(text) * 4 <= limit:  # at most 4 bytes a character: it fits without encoding it
        return text
    raw = text.encode()
    if len(raw) <= limit:
        return text
    kept = raw[:limit].decode(errors="ignore")
    return f"{kept}\n[... cut: {len(raw) - len(kept.encode()):,} more bytes]"


def prepare(messages: Iterable[Message], *, keep_secrets: bool = False) -> list[Message]:
    """``messages`` as they are kept: readable, within their bound, secrets masked (unless ``keep_secrets``).
    Empty messages are left out."""
    out = []
    for message in messages:
        limit = MAX_TOOL_OUTPUT_BYTES if message.role is Role.TOOL else MAX_STORED_MESSAGE_BYTES
        text = cut(readable(message.text), limit)
        if not keep_secrets:
            text = mask_secrets(text)
        if text.strip():
            out.append(message if text is message.text else Message(role=message.role, text=text, at=message.at))
    return out


def counted(messages: Iterable[Message]) -> int:
    """How many of ``messages`` count in a session's message count: what the user and the agent said."""
    return sum(1 for m in messages if m.role is Role.USER or m.role is Role.AGENT)


_SPACE: Final = re.compile(r"\s+")


def fingerprint(message: Message) -> bytes:
    """What makes two messages the same one, whichever way each came in (live, or read from the agent's files):
    its role and its text, with runs of white space as one space and the ends trimmed."""
    text = _SPACE.sub(" ", message.text).strip()
    return hashlib.blake2b(f"{message.role.value}\x00{text}".encode(), digest_size=12).digest()


def unseen(stored: Sequence[Message], incoming: Sequence[Message], *, answers: bool = False) -> list[Message]:
    """The messages of ``incoming`` (an import of the agent's files, in order) that a session holding ``stored``
    does not have yet.

    Turns are matched by what the user said: a turn of ``incoming`` (a user message and what follows it up to the
    next one) whose user message the session holds is the same turn - seen live, or imported before - and adds
    nothing, even if the agent's file words its tool calls otherwise than the wire did; any other turn is added
    whole. Messages before the first user message are matched one by one. Repeats count: a user who said
    "continue" three times has three turns.

    ``answers`` (a turn seen live, against what an import wrote meanwhile): a held user message that nothing
    follows - an import that read the agent's file after the prompt was written and before the answer was - is
    answered by the incoming turn: its other messages are added (the user message is not said twice).
    """
    if not stored:
        return list(incoming)
    held = Counter(fingerprint(m) for m in stored if m.role is Role.USER)
    loose = Counter(fingerprint(m) for m in stored)
    bare = Counter(_unanswered(stored)) if answers else Counter[bytes]()
    out: list[Message] = []
    started = adding = False
    for message in incoming:
        if message.role is Role.USER:
            started = True
            key = fingerprint(message)
            adding = held[key] <= 0
            held[key] -= 1
            if adding:
                out.append(message)
            elif bare[key] > 0:  # held without its answer: the answer is this turn's
                bare[key] -= 1
                adding = True
        elif started:
            if adding:
                out.append(message)
        else:
            key = fingerprint(message)
            if loose[key] > 0:
                loose[key] -= 1
            else:
                out.append(message)
    return out


def _unanswered(stored: Sequence[Message]) -> list[bytes]:
    """The fingerprints of the user messages of ``stored`` that no other message follows before the next one."""
    found = []
    for n, message in enumerate(stored):
        if message.role is Role.USER and (n + 1 == len(stored) or stored[n + 1].role is Role.USER):
            found.append(fingerprint(message))
    return found
