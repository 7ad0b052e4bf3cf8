"""``demo``: a multi-agent host in a few seconds, on an embedded SQLite file in a temporary folder.

Three agents (each with its own registry on the one SQLite file, as separate agent processes would have)
create, prompt, rename, clear and delete sessions in several projects. The editor's registry answers
``session/list`` and follows ``list_changes()``; every change it receives is printed as the raw JSON-RPC line
it would send (``"title":null`` is an explicit clear). Then a consistent walk, time travel and a log check.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from reactivex import abc, typing
from reactivex.scheduler import ScheduledItem
from reactivex.scheduler.scheduler import Scheduler

from events.factory import sqlite_url
from events.model import Message, Role, TitleSource
from events.verify import verify_log
from registry.cli.errors import InputError
from registry.cli.stores import open_registry
from registry.cli.tables import SessionsTable
from registry.cli.terminal import stdout_console, write_json_line
from registry.cli.timetravel import fold_log, list_pages
from registry.cli.views import change_json
from registry.cli.where import StoreLocation
from registry.cursor import CursorCodec
from registry.diffs import ListChange
from registry.model import SessionInfo
from registry.service import SessionRegistry

if TYPE_CHECKING:
    from rich.console import Console


__all__ = ["add_arguments", "run"]

_State = TypeVar("_State")
_PAGE_SIZE = 3
_PIPED_WIDTH = 120


class _Pump(Scheduler):
    """Runs scheduled work only when asked, on the asking thread: each change is printed right after the step
    that made it, in log order, whichever registry thread queued it."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._due: deque[ScheduledItem] = deque()

    def schedule(self, action: abc.ScheduledAction[_State], state: _State | None = None) -> abc.DisposableBase:
        item = ScheduledItem(self, state, action, self.now)
        with self._lock:
            self._due.append(item)
        return item.disposable

    def schedule_relative(
        self, duetime: typing.RelativeTime, action: abc.ScheduledAction[_State], state: _State | None = None
    ) -> abc.DisposableBase:
        return self.schedule(action, state)

    def schedule_absolute(
        self, duetime: typing.AbsoluteTime, action: abc.ScheduledAction[_State], state: _State | None = None
    ) -> abc.DisposableBase:
        return self.schedule(action, state)

    def run(self) -> None:
        while True:
            with self._lock:
                if not self._due:
                    return
                item = self._due.popleft()
            if not item.is_cancelled():
                item.invoke()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "A simulated multi-agent host on an embedded SQLite file in a temporary folder; with --store it runs on "
        "that (new, empty) store instead and keeps it. --json writes only what the editor receives, one "
        "JSON-RPC line each."
    )
    parser.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help="an empty store to run on and keep")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    console = stdout_console()
    if args.json:  # only the editor's lines reach stdout; the story is told to nobody
        from rich.console import Console  # noqa: PLC0415

        console = Console(file=io.StringIO(), width=_PIPED_WIDTH)
    elif not console.is_terminal:
        console.width = min(console.width, _PIPED_WIDTH)
    if args.store is not None:
        if args.store.startswith("memory:"):
            raise InputError("the demo's agents share one store across registries: use sqlite:// or postgresql://")
        _Demo(console, StoreLocation(args.store, "--store"), kept=True, lines=args.json).run()
    else:
        with tempfile.TemporaryDirectory(prefix="acp-registry-demo-") as folder:
            url = sqlite_url(Path(folder) / "sessions.db")
            _Demo(console, StoreLocation(url, "demo"), kept=False, lines=args.json).run()
    console.print(f"\ndone in {time.monotonic() - started:.1f} s", style="dim", markup=False)
    return 0


