"""``acp-registry import-agents``: import other agents' histories once, or keep watching them.

``registry/cli.py`` registers the subcommand with ``add_arguments(parser)`` and calls ``run(args)`` with
``args.store`` set to the store URL. Exit codes: 0 done (skips are reported, not failures; Ctrl-C ends a watch
with 0), 2 a usage or input error (bad ``--root``, unknown agent, a store that cannot be opened), 1 the store
failed while writing.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal, TextIO

import msgspec
import platformdirs
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

from events.errors import StoreError
from events.urls import open_store
from registry.importers import AGENTS, Importer, Summary, sources

__all__ = ["add_arguments", "run"]

PROGRESS_THRESHOLD: Final = 200
"""Files (or databases) one agent must have to read before a progress bar is worth showing."""


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
        "--interval", type=float, default=2.0, metavar="SECONDS", help="how often --watch looks (default 2)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON (one line per pass)")
    parser.add_argument(
        "--state",
        metavar="PATH",
        help="the importer's incremental state (default: <store file>.import-state beside a SQLite store)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the command; returns the exit code."""
    logging.basicConfig(level=logging.WARNING, format="acp-registry import-agents: %(message)s")
    err = Console(stderr=True)
    try:
        roots = _roots(args.root or [])
        if args.interval <= 0:
            raise ValueError("--interval must be a positive number of seconds")
        chosen = sources(args.agent)
    except ValueError as exc:
        err.print(f"acp-registry import-agents: {exc}", markup=False, highlight=False)
        return 2
    url = getattr(args, "store", None) or os.environ.get("ACP_REGISTRY_STORE") or _default_store()
    try:
        store = open_store(url)
    except (ValueError, StoreError, OSError) as exc:
        err.print(f"acp-registry import-agents: cannot open the store {url}: {exc}", markup=False, highlight=False)
        return 2
    bar = _ProgressBar(err) if sys.stderr.isatty() else None
    state: Path | Literal["default"] = Path(args.state).expanduser().absolute() if args.state else "default"
    importer = Importer(store, chosen, roots=roots, state_path=state, progress=bar)
    # Piped output is read by people in a log or a terminal wider than rich's default 80 columns.
    out = Console(file=sys.stdout, highlight=False, width=None if sys.stdout.isatty() else 160)
    try:
        summary = importer.run()
        if bar is not None:
            bar.close()
        _report(summary, url, args.json, out, sys.stdout)
        while args.watch:
            time.sleep(args.interval)
            summary = importer.run()
            if summary.touched or any(a.skipped for a in summary.agents):
                _report(summary, url, args.json, out, sys.stdout, compact=True)
    except KeyboardInterrupt:
        return 0
    except StoreError as exc:
        err.print(f"acp-registry import-agents: the store failed: {exc}", markup=False, highlight=False)
        return 1
    finally:
        if bar is not None:
            bar.close()
        store.close()
    return 0


def _roots(values: list[str]) -> dict[str, Path]:
    roots: dict[str, Path] = {}
    for value in values:
        agent, sep, path = value.partition("=")
        if not sep or not path:
            raise ValueError(f"--root takes AGENT=PATH, got {value!r}")
        if agent not in AGENTS:
            raise ValueError(f"--root names an unknown agent {agent!r}; known: {', '.join(AGENTS)}")
        roots[agent] = Path(path).expanduser().absolute()
    return roots


def _default_store() -> str:
    return f"sqlite:///{Path(platformdirs.user_data_dir('acp-registry')) / 'sessions.db'}"


class _ProgressBar:
    """A progress bar on stderr, shown only for an agent with many files to read (a large first import)."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._started = False

    def __call__(self, agent: str) -> Callable[[int, int], None]:
        task: list[TaskID] = []

        def update(done: int, total: int) -> None:
            if not task:
                if total < PROGRESS_THRESHOLD:
                    return
                if not self._started:
                    self._progress.start()
                    self._started = True
                task.append(self._progress.add_task(f"importing {agent}", total=total))
            self._progress.update(task[0], completed=done, total=total)

        return update

    def close(self) -> None:
        if self._started:
            self._progress.stop()
            self._started = False


def _report(summary: Summary, url: str, as_json: bool, out: Console, raw: TextIO, *, compact: bool = False) -> None:
    if as_json:
        raw.write(msgspec.json.encode(summary).decode() + "\n")
        raw.flush()
        return
    if compact:
        stamp = time.strftime("%H:%M:%S")
        for a in summary.agents:
            if a.added or a.changed or a.removed or a.skipped:
                skipped = "; ".join(f"{g.reason} ({g.count})" for g in a.skipped)
                out.print(
                    f"{stamp} {a.agent}: {a.added} added, {a.changed} changed, {a.removed} removed"
                    + (f", skipped: {skipped}" if skipped else "")
                )
        return
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
        out.print("Not read: " + "; ".join(f"{agent} ({why})" for agent, why in notes))
    skips = Table(title="Skipped", title_justify="left")
    for column in ("agent", "reason", "count", "for example"):
        skips.add_column(column, justify="right" if column == "count" else "left", overflow="fold")
    for a in summary.agents:
        for group in a.skipped:
            skips.add_row(a.agent, group.reason, str(group.count), group.examples[0] if group.examples else "")
    if skips.row_count:
        out.print(skips)
