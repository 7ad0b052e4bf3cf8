"""A seeded corpus of coding agents' conversations for the search benchmarks (issue 41): sessions of user prompts,
agent answers, thoughts and tool output - prose, code identifiers, file paths, stack traces, test and shell output.

The shape is measured, not invented: each message's size in UTF-8 bytes is drawn from the sizes of that role's
messages in the recordings the importer tests use (``tests/fixtures/agents/``, read through the importers:
``ROLE_SIZES``), the roles in their proportions there, and a session's length from theirs (``SESSION_MESSAGES``)
times ``SESSION_SCALE``, so that 100k sessions hold about 2 M messages. Only the numbers are kept, not the text: the
words come from a vocabulary made here - a few hundred words of developers' English and code, and synthetic words
to a Zipf law, so that a search meets rare and common words as it would in real text. ``measure_fixtures`` reads
the distribution again (``python -m benchmarks.corpus --measure``).

    python -m benchmarks.corpus --sessions 1000 [--seed 41]     # messages/s and bytes of a corpus
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

from events.model import Message, Role

__all__ = [
    "DEFAULT_SEED",
    "QUERIES",
    "ROLE_SIZES",
    "SESSION_MESSAGES",
    "SESSION_SCALE",
    "Conversation",
    "iter_corpus",
    "measure_fixtures",
]

DEFAULT_SEED: Final = 41

ROLE_SIZES: Final[dict[Role, tuple[int, ...]]] = {
    Role.USER: (5, 6, 7, 12, 14, 17, 18, 20, 21, 22, 25, 26, 26, 27, 28, 36, 38, 41, 41, 45, 47, 48, 51, 59, 63, 68),
    Role.THOUGHT: (19, 25, 25, 26, 41, 43, 44, 49),
    Role.AGENT: (2, 13, 15, 18, 19, 19, 19, 19, 20, 23, 26, 32, 32, 33, 33, 34, 36, 37, 39, 40, 42, 45, 52, 53, 58, 60,
                 69, 70, 74, 79),
    Role.TOOL: (33, 33, 58, 66, 67, 69, 70, 74, 78, 80, 88, 179),
}  # fmt: skip
"""UTF-8 bytes of each message of the importer tests' recordings, by role (``measure_fixtures``); a message's size is
one of them, spread over the gap to the next (so sizes are not only these values). Their counts are the roles'
proportions."""
SESSION_MESSAGES: Final = (1, 2, 2, 2, 3, 3, 4, 5, 5, 6, 7, 7, 7, 7, 7, 8)
"""Messages of each session of those recordings (``measure_fixtures``)."""
SESSION_SCALE: Final = 4.25
"""A session's length is one of ``SESSION_MESSAGES`` times this (rounded up): the recordings are short excerpts of
sessions, and the issue's corpus holds at least 20 messages a session on average (2 M in 100k sessions)."""

_ROLES: Final = tuple(ROLE_SIZES)
_ROLE_WEIGHTS: Final = tuple(itertools.accumulate(len(sizes) for sizes in ROLE_SIZES.values()))
_START_NS: Final = 1_735_689_600_000_000_000  # 2025-01-01
_SPAN_NS: Final = 700 * 86_400 * 10**9
_POOL: Final = 3_000

_WORDS_TEXT: Final = (
    "the a to of and in is it that for this with on be not we can i you if as are at from but by or have will an "
    "should now so this use see need let add fix run test tests check make file files change changes function code "
    "error errors build import module class method value values type types return returns call calls config set list "
    "get update updated create created delete read write path line lines output input request response server client "
    "database query index table column row session sessions user users message messages event events log logs cache "
    "key keys token tokens handler handlers route routes api model models field fields schema parse parser string "
    "number default option options flag command commands script version package dependency dependencies install "
    "installed branch commit merge rebase diff patch pull push review comment issue bug failing failed passes passed "
    "timeout retry async await thread lock queue worker job task tasks stream buffer memory disk network socket port "
    "host url json yaml toml csv http https header headers body status code auth login logout password secret "
    "permission permissions deploy docker container image service services migration migrations refactor rename move "
    "split extract inline helper helpers util utils wrapper interface struct enum trait generic closure callback "
    "promise future result option null none undefined exception panic trace stack frame debug verbose warning info "
    "level limit offset page cursor sort filter search match regex pattern replace format encode decode serialize "
    "compress hash digest sign verify benchmark profile slow fast latency throughput p99 memory leak allocation "
    "garbage collector runtime compile compiler linker binary target release debug main loop iterate array slice map "
    "dict set tuple vector pointer reference ownership borrow lifetime scope variable constant global local private "
    "public looks good thanks sure done great works still broken again instead because before after first then "
    "already only also just maybe probably seems actually right wrong here there what why how when where"
)
_WORDS: Final = tuple(_WORDS_TEXT.split())
_SYLLABLES_TEXT: Final = (
    "ka ro mi te su na lo vi de ba zu pe qui tor ex an el on ar is ul ven dor mar sil fen gar hol jun kel"
)
_SYLLABLES: Final = tuple(_SYLLABLES_TEXT.split())
_EXTENSIONS: Final = ("py", "ts", "tsx", "rs", "go", "js", "md", "json", "toml", "yaml", "sql", "sh", "java", "c")
_ROOTS: Final = ("src", "lib", "tests", "app", "pkg", "internal", "cmd", "docs", "scripts", "crates", "packages")
_TOOLS: Final = ("read_file", "write_file", "edit_file", "bash", "grep", "glob", "list_dir", "run_tests", "web_fetch")
_ERRORS: Final = (
    "TypeError", "ValueError", "KeyError", "AttributeError", "AssertionError", "RuntimeError", "ImportError",
    "ConnectionRefusedError", "TimeoutError", "NullPointerException", "IndexOutOfBounds", "SyntaxError",
)  # fmt: skip

