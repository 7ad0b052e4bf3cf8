"""Conversations kept, read back, bounded, masked and erased - through ``SessionRegistry`` on every backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import SessionUpdated
from events.model import Message, Role, Usage
from registry import SessionRegistry
from registry.conversation import SECRET_KINDS, cut, fingerprint, mask_secrets, prepare, unseen
from registry.errors import InvalidParams, SessionNotFound
from registry.limits import MAX_STORED_MESSAGE_BYTES, MAX_TOOL_OUTPUT_BYTES


def _said(*texts: str) -> list[Message]:
    return [
        Message(role=Role.USER if n % 2 == 0 else Role.AGENT, text=t, at=1_800_000_000_000_000_000 + n)
        for n, t in enumerate(texts)
    ]


def test_a_turns_messages_are_kept_in_order_and_read_back(registry: SessionRegistry) -> None:
    registry.create("/work/app", session_id="s")
    thought = Message(role=Role.THOUGHT, text="the user wants the fix")
    tool = Message(role=Role.TOOL, text="Read src/app.py (read, completed)")
    plan = Message(role=Role.PLAN, text="[completed] read the file\n[pending] fix it")
    info = registry.record_turn(
        "s",
        messages=2,
        conversation=[*_said("fix the bug")[:1], thought, tool, plan, *_said("x", "done")[1:]],
    )
    assert isinstance(info.meta, dict) and info.meta["acp-session-registry/messageCount"] == 2
    lines = registry.transcript("s").lines()
    assert [(line.role, line.text) for line in lines] == [
        ("user", "fix the bug"),
        ("thought", "the user wants the fix"),
        ("tool", "Read src/app.py (read, completed)"),
        ("plan", "[completed] read the file\n[pending] fix it"),
        ("agent", "done"),
    ]
    assert lines[0].at == "2027-01-15T08:00:00.000Z" and lines[1].at is not None  # a message without a time: the turn's
    registry.record_messages("s", _said("and the tests?", "added"))
    assert [line.text for line in registry.transcript("s").lines()][-2:] == ["and the tests?", "added"]
    meta = registry.get("s").meta
    assert isinstance(meta, dict) and meta["acp-session-registry/messageCount"] == 4
    registry.create("/work/app", session_id="empty")
    assert registry.transcript("empty").messages == []
    with pytest.raises(SessionNotFound):
        registry.transcript("nobody")


def test_a_fork_reads_its_sources_conversation_up_to_the_fork(registry: SessionRegistry) -> None:
    registry.create("/work/app", session_id="src")
    registry.record_messages("src", _said("first question", "first answer"))
    fork = registry.fork("src", "/work/app", session_id="fork").session_id
    registry.record_messages("src", _said("later, on the source only"))
    registry.record_messages(fork, _said("on the fork"))
    assert [line.text for line in registry.transcript(fork).lines()] == [
        "first question",
        "first answer",
        "on the fork",
    ]
    assert registry.search("later").hits[0].session_id == "src"
    assert [h.session_id for h in registry.search("fork").hits] == ["fork"]


def test_a_message_is_cut_at_its_bound_and_a_tool_output_at_its_own(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s")
    huge = "x" * (MAX_STORED_MESSAGE_BYTES + 5000)
    output = "é" * MAX_TOOL_OUTPUT_BYTES  # two bytes a character: twice the bound
    registry.record_messages("s", [Message(role=Role.AGENT, text=huge), Message(role=Role.TOOL, text=output)])
    kept, tool = (line.text for line in registry.transcript("s").lines())
    assert len(kept.encode()) < MAX_STORED_MESSAGE_BYTES + 100 and kept.endswith("[... cut: 5,000 more bytes]")
    assert tool.startswith("é" * 100) and f"[... cut: {MAX_TOOL_OUTPUT_BYTES:,} more bytes]" in tool


def test_text_no_store_can_hold_is_made_readable_not_refused(registry: SessionRegistry) -> None:
    registry.create("/w", session_id="s")
    registry.record_messages("s", [Message(role=Role.USER, text="a\x00b \ud800 c")])
    assert registry.transcript("s").lines()[0].text == "a\ufffdb \ufffd c"
    with pytest.raises(InvalidParams, match="not a Message"):
        registry.record_messages("s", ["plain text"])  # type: ignore[list-item]


SECRETS = {
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
    "anthropic": "sk-ant-api03-Abcdefghijklmnopqrstuvwxyz012345",
    "openai": "sk-proj-Abcdefghijklmnopqrstuvwxyz012345",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack": "xoxb-1234567890-abcdefghij",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
}


@pytest.mark.parametrize("kind", SECRET_KINDS)
def test_each_form_of_secret_is_masked_before_it_is_kept(kind: str, tmp_path: Path) -> None:
    secret = SECRETS[kind]
    text = f"here is the key: {secret} - keep it safe"
    masked = mask_secrets(text)
    assert secret not in masked and "masked]" in masked and masked.endswith("keep it safe")
    with SessionRegistry.open(f"sqlite://{tmp_path}/s.db") as registry:
        registry.create("/w", session_id="s")
        registry.record_messages("s", [Message(role=Role.USER, text=text)])
        assert secret not in registry.transcript("s").lines()[0].text
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert secret.encode() not in raw
    with SessionRegistry.open(f"sqlite://{tmp_path}/kept.db", keep_secrets=True) as registry:
        registry.create("/w", session_id="s")
        registry.record_messages("s", [Message(role=Role.USER, text=text)])
        assert registry.transcript("s").lines()[0].text == text


def test_ordinary_text_is_not_taken_for_a_secret() -> None:
    for text in ("ask-anything", "the sk- prefix", "Bearer of bad news", "ghp_", "AKIA is a prefix", "task-antler"):
        assert mask_secrets(text) == text


def test_usage_goes_with_the_turns_event() -> None:
    with SessionRegistry.open("memory://") as registry:
        registry.create("/w", session_id="s")
        used = Usage(input_tokens=10, output_tokens=5, model="m")
        registry.record_turn("s", messages=2, conversation=_said("q", "a"), usage=used)
        turn = registry.activity("s")[-1]
        assert isinstance(turn, SessionUpdated) and turn.usage == used and turn.content is not None


# -- one message, one identity ----------------------------------------------------------------------------


def test_an_import_adds_only_the_turns_a_session_does_not_hold() -> None:
    live = [*_said("fix it", "done"), Message(role=Role.TOOL, text="edit (completed)")]
    file = [
        *_said("fix it", "done"),
        Message(role=Role.TOOL, text="Edit file app.py"),  # the same turn, its tool worded otherwise
        *_said("now the tests", "added"),
    ]
    assert unseen(live, file) == file[3:]
    assert unseen(file, file) == []
    assert unseen([], file) == file
    again = [*_said("continue"), *_said("continue")]  # a user who said it twice has two turns
    assert unseen(again[:1], again) == again[1:]
    assert fingerprint(Message(role=Role.USER, text=" a \n b ")) == fingerprint(Message(role=Role.USER, text="a b"))


def test_a_prompt_held_without_its_answer_is_answered_once() -> None:
    """An import that read the prompt before the answer was written holds a user message alone: the turn that
    brings its answer adds the answer (and only where asked: a file's turn matched by its prompt adds nothing)."""
    half = _said("fix it")
    turn = [*_said("fix it", "done"), Message(role=Role.TOOL, text="edit (completed)")]
    assert unseen(half, turn, answers=True) == turn[1:]
    assert unseen(half, turn) == []
    assert unseen([*half, *_said("later")], turn, answers=True) == turn[1:]
    assert unseen(turn, turn, answers=True) == []  # answered already: nothing
    twice = [*_said("continue"), *_said("continue", "went on")]
    assert [m.text for m in unseen(twice, _said("continue", "again"), answers=True)] == ["again"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["hi", "fix", "why?", "ok", "continue"]), min_size=1, max_size=8), st.integers(0, 8))
def test_live_then_import_and_import_then_live_keep_each_message_once(words: list[str], split: int) -> None:
    turns = [_said(word, f"answer to {word}") for word in words]
    file = [m for turn in turns for m in turn]
    seen_live = [m for turn in turns[:split] for m in turn]
    stored = seen_live + unseen(seen_live, file)  # the import after the live turns
    assert sorted(fingerprint(m) for m in stored) == sorted(fingerprint(m) for m in file)
    assert unseen(stored, file) == []  # importing again adds nothing


def test_cutting_keeps_whole_characters() -> None:
    text = "ab" + "€" * 10
    shown = cut(text, 5)
    assert shown.startswith("ab€") and "more bytes" in shown
    assert cut("short", 100) == "short"
    assert prepare([Message(role=Role.USER, text="   ")]) == []
