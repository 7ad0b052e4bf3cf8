"""The SQLite search index at the size where it splits into shards: a rebuild that spans several transactions holds
every kept message once, finds the first and the last, and ``verify`` finds nothing wrong; and the shortcut of
``indexed`` for text without mixed-case words gives what the word-by-word split gives."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from events import AppendRequest, SessionCreated, SqliteStore
from events.content import content_ref
from events.model import Event, Message, Role, SessionUpdated
from registry import SessionRegistry
from registry.search import query
from registry.search.index import SHARD_FROM, SHARDS, SqliteSearchIndex


def _split_word_by_word(text: str) -> str:
    """``indexed`` as it reads every word (what its shortcut must agree with)."""
    parts: list[str] = []
    for word in query._TOKEN.findall(text):
        if not word.islower() and not word.isupper() and not word.isdigit() and word[1:] != word[1:].lower():
            humps = query._PART.findall(word)
            if len(humps) > 1:
                parts += humps
    return text if not parts else f"{text}\n{' '.join(parts)}"


@given(st.text(alphabet="aAbZz09_ .-/\néÉ", max_size=40))
def test_the_shortcut_for_text_without_mixed_case_words_changes_nothing(text: str) -> None:
    assert query.indexed(text) == _split_word_by_word(text)


def test_a_rebuild_past_the_shard_size_holds_every_message_once(tmp_path: Path) -> None:
    total = SHARD_FROM + 12_000  # over a rebuild's transaction (50,000 messages): two of them
    sessions, per = total // 60, 60
    with SqliteStore(tmp_path / "s.db", synchronous="off") as store:
        requests = []
        for n in range(sessions):
            said = [
                Message(role=Role.USER if k % 2 == 0 else Role.AGENT, text=f"message {k} of session{n} said", at=k + 1)
                for k in range(per)
            ]
            events: list[Event] = [
                SessionCreated(cwd="/w", at=1),
                SessionUpdated(at=per + 1, messages=per, content=content_ref(said)),
            ]
            requests.append(AppendRequest(f"s{n}", events, content=[None, said]))
            if len(requests) == 100:
                store.append_batch(requests)
                requests.clear()
        store.append_batch(requests)
        index = SqliteSearchIndex(store, store.connect)
        try:
            assert index.rebuild() == sessions * per
            assert index.problems() == []
            db = store.connect()
            tables = db.execute("SELECT count(*) FROM sqlite_master WHERE name GLOB 'search_[0-9]*_data'").fetchone()
            db.close()
            assert tables[0] == SHARDS
        finally:
            index.close()
        with SessionRegistry(store, follow=False) as registry:
            for n in (0, sessions - 1):
                hits = registry.search(f"session{n}", limit=5).hits
                assert [h.session_id for h in hits] == [f"s{n}"]