QUERIES: Final[dict[str, str]] = {
    "common word": "error",
    "rare word": "vilokaro",
    "two words": "config timeout",
    "phrase": '"most recent call"',
    "prefix": "migrat*",
    "code term": "parse_config",
    "path": "src/session.py",
    "CamelCase part": "Handler",
}
"""What the benchmarks search for, by kind: words of the corpus's vocabulary at different frequencies, a phrase, a
prefix, and code-shaped terms."""


class Conversation(NamedTuple):
    """One session of the corpus: its id, working directory, title, creation time, agent, and turns (each a list
    of messages, the first a user's prompt)."""

    session_id: str
    cwd: str
    title: str
    at: int
    agent: str
    turns: list[list[Message]]


class _Vocabulary:
    """Words to a Zipf law (the common ones first), identifiers and paths made of them, drawn by a seeded ``rng``."""

    def __init__(self, rng: random.Random, size: int = 50_000) -> None:
        synthetic: set[str] = set()
        while len(synthetic) < size - len(_WORDS):
            synthetic.add("".join(rng.choices(_SYLLABLES, k=rng.choice((2, 3, 3, 4)))))
        ordered = sorted(synthetic)
        rng.shuffle(ordered)
        # The rare query word sits far down the law; the others are in the hand-written part.
        if "vilokaro" in ordered:
            ordered.remove("vilokaro")
        ordered.insert(20_000, "vilokaro")
        self.words = list(_WORDS) + ordered
        self.cumulative = list(itertools.accumulate(1 / (rank + 2.7) for rank in range(len(self.words))))
        self.code = [w for w in _WORDS if len(w) > 2 and w.isalpha()]
        # A project's code is named again and again: identifiers and paths come from pools, to a Zipf law too, with
        # the query's own ones among the common.
        self.identifiers = self._pool(rng, self._new_identifier, "parse_config")
        self.paths = self._pool(rng, self._new_path, "src/session.py")
        self.pool_weights = list(itertools.accumulate(1 / (rank + 2.7) for rank in range(_POOL)))

    @staticmethod
    def _pool(rng: random.Random, make: Callable[[random.Random], str], query: str) -> list[str]:
        made: dict[str, None] = {}
        while len(made) < _POOL - 1:
            made[make(rng)] = None
        pool = [name for name in made if name != query][: _POOL - 1]
        pool.insert(30, query)
        return pool

    def prose(self, rng: random.Random, n: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cumulative, k=n)

    def identifier(self, rng: random.Random) -> str:
        return rng.choices(self.identifiers, cum_weights=self.pool_weights)[0]

    def path(self, rng: random.Random) -> str:
        return rng.choices(self.paths, cum_weights=self.pool_weights)[0]

    def _new_identifier(self, rng: random.Random) -> str:
        parts = rng.choices(self.code, k=rng.choice((2, 2, 3)))
        style = rng.random()
        if style < 0.45:
            return "_".join(parts)
        if style < 0.75:
            return "".join(p.capitalize() for p in parts)
        return ".".join(parts)

    def _new_path(self, rng: random.Random) -> str:
        dirs = rng.choices(self.code, k=rng.choice((0, 1, 1, 2)))
        return "/".join((rng.choice(_ROOTS), *dirs, f"{rng.choice(self.code)}.{rng.choice(_EXTENSIONS)}"))


