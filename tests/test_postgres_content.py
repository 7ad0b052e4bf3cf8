"""PostgreSQL with conversations in it: an erased conversation leaves no byte of its text in the table's files,
and a process of the version before format 4 still running after the upgrade cannot write any more (the fence)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from events import Message, Role, SessionCreated, SessionDeleted, open_store
from events.postgres import PostgresStore
from events.testing_content import turn
from events.verify import verify_log
from registry import SessionRegistry
from tests.conftest import POSTGRES as SERVER
from tests.older import fenced_after_upgrade, old_writer

MARKER = "zqx-pg-marker-51c2"


@pytest.fixture
def schema(postgres_server: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _url(schema: str) -> str:
    return f"{SERVER}{'&' if '?' in SERVER else '?'}schema={schema}"


def _on_disk(schema: str, marker: bytes) -> int:
    """How many times ``marker`` is in the files of the schema's message partitions and their TOAST and indexes, as
    the server has them on disk after a checkpoint (needs a superuser, as the tests' server user is)."""
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        files = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND (c.relname LIKE 'messages%%' OR c.relname LIKE 'search_terms%%')"
            " UNION SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.reltoastrelid <> 0",
            (schema, schema),
        ).fetchall()
        found = 0
        for (path,) in files:
            if path is None:
                continue
            try:
                data = conn.execute("SELECT pg_read_binary_file(%s)", (path,)).fetchone()
            except psycopg.errors.UndefinedFile:
                continue
            found += bytes(data[0]).count(marker) if data else 0
        return found


def test_an_erased_conversation_leaves_no_byte_in_the_tables_files(schema: str) -> None:
    with open_store(_url(schema)) as store:
        assert isinstance(store, PostgresStore)
        store.append("s", [SessionCreated(cwd="/w", at=1)])
        for n in range(30):
            event, messages = turn(f"question {n}: {MARKER}", f"answer {n} " + "words " * 40, at=10 + n)
            store.append("s", [event], content=[messages])
        for n in range(30):
            event, messages = turn(f"another session {n}", at=10 + n)
            store.append(f"t{n}", [event], content=[messages])
        assert _on_disk(schema, MARKER.encode()) >= 30
        store.append("s", [SessionDeleted()])
        assert store.erase("s") == 60
        assert _on_disk(schema, MARKER.encode()) == 0
        assert len(store.messages("t7")) == 1 and verify_log(store).healthy


def test_a_users_delete_erases_the_words_from_the_search_index_too(schema: str) -> None:
    word = "zqxpgwordd4e1"  # one token: the index keeps it as it is
    with SessionRegistry.open(_url(schema)) as registry:
        for n in range(20):
            registry.create("/w", session_id=f"s{n}")
            said = f"turn {n} " + (word if n == 7 else "nothing special")
            registry.record_messages(f"s{n}", [Message(role=Role.USER, text=said)])
        assert [hit.session_id for hit in registry.search(word).hits] == ["s7"]  # indexed
        assert _on_disk(schema, word.encode()) >= 2  # the message, and its words in the index
        registry.delete("s7")
        assert _on_disk(schema, word.encode()) == 0
        assert registry.search(word).hits == [] and len(registry.search("special").hits) == 19
        assert registry.searcher.index.problems() == []


def test_the_commit_before_cannot_write_after_the_upgrade(schema: str, tmp_path: Path) -> None:
    child = old_writer(_url(schema), tmp_path)
    with open_store(_url(schema)) as store:  # this version upgrades the schema while the old one has it open
        fenced_after_upgrade(store, child)