class _Demo:
    def __init__(self, console: Console, location: StoreLocation, *, kept: bool, lines: bool = False) -> None:
        self.console = console
        self.lines = lines
        """Write each line the editor receives to stdout as it is (``--json``)."""
        self.location = location
        self.kept = kept
        self.pump = _Pump()
        self.received: list[ListChange] = []

    def say(self, text: str, style: str = "") -> None:
        self.console.print(text, style=style, markup=False, soft_wrap=True)

    def scene(self, title: str) -> None:
        self.console.print()
        self.console.rule(title, align="left")

    def run(self) -> None:
        host = open_registry(self.location, SessionRegistry, create=True, page_size=_PAGE_SIZE)
        try:
            if host.store.head() != 0:
                raise InputError(f"{self.location.url} is not empty: the demo runs only on a new store")
            agents = {
                name: open_registry(self.location, SessionRegistry, create=True, follow=False)
                for name in ("claude", "codex", "gemini")
            }
            try:
                self.play(host, agents)
            finally:
                for agent in agents.values():
                    agent.close()
        finally:
            host.close()

    def play(self, host: SessionRegistry, agents: dict[str, SessionRegistry]) -> None:
        self.console.rule("acp-registry demo: the session history of coding agents, as an append-only log")
        where = "kept" if self.kept else "a temporary folder, deleted at the end"
        self.say(f"store: {self.location.url} ({where})")
        self.say(
            "Three agents (claude, codex, gemini) each open their own registry on this one store, as separate agent "
            "processes would; the editor's registry sees all of their writes."
        )

        self.scene("1. Three agents start sessions in three projects")
        self.start_sessions(agents)
        host.sync()
        self.show_pages(host, title=f"session/list, walked page by page ({_PAGE_SIZE} sessions a page)")
        self.say('One page exactly as ACP session/list answers it, for {"cwd": "/work/docs/"}:')
        self.raw(host.handle("session/list", {"cwd": "/work/docs/"}))
        before_changes = host.position

        self.scene("2. The editor follows the change stream: each line is what it would send")
        subscription = host.list_changes(scheduler=self.pump).subscribe(on_next=self.received.append)
        try:
            self.live_changes(host, agents)
        finally:
            subscription.dispose()

        self.scene("3. A walk through the pages is consistent, however the list moves meanwhile")
        self.consistent_walk(host, agents)

        self.scene(f"4. Time travel: the list as session/list answered at position {before_changes}")
        self.time_travel(host, before_changes)

        self.scene("5. Every conversation is kept: found by what was said, read back, erased on delete")
        self.conversations(host)
        self.closing(before_changes)

    def start_sessions(self, agents: dict[str, SessionRegistry]) -> None:
        plan: list[tuple[str, str, str, str | None, TitleSource]] = [
            ("claude", "claude-1", "/work/webapp", "Fix the login redirect", TitleSource.USER),
            ("codex", "codex-1", "/work/api", "Rate limiter for /search", TitleSource.AGENT),
            ("gemini", "gemini-1", "/work/docs", "Document the session API", TitleSource.PROMPT),
            ("claude", "claude-2", "/work/webapp/", None, TitleSource.AGENT),  # trailing slash: normalised
            ("codex", "codex-2", "/work/api", "Migrate to Postgres 17", TitleSource.USER),
            ("gemini", "gemini-2", "/work/webapp", "Dark mode toggle", TitleSource.PROMPT),
            ("claude", "claude-3", "/work/api/tests/..", "Flaky test in test_auth", TitleSource.AGENT),
        ]
        for agent, session_id, cwd, title, source in plan:
            registry = agents[agent]
            if source is TitleSource.USER:
                registry.create(cwd, session_id=session_id, title=title)
            else:
                registry.create(cwd, session_id=session_id)
            question, answer = _SAID[session_id]  # the first prompt and its answer, kept and searchable
            registry.record_messages(
                session_id, [Message(role=Role.USER, text=question), Message(role=Role.AGENT, text=answer)]
            )
            if title is not None and source is not TitleSource.USER:
                registry.change_info(session_id, title=title, title_source=source)
            self.say(f"  {agent:<7} {session_id:<9} in {cwd:<20} {title or '(no title yet)'}")

    def show_pages(self, host: SessionRegistry, *, title: str) -> None:
        pages: list[list[SessionInfo]] = []
        page = host.list()
        pages.append(page.sessions)
        while isinstance(page.next_cursor, str):
            page = host.list(cursor=page.next_cursor)
            pages.append(page.sessions)
        self.console.print(SessionsTable(pages, title=title))

    def raw(self, value: Any) -> None:
        import msgspec  # noqa: PLC0415

        self.say(msgspec.json.encode(value).decode(), style="cyan")

    def step(self, host: SessionRegistry, caption: str) -> None:
        """Print what the editor received for the step just taken."""
        host.sync()
        self.pump.run()
        self.say(f"- {caption}", style="bold")
        if not self.received:
            self.say("  (nothing sent: no visible change)", style="dim")
        for item in self.received:
            if self.lines:
                write_json_line(change_json(item))
            else:
                self.say(change_json(item).decode(), style="cyan")
        self.received.clear()

    def live_changes(self, host: SessionRegistry, agents: dict[str, SessionRegistry]) -> None:
        claude, codex, gemini = agents["claude"], agents["codex"], agents["gemini"]
        codex.record_messages(
            "codex-1",
            [
                Message(role=Role.USER, text="Make the limit configurable per API key"),
                Message(role=Role.AGENT, text="RateLimiter now reads `limits.per_key` from config.toml."),
            ],
        )
        self.step(host, "codex: a prompt in codex-1 moves updatedAt and the message count (never the text)")
        claude.change_info("claude-2", title="Dark mode: toggle and saved theme", title_source=TitleSource.PROMPT)
        self.step(host, "claude: titles claude-2 from its first prompt")
        host.change_info("codex-2", title="Postgres 17 migration")
        self.step(host, "the user renames codex-2")
        codex.change_info("codex-2", title="Upgrade database", title_source=TitleSource.AGENT)
        self.step(host, "codex: a generated title for codex-2 is dropped, the user's title stays")
        host.change_info("claude-1", title=None)
        self.step(host, "the user clears claude-1's title: an explicit null")
        gemini.change_info("gemini-2", updated_at=None)
        self.step(host, "gemini clears gemini-2's updatedAt: null, and it sorts after every dated session")
        codex.create("/work/api", session_id="codex-3")
        self.step(host, "codex starts codex-3 (ACP has no notification for it: an extension method)")
        first = host.handle("session/delete", {"sessionId": "gemini-1"})
        again = host.handle("session/delete", {"sessionId": "gemini-1"})
        self.step(host, f"session/delete gemini-1 answers {first}, and again {again} (idempotent)")

    def consistent_walk(self, host: SessionRegistry, agents: dict[str, SessionRegistry]) -> None:
        page = host.list()
        start = host.position
        walked = [info.session_id for info in page.sessions]
        self.say(f"page 1 at position {start}: {', '.join(walked)}")
        last = host.list(cursor=page.next_cursor) if isinstance(page.next_cursor, str) else page
        while isinstance(last.next_cursor, str):
            last = host.list(cursor=last.next_cursor)
        mover = last.sessions[-1].session_id
        agents["codex"].record_activity(mover, messages=2)
        agents["claude"].create("/work/webapp", session_id="claude-4")
        host.sync()
        self.say(f"meanwhile {mover} is prompted (now the most recent) and claude-4 is created")
        number = 1
        while isinstance(page.next_cursor, str):
            page = host.list(cursor=page.next_cursor)
            number += 1
            ids = [info.session_id for info in page.sessions]
            walked.extend(ids)
            self.say(f"page {number} (as of position {start}): {', '.join(ids)}")
        every_once = len(walked) == len(set(walked))
        self.say(
            f"the walk returned {len(walked)} sessions, each {'once' if every_once else 'NOT once'}; a new walk "
            f"starts with {host.list().sessions[0].session_id}"
        )

    def closing(self, position: int) -> None:
        command = _command()
        if self.kept:
            self.say(
                f"Look around: {command} --store {self.location.url} list (or search token, transcript claude-3, "
                f"history codex-2, replay --at "
                f"{position}, stats, tail)"
            )
        else:
            self.say(
                f"Keep a demo store to look around with the other commands: {command} demo --store "
                f"sqlite:///tmp/demo.db, then {command} --store sqlite:///tmp/demo.db list (or search token, "
                f"transcript claude-3, history codex-2, "
                f"replay --at {position}, stats, tail)"
            )
        if command != "acp-registry":
            self.say(f"(acp-registry is not on PATH: `. {Path(sys.executable).parent}/activate` puts it there)")

    def conversations(self, host: SessionRegistry) -> None:
        for query in ("token", '"rate limiter"', "KeyError"):
            hits = host.search(query).hits
            self.say(f"acp-registry search {query}  ->  {len(hits)} session{'s' if len(hits) != 1 else ''}")
            for hit in hits:
                self.say(f"  {hit.session_id:<9} {hit.title or '(no title)'}")
                for snippet in hit.snippets[:1]:
                    self.say(f"            {snippet.role}: {snippet.text}", style="cyan")
        self.say("acp-registry transcript claude-3:")
        for line in host.transcript("claude-3").lines():
            self.say(f"  {line.role:<6} {line.text}", style="cyan")
        found = [hit.session_id for hit in host.search("session/list").hits]
        self.say(
            f"gemini-1 was deleted in scene 2: its conversation was erased with it, so `search session/list` finds "
            f"{', '.join(found) or 'nothing'} - not gemini-1"
        )

    def time_travel(self, host: SessionRegistry, position: int) -> None:
        store = host.store
        folded = fold_log(store, stop=lambda record: record.position > position, report=lambda _done: None)
        pages = list_pages(folded.projection, CursorCodec(store.identity), cwd=None, page_size=_PAGE_SIZE)
        then = f"then: {len(folded.projection)} sessions at position {position} (acp-registry replay --at {position})"
        self.console.print(SessionsTable([page.sessions for page in pages], title=then))
        self.show_pages(host, title=f"now: {len(host)} sessions at position {host.position}")
        report = verify_log(store)
        self.say(
            f"verify: {report.events} events in {report.sessions} sessions, "
            + ("healthy" if report.healthy else f"{len(report.problems)} problems")
        )