def _cut(text: str, size: int) -> str:
    """``text`` cut to about ``size`` bytes, at a word's end where there is one."""
    if len(text) <= size:
        return text
    space = text.rfind(" ", 0, size)
    return text[: space if space > size // 2 else size]


class _Writer:
    """Messages of each role and kind, each of the size drawn for it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.vocabulary = _Vocabulary(rng)

    def size(self, role: Role) -> int:
        sizes = ROLE_SIZES[role]
        k = int(self.rng.random() * len(sizes))
        low = sizes[k]
        high = sizes[k + 1] if k + 1 < len(sizes) else low + low // 4
        return low + int(self.rng.random() * (high - low + 1))

    def role(self) -> Role:
        return self.rng.choices(_ROLES, cum_weights=_ROLE_WEIGHTS)[0]

    def text(self, role: Role, size: int) -> str:
        rng, v = self.rng, self.vocabulary
        words = v.prose(rng, size // 4 + 2)
        if role is Role.TOOL:
            kind = rng.random()
            if kind < 0.3:  # a stack trace
                head = f'File "{v.path(rng)}", line {rng.randint(1, 900)}, in {v.identifier(rng)}'
                return _cut(f"Traceback (most recent call last): {head} {rng.choice(_ERRORS)}: {' '.join(words)}", size)
            if kind < 0.55:  # a listing or a search's output
                return _cut(" ".join(f"{v.path(rng)}:{rng.randint(1, 500)}" for _ in range(size // 24 + 1)), size)
            if kind < 0.75:  # tests' output
                return _cut(f"{rng.randint(1, 400)} passed, {rng.randint(0, 5)} failed in {v.path(rng)} "
                            + " ".join(words), size)  # fmt: skip
            return _cut(f"{rng.choice(_TOOLS)} {v.path(rng)} " + " ".join(words), size)
        if role is not Role.THOUGHT and rng.random() < 0.4:  # code and paths in prose
            at = int(rng.random() * len(words))
            words[at:at] = [v.identifier(rng) if rng.random() < 0.6 else v.path(rng)]
        return _cut(" ".join(words), size)


def iter_corpus(sessions: int, seed: int = DEFAULT_SEED) -> Iterator[Conversation]:
    """``sessions`` conversations, deterministic for ``(sessions, seed)``: created in order over ~2 years, each a
    few turns minutes apart, one of 6 agents, in one of 200 working directories."""
    rng = random.Random(seed)
    writer = _Writer(rng)
    agents = ("claude-code", "codex", "gemini", "opencode", "goose", "qwen")
    cwds = [f"/home/dev/{writer.vocabulary.identifier(rng).replace('.', '-')}" for _ in range(200)]
    slot = _SPAN_NS // max(sessions, 1)
    for i in range(sessions):
        session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        at = _START_NS + i * slot + int(rng.random() * slot)
        count = math.ceil(rng.choice(SESSION_MESSAGES) * SESSION_SCALE)
        turns: list[list[Message]] = []
        moment = at
        for n in range(count):
            moment += int(rng.random() * 60e9)
            role = Role.USER if n == 0 else writer.role()
            message = Message(role=role, text=writer.text(role, writer.size(role)), at=moment)
            if role is Role.USER or not turns:
                turns.append([message])
            else:
                turns[-1].append(message)
        title = " ".join(writer.vocabulary.prose(rng, rng.randint(3, 7)))
        yield Conversation(session_id, rng.choice(cwds), title, at, rng.choice(agents), turns)


def measure_fixtures() -> tuple[dict[Role, list[int]], list[int]]:
    """The sizes of the importer tests' recorded messages by role, and the messages of each session: read through
    the importers, as ``ROLE_SIZES`` and ``SESSION_MESSAGES`` were (needs the dev extra: the tests' helpers)."""
    import tempfile  # noqa: PLC0415 - only the measurement needs them
    from pathlib import Path  # noqa: PLC0415

    from events import MemoryStore  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415
    from tests.importing import run_import  # noqa: PLC0415
    from tests.test_importers_conversations import CASES, agent_root  # noqa: PLC0415

    sizes: dict[Role, list[int]] = {role: [] for role in Role}
    lengths: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        for agent, fixture in CASES:
            store = MemoryStore()
            run_import(store, agent, agent_root(agent, fixture, Path(tmp)))
            with SessionRegistry(store, follow=False) as registry:
                for session in registry.list(archived="include").sessions:
                    kept = registry.transcript(session.session_id).messages
                    lengths.append(len(kept))
                    for m in kept:
                        sizes[m.message.role].append(len(m.message.text.encode()))
    return {role: sorted(v) for role, v in sizes.items() if v}, sorted(lengths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--measure", action="store_true", help="print the fixtures' distribution and stop")
    args = parser.parse_args()
    if args.measure:
        sizes, lengths = measure_fixtures()
        for role, values in sizes.items():
            print(f"{role.name}: {tuple(values)}")
        print(f"SESSION_MESSAGES: {tuple(lengths)}")
        return
    started = time.perf_counter()
    messages = size = 0
    for conversation in iter_corpus(args.sessions, args.seed):
        for turn in conversation.turns:
            messages += len(turn)
            size += sum(len(m.text.encode()) for m in turn)
    took = time.perf_counter() - started
    print(f"{args.sessions:,} sessions, {messages:,} messages, {size / 1e6:,.1f} MB of text in {took:.1f} s"
          f" ({messages / took:,.0f} messages/s)", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
