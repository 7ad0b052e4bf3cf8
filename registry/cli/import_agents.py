"""``acp-registry import-agents``: import other agents' histories once, or keep watching them.

``add_arguments(parser)`` declares the options; ``run(args)`` runs the command with ``args.store`` (a URL, or
None for the usual lookup in ``registry.cli.where``). Exit codes: 0 done (skips are reported, not failures;
Ctrl-C ends a watch with 0), 2 a usage or input error (a ``--root`` that is not a folder, an unknown agent, a
store that cannot be opened, an import state that is a folder or a symlink), 1 the store failed while writing.
Errors are raised as ``CommandError``s: ``registry.cli.main`` prints them as one line. ``--json`` summaries use
camelCase keys like every other ``--json``. A watch says on a terminal's stderr what it watches and that Ctrl-C
stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from events.errors import StoreError
from registry.cli.errors import EXIT_OK, InputError, ProblemFound
from registry.cli.options import add_keep_secrets
from registry.cli.stores import catch_up_read_model, open_log
from registry.cli.terminal import progress, stdout_console, write_json
from registry.cli.where import locate
from registry.importers import AGENTS, Importer, ImportStateError, sources

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from registry.importers import Summary

__all__ = ["add_arguments", "run"]

PROGRESS_THRESHOLD: Final = 200
"""Files (or databases) one agent must have to read before a progress bar is worth showing."""
_SETTLE: Final = 0.5
"""Seconds after the file watcher starts before the catch-up pass (what changed while it started)."""
_DEBOUNCE_MS: Final = 200
"""File events within this many milliseconds make one wake-up (an agent appends several lines per turn)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``import-agents``."""
    parser.add_argument(
        "--agent",
        action="append",
        choices=AGENTS,
        metavar="NAME",
        help=f"import only this agent (repeatable; default: all of {', '.join(AGENTS)})",
    )
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="AGENT=PATH",
        help="read AGENT's data from PATH instead of its usual place (e.g. claude-code=/tmp/claude, the folder "
        "holding projects/)",
    )
    parser.add_argument("--watch", action="store_true", help="keep importing changes as they happen (Ctrl-C stops)")
    parser.add_argument(
        "--interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="with --watch: the longest wait between two looks when no file event arrives (default 2)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON (one line per pass)")
    parser.add_argument(
        "--state",
        metavar="PATH",
        help="the importer's incremental state (default: <store file>.import-state beside a SQLite store)",
    )
    add_keep_secrets(parser)


def run(args: argparse.Namespace) -> int:
    """Run the command; returns the exit code (errors are raised as ``CommandError``)."""
    logging.basicConfig(level=logging.WARNING, format="acp-registry import-agents: %(message)s")
    if args.interval <= 0:
        raise InputError("--interval must be a positive number of seconds")
    try:
        chosen = sources(args.agent)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    roots = _roots(args.root or [])
    location = locate(getattr(args, "store", None))
    store = open_log(location, create=True)
    bars = _Bars()
    state: Path | Literal["default"] = Path(args.state).expanduser().absolute() if args.state else "default"
    importer = Importer(store, chosen, roots=roots, state_path=state, progress=bars, keep_secrets=args.keep_secrets)
    out = stdout_console()
    try:
        summary = importer.run()
        if summary.touched:
            catch_up_read_model(store)
        bars.close()
        _report(summary, location.url, args.json, out)
        if args.watch:
            _say_watching(importer.roots, args.interval)
            said = _skips(summary)
            for _ in _wake_ups(importer.roots.values(), args.interval):
                summary = importer.run()
                if summary.touched:
                    catch_up_read_model(store)
                # A pass is worth a line when it wrote something or has something new to say (a stray file
                # noted on every pass is said once).
                if summary.touched or _skips(summary) != said:
                    _report(summary, location.url, args.json, out, compact=True)
                said = _skips(summary)
    except KeyboardInterrupt:
        return EXIT_OK
    except ImportStateError as exc:
        raise InputError(str(exc)) from None
    except _store_errors() as exc:
        raise ProblemFound(f"the store failed: {exc}") from exc
    finally:
        bars.close()
        store.close()
    return EXIT_OK


def _say_watching(roots: Mapping[str, Path], interval: float) -> None:
    """On a terminal, what a watch watches and how it ends (as ``tail`` says it); stdout keeps only the summaries."""
    if not sys.stderr.isatty():
        return
    there = [f"{agent} ({root})" for agent, root in roots.items() if root.is_dir()]
    absent = [agent for agent, root in roots.items() if not root.is_dir()]
    print(
        f"watching {', '.join(there) or 'no agent folder yet'} for changes"
        + (f", and looking for {', '.join(absent)} every {interval:g} s" if absent else "")
        + " (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )


def _skips(summary: Summary) -> set[tuple[str, str, int]]:
    return {(a.agent, g.reason, g.count) for a in summary.agents for g in a.skipped}


def _store_errors() -> type[Exception]:
    return StoreError


def _roots(values: list[str]) -> dict[str, Path]:
    """``--root AGENT=PATH`` values; a root that is not an existing folder is refused before anything is read."""
    roots: dict[str, Path] = {}
    for value in values:
        agent, sep, path = value.partition("=")
        if not sep or not path:
            raise InputError(f"--root takes AGENT=PATH, got {value!r}")
        if agent not in AGENTS:
            raise InputError(f"--root names an unknown agent {agent!r}; known: {', '.join(AGENTS)}")
        folder = Path(path).expanduser().absolute()
        if not folder.exists():
            raise InputError(f"--root {agent}={folder}: the folder is missing")
        if not folder.is_dir():
            raise InputError(f"--root {agent}={folder}: not a folder")
        roots[agent] = folder
    return roots


def _wake_ups(roots: Iterable[Path], interval: float) -> Iterator[None]:
    """One item each time the agents' folders change (file events), or at least every ``interval`` seconds.

    A file event is a doorbell: a thread listening with ``watchfiles`` rings it, and the pass that follows reads
    whatever changed since the last one (so events that arrive during a pass cause one more pass, never a lost
    change). The first wake-up comes soon after the listener starts, to catch what changed meanwhile. The timed
    wake-up stays as the fallback: a folder that does not exist yet, a file system that sends no events, or
    events lost under load are all caught by the next look.
    """
    watched = [str(root) for root in dict.fromkeys(roots) if root.is_dir()]
    ring, stop = threading.Event(), threading.Event()
    listener = None
    if watched:
        listener = threading.Thread(target=_listen, args=(watched, ring, stop), name="import-agents-watch", daemon=True)
        listener.start()
        ring.wait(_SETTLE)
        ring.clear()
        yield None
    try:
        while True:
            ring.wait(interval)
            ring.clear()
            yield None
    finally:
        stop.set()
        if listener is not None:
            listener.join(timeout=5)


def _listen(watched: list[str], ring: threading.Event, stop: threading.Event) -> None:
    import watchfiles  # noqa: PLC0415 - only for --watch

    try:
        for _ in watchfiles.watch(*watched, stop_event=stop, debounce=_DEBOUNCE_MS, step=50, raise_interrupt=False):
            ring.set()
    except Exception:  # a watcher that cannot run leaves the timed fallback
        logging.getLogger(__name__).warning("file events unavailable; looking every --interval seconds", exc_info=True)


class _Bars:
    """One progress bar at a time on stderr (``registry.cli.terminal.progress``), for an agent with many files."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()

    def __call__(self, agent: str) -> Callable[[int, int], None]:
        self.close()  # the previous agent's bar, if it had one
        bar: list[Callable[[int], None]] = []

        def update(done: int, total: int) -> None:
            if not bar:
                if total < PROGRESS_THRESHOLD:
                    return
                bar.append(self._stack.enter_context(progress(f"importing {agent}", total)))
            bar[0](done)

        return update

    def close(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()


def _report(summary: Summary, url: str, as_json: bool, out: Console, *, compact: bool = False) -> None:
    if as_json:
        write_json(summary)
        return
    if compact:
        stamp = time.strftime("%H:%M:%S")
        for a in summary.agents:
            if a.added or a.changed or a.removed or a.skipped:
                skipped = "; ".join(f"{g.reason} ({g.count})" for g in a.skipped)
                out.print(
                    f"{stamp} {a.agent}: {a.added} added, {a.changed} changed, {a.removed} removed"
                    + (f", skipped: {skipped}" if skipped else ""),
                    markup=False,
                )
        return
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=f"Imported into {url}", title_justify="left")
    for column in ("agent", "added", "changed", "removed", "unchanged", "skipped", "files read", "seconds"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    for a in summary.agents:
        if a.unavailable is not None:
            table.add_row(a.agent, "-", "-", "-", "-", "-", "-", "-")
            continue
        table.add_row(
            a.agent,
            str(a.added),
            str(a.changed),
            str(a.removed),
            str(a.unchanged),
            str(a.skipped_count),
            str(a.files_read),
            f"{a.seconds:.2f}",
        )
    out.print(table)
    notes = [(a.agent, a.unavailable) for a in summary.agents if a.unavailable is not None]
    if notes:
        out.print("Not read: " + "; ".join(f"{agent} ({why})" for agent, why in notes), markup=False)
    skips = Table(title="Skipped", title_justify="left")
    for column in ("agent", "reason", "count", "for example"):
        skips.add_column(column, justify="right" if column == "count" else "left", overflow="fold")
    for a in summary.agents:
        for group in a.skipped:
            example = group.examples[0] if group.examples else ""
            skips.add_row(a.agent, _plain(group.reason), str(group.count), _plain(example))
    if skips.row_count:
        out.print(skips)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _plain(text: str) -> Text:
    """A cell shown as it is: no rich markup, control characters escaped (a path or a reason from another
    program's files must not move the cursor or retitle the terminal)."""
    from rich.text import Text  # noqa: PLC0415

    return Text(_CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text))