_SAID: Final = {
    "claude-1": (
        "After login the app redirects to /undefined instead of the dashboard; fix the redirect in "
        "src/auth/callback.ts",
        "The callback read `returnTo` before the session was saved: `navigate(returnTo ?? '/dashboard')` now runs "
        "after `await saveSession()`.",
    ),
    "codex-1": (
        "Add a token bucket rate limiter to /search: 10 requests per second per API key",
        "Added RateLimiter in api/limits.py (a TokenBucket per key); /search answers 429 with Retry-After when the "
        "bucket is empty.",
    ),
    "gemini-1": (
        "Write the docs for session/list and session/delete",
        "docs/sessions.md now explains session/list pages with cursors, and that session/delete is idempotent.",
    ),
    "claude-2": (
        "Add a dark mode toggle that remembers the theme",
        "ThemeToggle stores the choice in localStorage('theme') and applies it before the first paint.",
    ),
    "codex-2": (
        "Plan the migration from Postgres 14 to 17",
        "Check the extensions first, then pg_upgrade --link in a maintenance window; rollback is the old cluster.",
    ),
    "gemini-2": (
        "The dark mode toggle flickers on load",
        "The theme class is now set by an inline script in index.html, before the bundle loads.",
    ),
    "claude-3": (
        "tests/test_auth.py::test_refresh fails one run in five with KeyError: 'token'",
        "The fixture shared one dict between tests, and the refresh test popped 'token' from it: it is a fresh "
        "copy per test now.",
    ),
}
"""What each demo session's first prompt said, and the agent's answer."""


def _command() -> str:
    """How the reader can run ``acp-registry`` from here: its name when it is on PATH, else its full path."""
    if shutil.which("acp-registry"):
        return "acp-registry"
    script = Path(sys.executable).parent / "acp-registry"
    return str(script) if script.exists() else f"{sys.executable} -m registry.cli"
