"""The store contract's tests of the messages kept beside the log: kept with their event in one transaction, read
back in order, refused when they do not match their event's reference, written once on a retry, erased for good
after a delete, and a changed, removed or planted message found by ``verify``."""

from __future__ import annotations

import uuid

import pytest

from events.content import COMPRESS_FROM, content_ref, encode_body
from events.model import Message, Role, SessionCreated, SessionDeleted, SessionUpdated
from events.store import AppendRequest, EventStore
from events.verify import verify_log

__all__ = ["ContentContract", "turn"]


def turn(*texts: str, at: int = 10) -> tuple[SessionUpdated, list[Message]]:
    """An activity that keeps ``texts`` as alternating user and agent messages, with its messages."""
    messages = [
        Message(role=Role.USER if n % 2 == 0 else Role.AGENT, text=text, at=at + n) for n, text in enumerate(texts)
    ]
    return SessionUpdated(at=at + len(texts), messages=len(texts), content=content_ref(messages)), messages


class ContentContract:
    """What a store promises about the messages it keeps (mixed into ``events.testing.StoreContract``)."""

    def tamper(self, store: EventStore, statement: str, params: tuple[object, ...] = ()) -> None:
        pytest.skip(f"{type(store).__name__} cannot be edited from outside")

    def test_messages_are_kept_with_their_event_and_read_back_in_order(self, store: EventStore) -> None:
        long = "a long answer, " * (COMPRESS_FROM // 8)
        store.append("s", [SessionCreated(cwd="/w", at=1)])
        first, one = turn("hi", "hello there")
        second, two = turn("and now?", long, "é ✓ 🙂", at=20)
        p1 = store.append("s", [first], content=[one])[0]
        p2 = store.append("s", [second, SessionUpdated(at=30)], content=[two, None])[0]
        store.append("other", [SessionCreated(cwd="/w", at=1)])
        kept = store.messages("s")
        assert [m.message for m in kept] == one + two
        assert [(m.position, m.seq) for m in kept] == [(p1, 0), (p1, 1), (p2, 0), (p2, 1), (p2, 2)]
        assert {m.session_id for m in kept} == {"s"}
        assert [m.message for m in store.messages("s", until=p1)] == one
        assert store.messages("other") == [] and store.messages("nobody") == []
        found = store.messages_at([(p2, 1), (p1, 0), (p2, 9), (999, 0)])
        assert sorted(found) == [(p1, 0), (p2, 1)] and found[p2, 1].message.text == long
        record = store.read_stream("s")[1].event
        assert isinstance(record, SessionUpdated) and record.content == content_ref(one)
        report = verify_log(store)
        assert report.healthy and report.messages == 5, report.problems

    def test_messages_that_do_not_match_their_event_are_refused(self, store: EventStore) -> None:
        event, messages = turn("hi", "there")
        with pytest.raises(ValueError, match="does not match"):
            store.append("s", [event], content=[messages[:1]])
        with pytest.raises(ValueError, match="no content was given"):
            store.append("s", [event])
        with pytest.raises(ValueError, match="does not refer to any"):
            store.append("s", [SessionUpdated(at=1)], content=[messages])
        with pytest.raises(ValueError, match="entries for 1 events"):
            store.append("s", [event], content=[messages, None])
        with pytest.raises(ValueError, match="NUL"):
            bad = [Message(role=Role.USER, text="a\x00b")]
            store.append("s", [SessionUpdated(at=1, content=content_ref(bad))], content=[bad])
        with pytest.raises(TypeError, match="not a Message"):
            store.append("s", [event], content=[["hi", "there"]])  # type: ignore[list-item]
        assert store.head() == 0 and store.messages("s") == []

    def test_a_retry_keeps_its_messages_once(self, store: EventStore) -> None:
        event, messages = turn("once", "only")
        ids = [uuid.uuid4()]
        first = store.append("s", [event], event_ids=ids, content=[messages])
        assert store.append("s", [event], event_ids=ids, content=[messages]) == first
        assert [m.message for m in store.messages("s")] == messages
        [(position, _, _)] = {(m.position, 0, 0) for m in store.messages("s")}
        assert position == first[0]

    def test_a_batch_keeps_each_sessions_messages(self, store: EventStore) -> None:
        a, ma = turn("for a")
        b, mb = turn("for b", "answer b")
        positions = store.append_batch(
            [
                AppendRequest("a", [SessionCreated(cwd="/w", at=1), a], content=[None, ma]),
                AppendRequest("b", [b], content=[mb]),
                AppendRequest("c", [SessionUpdated(at=2)]),
            ]
        )
        assert [m.message for m in store.messages("a")] == ma and [m.message for m in store.messages("b")] == mb
        assert store.messages("a")[0].position == positions[0][1]
        with pytest.raises(ValueError, match=r"requests\[0\]\.events\[0\] refers to messages"):
            store.append_batch([AppendRequest("d", [a])])

    def test_erasing_a_deleted_session_takes_its_messages_and_keeps_the_log_whole(self, store: EventStore) -> None:
        event, messages = turn("secret plans", "noted")
        other, kept = turn("keep me")
        store.append("s", [SessionCreated(cwd="/w", at=1), event], content=[None, messages])
        store.append("t", [other], content=[kept])
        with pytest.raises(ValueError, match="not deleted"):
            store.erase("s")
        store.append("s", [SessionDeleted()])
        assert store.erase("s") == 2
        assert store.messages("s") == [] and store.erase("s") == 0
        assert [m.message for m in store.messages("t")] == kept
        report = verify_log(store)
        assert report.healthy and report.erased == 1 and report.messages == 1, report.problems
        record = store.read_stream("s")[1].event
        assert isinstance(record, SessionUpdated) and record.content == content_ref(messages)

    def test_verify_finds_a_changed_a_removed_and_a_planted_message(self, store: EventStore) -> None:
        changed = store.append("a", [turn("one", "two")[0]], content=[turn("one", "two")[1]])[0]
        removed = store.append("b", [turn("three")[0]], content=[turn("three")[1]])[0]
        plain = store.append("c", [SessionUpdated(at=5)])[0]
        self.tamper(store, "UPDATE messages SET body = ? WHERE position = ? AND seq = 1", (encode_body("tow"), changed))
        self.tamper(store, "DELETE FROM messages WHERE position = ?", (removed,))
        self.tamper(
            store,
            "INSERT INTO messages (position, seq, stream, role, at, body) SELECT ?, 0, stream, 'user', 1, ?"
            " FROM events WHERE position = ?",
            (plain, encode_body("planted"), plain),
        )
        problems = {p.position: p.problem for p in verify_log(store).problems}
        assert sorted(problems) == [changed, removed, plain], problems
        assert "do not match the digest" in problems[changed]
        assert "missing" in problems[removed] and "planted" in problems[plain]
