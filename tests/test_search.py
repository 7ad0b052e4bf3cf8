"""Finding sessions by what was said in them: the query language, ranking, filters, pages, erasure, and the same
answers on every backend, live across processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from events.model import Message, Role
from registry import SessionRegistry
from registry.errors import InvalidCursor, InvalidParams
from registry.limits import MAX_QUERY_BYTES
from registry.search.query import indexed, parse

HOUR = 3_600_000_000_000
T0 = 1_800_000_000_000_000_000


def _session(
    registry: SessionRegistry, sid: str, *texts: str, at: int = T0, cwd: str = "/work/app", agent: str | None = None
) -> None:
    registry.create(cwd, session_id=sid, agent=agent, at=at)
    messages = [Message(role=Role.USER if n % 2 == 0 else Role.AGENT, text=t, at=at + n) for n, t in enumerate(texts)]
    registry.record_messages(sid, messages, at=at + len(texts))


def _found(registry: SessionRegistry, query: str, **filters: object) -> list[str]:
    return [hit.session_id for hit in registry.search(query, **filters).hits]  # type: ignore[arg-type]


def test_words_phrases_prefixes_and_code_shaped_terms_match_as_a_developer_expects(registry: SessionRegistry) -> None:
    _session(
        registry, "auth", "Why does login_handler raise KeyError in src/auth/login.py?", "Check SessionRegistry.get"
    )
    _session(registry, "parse", "write a tokenizer for the parser", "here: parse_tokens() in lexer.rs", at=T0 + HOUR)
    _session(registry, "trace", 'Traceback: File "app.py", line 3, in main\nValueError: bad value', at=T0 + 2 * HOUR)
    assert _found(registry, "login") == ["auth"]
    assert _found(registry, "LOGIN keyerror") == ["auth"]  # every word, any case
    assert _found(registry, "login_handler") == ["auth"]
    assert _found(registry, "src/auth/login.py") == ["auth"]
    assert _found(registry, "SessionRegistry.get") == ["auth"]
    assert _found(registry, "SessionRegistry") == ["auth"]
    assert _found(registry, "registry") == ["auth"]  # a part of a CamelCase word
    assert _found(registry, '"bad value"') == ["trace"]
    assert _found(registry, '"value bad"') == []  # a phrase keeps its order
    assert _found(registry, "pars*") == ["parse"]
    assert _found(registry, "parse_tokens") == ["parse"]
    assert _found(registry, "ValueError") == ["trace"]
    assert _found(registry, "login parser") == []  # all words must match in one message
    assert set(_found(registry, "in")) == {"auth", "parse", "trace"}


def test_each_hit_names_its_session_and_marks_the_passages_that_matched(registry: SessionRegistry) -> None:
    _session(registry, "codex:abc-123", "the flaky test in ci.yml", "retry it twice", agent="codex")
    registry.change_info("codex:abc-123", title="Flaky CI")
    [hit] = registry.search("flaky").hits
    assert (hit.session_id, hit.agent, hit.cwd, hit.title) == ("abc-123", "codex", "/work/app", "Flaky CI")
    assert hit.updated_at is not None and hit.updated_at.endswith("Z")
    assert [(s.role, s.text) for s in hit.snippets] == [("user", "the **flaky** test in ci.yml")]
    long = "word " * 200 + "needle in the middle " + "word " * 200
    _session(registry, "long", long, at=T0 + HOUR)
    [snippet] = registry.search("needle").hits[0].snippets
    assert "**needle**" in snippet.text and snippet.text.startswith("…") and snippet.text.endswith("…")
    assert len(snippet.text) < 260


def test_relevance_first_then_the_newest(registry: SessionRegistry) -> None:
    _session(registry, "old", "the migration failed", at=T0)
    _session(registry, "new", "the migration failed", at=T0 + HOUR)
    _session(registry, "weak", "we spoke about many other things today " * 12 + "and the migration", at=T0 + 2 * HOUR)
    assert _found(registry, "migration") == ["new", "old", "weak"]


def test_filters_combine_with_the_query(registry: SessionRegistry) -> None:
    _session(registry, "codex:1", "deploy the service", cwd="/work/a", agent="codex", at=T0)
    _session(registry, "claude-code:2", "deploy the service", cwd="/work/b", agent="claude-code", at=T0 + HOUR)
    _session(registry, "3", "deploy the service", cwd="/work/a", at=T0 + 2 * HOUR)
    registry.archive("3")
    assert _found(registry, "deploy") == ["2", "1"]
    assert _found(registry, "deploy", agent="codex") == ["1"]
    assert _found(registry, "deploy", agent="codex-acp") == ["1"]  # a name the agent goes by
    assert _found(registry, "deploy", cwd="/work/a") == ["1"]
    assert _found(registry, "deploy", archived="include") == ["3", "2", "1"]
    assert _found(registry, "deploy", archived="only") == ["3"]
    assert _found(registry, "deploy", since=T0 + HOUR // 2) == ["2"]
    assert _found(registry, "deploy", until="2027-01-15T08:30:00Z") == ["1"]
    with pytest.raises(InvalidParams, match="archived"):
        registry.search("deploy", archived="sometimes")


def test_pages_of_hits_follow_their_cursor_and_nothing_else(registry: SessionRegistry) -> None:
    for n in range(7):
        _session(registry, f"s{n}", f"release notes {n}", at=T0 + n * HOUR)
    page = registry.search("release", limit=3)
    seen = [h.session_id for h in page.hits]
    while page.next_cursor is not None:
        page = registry.search("release", limit=3, cursor=page.next_cursor)
        seen += [h.session_id for h in page.hits]
    assert seen == [f"s{n}" for n in reversed(range(7))]
    first = registry.search("release", limit=3)
    assert first.next_cursor is not None
    _session(registry, "later", "release notes later", at=T0 + 99 * HOUR)  # a walk is as of its first page
    assert "later" not in [h.session_id for h in registry.search("release", limit=3, cursor=first.next_cursor).hits]
    with pytest.raises(InvalidCursor, match="query"):
        registry.search("notes", limit=3, cursor=first.next_cursor)
    with pytest.raises(InvalidCursor, match="query"):
        registry.search("release", limit=3, cursor=first.next_cursor, agent="codex")
    with pytest.raises(InvalidCursor):
        registry.search("release", cursor=first.next_cursor[:-2] + "AA")
    with pytest.raises(InvalidCursor):
        registry.search("release", cursor="not a cursor at all")


def test_hostile_queries_get_one_clear_error_or_a_bounded_answer(registry: SessionRegistry) -> None:
    _session(registry, "s", "NEAR OR AND NOT are words too")
    for query, why in (
        ("x" * (MAX_QUERY_BYTES + 1), "bytes long"),
        ("*** () ^ : -", "no words"),
        ("", "no words"),
        ("a*", "prefix needs"),
        (" ".join(f"w{n}" for n in range(40)), "at most"),
    ):
        with pytest.raises(InvalidParams, match=why):
            registry.search(query)
    with pytest.raises(InvalidParams):
        registry.search(42)  # type: ignore[arg-type]
    assert _found(registry, "OR") == ["s"] and _found(registry, "NEAR AND") == ["s"]
    assert _found(registry, '"unclosed phrase') == []
    assert _found(registry, "(near)") == ["s"]
    with pytest.raises(InvalidParams, match="limit"):
        registry.search("s", limit=0)


def test_a_deleted_session_is_not_found_and_an_archived_one_only_when_asked(registry: SessionRegistry) -> None:
    _session(registry, "gone", "the secret recipe")
    _session(registry, "kept", "the secret sauce")
    registry.delete("gone")
    assert _found(registry, "secret") == ["kept"]
    assert _found(registry, "recipe") == []
    assert registry.transcript("gone").messages == []


def test_queries_and_the_index_agree_on_what_a_word_is() -> None:
    assert parse("foo.bar*").fts5() == '"foo bar" *'
    assert parse('say "hello world" now').fts5() == '"say" "hello world" "now"'
    assert parse("OR").tsquery() == "'or'"
    assert parse("snake_case file.py*").tsquery() == "('snake' <-> 'case') & ('file' <-> 'py':*)"
    assert (
        indexed("use SessionRegistry and HTTPServer")
        == "use SessionRegistry and HTTPServer\nSession Registry HTTP Server"
    )
    assert indexed("plain words only") == "plain words only"
    assert parse("Café").terms[0].words == ("cafe",)


_RECORDER = """
import sys
from events.model import Message, Role
from registry import SessionRegistry
with SessionRegistry.open(sys.argv[1]) as r:
    r.create("/w", session_id="other-process")
    print("ready", flush=True)
    sys.stdin.readline()
    r.record_messages("other-process", [Message(role=Role.USER, text="quetzalcoatl appears")])
    print("said", flush=True)
    sys.stdin.readline()
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.idle  # a second from the write to the search in another process: a bound a busy machine may pass
def test_a_message_recorded_in_another_process_is_found_within_a_second(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite://{tmp_path}/s.db"
    else:
        made: Callable[[], str] = request.getfixturevalue("postgres_schemas")
        url = made()
    with SessionRegistry.open(url) as registry:
        child = subprocess.Popen(
            [sys.executable, "-c", _RECORDER, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None and child.stdin is not None
        try:
            assert child.stdout.readline().strip() == "ready"
            assert registry.search("quetzalcoatl").hits == []
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "said"
            said = time.monotonic()
            hits = registry.search("quetzalcoatl").hits
            assert [h.session_id for h in hits] == ["other-process"]
            assert time.monotonic() - said < 1.0
        finally:
            child.stdin.write("\n")
            child.stdin.flush()
            child.wait(timeout=60)


def test_an_erased_word_leaves_the_sqlite_index_files_too(tmp_path: Path) -> None:
    word = "zqxsqlitewordb7"  # one token: the index keeps it as a term of its own
    with SessionRegistry.open(f"sqlite://{tmp_path}/s.db") as registry:
        for n in range(30):
            _session(registry, f"s{n}", f"turn {n} " + (word if n == 7 else "nothing special"), at=T0 + n)
        assert _found(registry, word) == ["s7"]
        raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
        assert raw.count(word.encode()) >= 2  # the message, and the index's term
        registry.delete("s7")
        raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
        assert word.encode() not in raw
        assert _found(registry, word) == [] and len(_found(registry, "special", limit=50)) == 29
        assert registry.searcher.index.problems() == []
