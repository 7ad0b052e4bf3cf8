"""Finding an agent's files: the folders it keeps sessions in (``folder_files``, ``session_folder``), the
append-only indexes it keeps beside them (``follow_index``, ``refresh_index``), and what a walk turned up
(``Found``, ``Discovery``). ``registry.importers.files`` reads what is found here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

import msgspec

from registry.importers.base import ScanContext
from registry.importers.lines import GLUED, LineStats, Tail, TailRead, decode_lines, same_file

__all__ = [
    "Discovery",
    "Found",
    "Index",
    "folder_files",
    "follow_index",
    "is_dir",
    "quiet",
    "refresh_index",
    "scandir",
    "session_folder",
]


class Found(NamedTuple):
    """A file discovery turned up. ``rel`` (relative to the root) keys its state."""

    rel: str
    path: str
    kind: str = "jsonl"
    """``jsonl`` (append-only, read incrementally), ``zst`` (compressed JSON lines) or ``json`` (one document)."""
    native_id: str | None = None
    """The agent's session id when the name carries it (else the fold names it)."""
    aside: bool = False
    """A file kept beside a session's own (a subagent's transcript): read for the usage it adds to the session,
    never a sign that the session exists."""


class Discovery(NamedTuple):
    files: list[Found]
    complete: bool
    """False when part of the tree could not be listed: nothing may then be taken for deleted."""
    unread: Sequence[str] = ()
    """Entries the walk met that no parser reads (said in the summary: perhaps another agent's folder)."""


def folder_files(
    root: Path,
    tops: Sequence[str],
    subfolders: Sequence[str],
    pick: Callable[[str, os.DirEntry[str]], Iterable[Found] | None],
) -> Discovery:
    """What ``pick`` finds in ``<root>/<top>/<folder>/<subfolder>/``, given each entry and its path relative to
    ``root``; ``pick`` returns None for an entry that is not the agent's (reported as unread), an empty list for
    one it knows and does not read. Incomplete when no top exists or a folder cannot be listed (then nothing may
    be taken for gone)."""
    found: list[Found] = []
    unread: list[str] = []
    complete = any((root / top).is_dir() for top in tops)
    for top in tops:
        folders = scandir(root / top)
        if folders is None:
            complete = False
            continue
        for folder in folders:
            if not is_dir(folder):
                continue
            for sub in subfolders:
                prefix = f"{top}/{folder.name}/{sub}/" if sub else f"{top}/{folder.name}/"
                entries = scandir(os.path.join(folder.path, sub))
                if entries is None:
                    complete = False
                    continue
                for entry in entries:
                    picked = pick(prefix + entry.name, entry)
                    if picked is None:
                        unread.append(entry.path)
                    else:
                        found.extend(picked)
    return Discovery(found, complete, unread)


def session_folder(rel: str, entry: os.DirEntry[str], files: Iterable[tuple[str, str]]) -> list[Found]:
    """The files of a session an agent keeps as a folder named by its id (``entry``), those of ``files`` (name
    within the folder, kind) that exist."""
    return [
        Found(f"{rel}/{name}", f"{entry.path}/{name}", kind, entry.name)
        for name, kind in files
        if os.path.exists(f"{entry.path}/{name}")
    ]


V = TypeVar("V")
R = TypeVar("R")


def follow_index(
    path: Path,
    tail: Tail | None,
    entries: Mapping[str, V],
    decoder: msgspec.json.Decoder[R],
    fold: Callable[[dict[str, V], R], None],
    ctx: ScanContext,
) -> tuple[Tail | None, dict[str, V], frozenset[str]] | None:
    """What is new in an append-only index beside the sessions (codex's ``session_index.jsonl``, Kimi Code's):
    its tail, its entries after folding the new lines in (a complete last line without its newline too; ``fold``
    must be last-wins per id, as an index is, since that line is read again when the file grows), and the ids whose
    entry changed. None when nothing
    changed, or the file could not be read (kept as it was; said in the summary); a missing file is empty."""
    try:
        st = os.stat(path)
    except OSError:
        return None, {}, frozenset(entries)
    if same_file(st, tail):
        return None
    stats = LineStats(ctx.line_cap)
    try:
        with TailRead(str(path), tail, cap=ctx.line_cap) as read:
            fresh = {} if read.restart else dict(entries)
            for _, line in decode_lines(read.lines(), decoder, stats, first_line=read.first_line):
                fold(fresh, line)
            if read.pending is not None:  # a complete last line without its newline: an index folds last-wins,
                scratch = LineStats(ctx.line_cap)  # so reading it again once the file grows changes nothing
                last = list(decode_lines([read.pending], decoder, scratch, first_line=read.line_count + 1))
                if last and not set(scratch.counts) - {GLUED}:
                    for _, line in last:
                        fold(fresh, line)
            new_tail = read.tail
    except OSError as exc:
        ctx.skip(str(path), f"unreadable: {exc.strerror or exc}")
        return None
    for reason, count in stats.counts.items():
        ctx.skip(f"{path}:{stats.lines[reason][0]}", reason, count)
    changed = frozenset(i for i in fresh.keys() | entries.keys() if fresh.get(i) != entries.get(i))
    return new_tail, fresh, changed


class Index(msgspec.Struct, Generic[V], kw_only=True):
    """An append-only index beside the sessions, as far as it was read: its tail, and an entry per session id."""

    tail: Tail | None = None
    entries: dict[str, V] = msgspec.field(default_factory=dict)


def refresh_index(
    path: Path,
    index: Index[V] | None,
    decoder: msgspec.json.Decoder[R],
    fold: Callable[[dict[str, V], R], None],
    ctx: ScanContext,
) -> tuple[Index[V], frozenset[str] | bool]:
    """``FileSource.refresh_extra`` for a source whose shared file is such an index (``follow_index``)."""
    old: Index[V] = index or Index()
    read = follow_index(path, old.tail, old.entries, decoder, fold, ctx)
    if read is None:
        return old, False
    tail, entries, changed = read
    return Index(tail=tail, entries=entries), changed


def quiet(pattern: str) -> Callable[[str], bool]:
    """A test for names an agent keeps beside its sessions and that are known not to be sessions."""
    compiled = re.compile(pattern)
    return lambda name: compiled.fullmatch(name) is not None


def scandir(path: Path | str) -> list[os.DirEntry[str]] | None:
    """The entries of a directory, sorted by name; None when it cannot be listed (missing is empty)."""
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError:
        return None


def is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
