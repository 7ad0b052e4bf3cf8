"""The proxy's line reading: whole lines from a real pipe, in order, bounded, whatever the chunking."""

from __future__ import annotations

import os
import threading

import pytest

from registry.acp.jsonrpc import OverlongLine
from registry.agents import IMPORTED, agent_name, command_name, native_id, split_id, stored_id
from registry.proxy.lines import LineReader, LineWriter


def _read_all(chunks: list[bytes], limit: int) -> list[bytes | OverlongLine]:
    read, write = os.pipe()

    def feed() -> None:
        for chunk in chunks:
            os.write(write, chunk)
        os.close(write)

    thread = threading.Thread(target=feed)
    thread.start()
    lines = [line for batch in LineReader(read, limit).batches() for line in batch]
    thread.join()
    os.close(read)
    return lines


def _shown(lines: list[bytes | OverlongLine]) -> list[object]:
    return [(line.head[:4], line.size) if isinstance(line, OverlongLine) else line for line in lines]


@pytest.mark.parametrize("split", [1, 3, 7, 1000])
def test_lines_come_out_whole_and_in_order_however_the_bytes_arrive(split: int) -> None:
    data = b"one\ntwo\n\nthree-is-longer\n" + b"x" * 40 + b"\nlast"
    chunks = [data[i : i + split] for i in range(0, len(data), split)]
    assert _shown(_read_all(chunks, 16)) == [b"one", b"two", b"", b"three-is-longer", (b"xxxx", 40), b"last"]


def test_an_overlong_line_is_skipped_to_its_newline_across_reads_and_never_held() -> None:
    chunks = [b"ok\n" + b"y" * 10, b"y" * 300_000, b"y" * 5 + b"\nafter\n"]
    assert _shown(_read_all(chunks, 100)) == [b"ok", (b"yyyy", 300_015), b"after"]


def test_an_overlong_last_line_without_a_newline_is_still_reported() -> None:
    assert _shown(_read_all([b"a\n", b"z" * 500], 100)) == [b"a", (b"zzzz", 500)]


def test_the_writer_writes_batches_whole_and_says_when_the_reader_has_gone() -> None:
    read, write = os.pipe()
    writer = LineWriter(write)
    assert writer.write([b"a", b"b"])
    assert os.read(read, 100) == b"a\nb\n"
    os.close(read)
    assert not writer.write([b"c"])
    writer.close()


def test_a_name_no_agent_is_known_by_is_made_a_plain_one() -> None:
    """The names known agents go by: ``tests/test_proxy_names.py``."""
    assert agent_name("My Agent!") == "my-agent"
    assert agent_name("") == "agent"


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["python3", "script.py"], "script"),
        (["/usr/bin/python3.12", "-u", "/srv/agents/my_agent.py", "--flag"], "my_agent"),
        (["node", "dist/index.js"], "index"),
        (["npx", "-y", "@zed-industries/codex-acp"], "codex"),
        (["uvx", "fast-agent-acp", "--model", "passthrough"], "fast-agent"),
        (["sh", "-c", "exec claude-agent-acp --verbose"], "claude-code"),
        (["/opt/bin/claude-code-acp"], "claude-code"),
        (["env", "FOO=1", "bunx", "opencode-ai", "acp"], "opencode"),
    ],
)
def test_an_interpreter_or_launcher_is_never_the_agents_name(command: list[str], name: str) -> None:
    assert command_name(command) == name


def test_the_stored_id_format_is_one_function_and_reads_back() -> None:
    assert stored_id("codex", "019a-x") == "codex:019a-x"
    assert stored_id("example-agent", "0", 3) == "example-agent~3:0"
    assert split_id("example-agent~3:0") == ("example-agent", 3, "0")
    assert split_id("codex:a:b") == ("codex", 1, "a:b")  # the first colon ends the agent's part
    assert native_id("codex", "codex~2:x") == "x" and native_id("codex", "gemini:x") is None
    assert split_id("no-colon") is None and split_id("a~1:x") is None  # generation 1 has no suffix


def test_the_agents_the_proxy_imports_are_the_importers_agents() -> None:
    """One declaration (``registry.agents.KNOWN``): the importers' names are read from it."""
    from registry.importers import AGENTS  # noqa: PLC0415

    assert AGENTS == IMPORTED
