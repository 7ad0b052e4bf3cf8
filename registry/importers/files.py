"""The shared machinery of file-based sources: discover, read only what changed, fold, settle.

A ``FileSource`` keeps one entry per file (its ``Tail`` and the *fold* of its records so far, a small msgspec
struct each parser defines). A pass stats every discovered file and reads only those whose signature moved:
append-only JSON lines from the remembered offset, whole documents (``.json``, ``.zst``) again from the start
but only re-folded when their content hash changed. A fold is updated on a copy and kept only when the read
finished, so a file that vanishes or fails half-way leaves its previous state, never half of a session. One bad
line costs that line: it is skipped with its reason and ``file:line``. Sessions whose files changed are then
re-derived from the folds of all their files: the parser's ``draft``, checked by ``ScanContext.settle``.

A parser subclasses ``FileSource`` and says only what is format knowledge: where the files are
(``discover``), how one record folds in (``apply`` / ``apply_document``) and what a session's folds say
(``draft``). While it folds a read's new records it says the messages and usage they hold (``say``, ``used``):
what the records read from the remembered offset said is the session's ``Said`` for this pass (a whole read - a
first one, a rewritten file, a document - is ``fresh``). A last line without its newline says nothing yet: it is
read again, whole, once the file grows, and says it then.
"""

from __future__ import annotations

import abc
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Final, Generic, NamedTuple, TypeVar, cast, get_args, get_origin

import msgspec

from events.model import Role, Usage
from registry.importers.base import Draft, ScanContext, ScanResult, SessionFacts, env_path, home
from registry.importers.folders import (
    Discovery,
    Found,
)
from registry.importers.lines import (
    GLUED,
    LineStats,
    Tail,
    TailRead,
    compressed_lines,
    decode_lines,
    open_regular,
    same_file,
)
from registry.importers.said import Said

__all__ = [
    "FileEntry",
    "FileSource",
    "FileState",
    "Group",
    "NoExtra",
    "Reading",
]

F = TypeVar("F", bound=msgspec.Struct)
G = TypeVar("G", bound=msgspec.Struct)

_MAX_DOCUMENT: Final = 256 << 20


class FileEntry(msgspec.Struct, Generic[F], kw_only=True):
    path: str
    tail: Tail
    fold: F
    """What the file says now, its last line too when that is complete JSON without its newline."""
    kind: str
    native_id: str | None = None
    aside: bool = False
    base: F | None = None
    """The fold up to ``tail.offset`` when ``fold`` includes such a last line: the next read continues from here
    (the line is read again, with whatever was appended to it), so nothing is folded twice."""


class FileState(msgspec.Struct, Generic[F, G], kw_only=True):
    files: dict[str, FileEntry[F]] = msgspec.field(default_factory=dict)
    extra: G | None = None


class NoExtra(msgspec.Struct):
    """For sources without files shared by all sessions."""


Group = list[tuple[str, FileEntry[Any]]]


class Reading(NamedTuple):
    """What a parser makes of a session's files: the file that stands for it, and its draft."""

    rel: str
    entry: FileEntry[Any]
    draft: Draft
    path: str | None = None
    """Where the session lives, when that is not the chosen file (e.g. a session folder)."""
    speaker: str | None = None
    """The file whose records say the session's conversation, when that is not the chosen file (one file, always
    the same one: what two files say of one turn would be said twice)."""


class FileSource(abc.ABC, Generic[F, G]):
    """A source whose sessions live in files. Parsers say where files are and how records fold."""

    agent: ClassVar[str]
    fold_type: ClassVar[type[msgspec.Struct]]
    """``F``, the fold: read off the class's base ``FileSource[F, G]``, never stated again."""
    extra_type: ClassVar[type[msgspec.Struct]]
    """``G``, what a pass keeps of the files shared by all sessions (``NoExtra``: none)."""
    record_type: ClassVar[Any] = None
    """What one JSON line decodes to (a msgspec struct with the fields the fold reads)."""
    tops: ClassVar[tuple[str, ...]] = ()
    """The folders under the root the agent keeps sessions in (a root with none of them is not the agent's)."""
    home_variable: ClassVar[str] = ""
    """The environment variable naming the agent's data folder (``CODEX_HOME``)."""
    home_folder: ClassVar[str] = ""
    """The data folder's name in the home directory otherwise (``.codex``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is FileSource:
                cls.fold_type, cls.extra_type = get_args(base)

    def __init__(self) -> None:
        self._state_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
            FileState[self.fold_type, self.extra_type]  # type: ignore[name-defined]
        )
        self._fold_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(self.fold_type)
        self._records: msgspec.json.Decoder[Any] = msgspec.json.Decoder(self.record_type or Any)
        self._saying: Said | None = None
        self._heard: dict[str, Said] = {}
        self._heard_chars = 0

    # -- what a parser says ----------------------------------------------------------------------------

    def default_root(self, environ: Mapping[str, str]) -> Path:
        """``$<home_variable>``, else ``~/<home_folder>``."""
        return env_path(environ, self.home_variable) or home(environ) / self.home_folder

    @abc.abstractmethod
    def discover(self, root: Path) -> Discovery: ...

    def new_fold(self, found: Found) -> F:
        """The fold of a file before its first record (a fold that needs nothing from the file: empty)."""
        return cast(F, self.fold_type())

    def apply(self, fold: F, record: Any) -> None:
        """Fold one JSON-lines record in (unknown record types are simply not looked at)."""
        raise NotImplementedError

    def apply_document(self, fold: F, data: bytes) -> None:
        """Fold a whole-document file in (raise ``ValueError`` when it is not one)."""
        raise NotImplementedError

    def identify(self, found: Found, fold: F) -> str | None:
        """The session a file belongs to: from its name, or from what it says."""
        return found.native_id

    def refresh_extra(self, root: Path, extra: G | None, ctx: ScanContext) -> tuple[G | None, frozenset[str] | bool]:
        """Re-read files shared by all sessions; says which sessions they changed (True: all)."""
        return extra, False

    @abc.abstractmethod
    def draft(self, native_id: str, files: Group, extra: G | None) -> Reading:
        """What the folds of a session's files (sorted by ``rel``, those ``aside`` left out) say about it."""

    def finish(self, fold: F) -> None:
        """After a read's complete records are folded in: for a parser that says a message once it is whole."""

    def say(self, role: Role, text: object, at: int | None) -> None:
        """A message the record being folded holds (heard only while a read listens)."""
        if self._saying is not None:
            self._saying.say(role, text, at)

    def used(self, spent: Usage | None, at: int | None) -> None:
        """Usage the record being folded reports (heard only while a read listens)."""
        if self._saying is not None:
            self._saying.used(spent, at)

    # -- the pass --------------------------------------------------------------------------------------

    def scan(self, root: Path, state: bytes | None, ctx: ScanContext) -> ScanResult:
        previous = self._load(state)
        self._heard, self._heard_chars = {}, 0
        extra, extra_changed = self.refresh_extra(root, previous.extra, ctx)
        discovery = self.discover(root)
        if self.tops and not any((root / top).is_dir() for top in self.tops):
            ctx.skip(str(root), f"no {' or '.join(t + '/' for t in self.tops)} here: not {self.agent}'s data folder")
        for item in discovery.unread:
            ctx.skip(item, f"not a file {self.agent} writes (left alone)")
        files: dict[str, FileEntry[F]] = {}
        changed: set[str] = set(ctx.want)
        to_read: list[tuple[Found, FileEntry[F] | None]] = []
        for found in discovery.files:
            entry = previous.files.get(found.rel)
            try:
                st = os.stat(found.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                ctx.skip(found.path, f"cannot stat: {exc.strerror or exc}")
                if entry is not None:
                    files[found.rel] = entry
                continue
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block or never end
                ctx.skip(found.path, "not a regular file")
                continue
            if entry is not None and entry.native_id in ctx.want:
                to_read.append((found, None))  # its last write failed: read it whole, and say it all again
            elif entry is not None and entry.kind == found.kind and same_file(st, entry.tail):
                files[found.rel] = entry
            else:
                to_read.append((found, entry))
        ctx.reading(len(to_read))
        deferred: set[str] = set()  # sessions with a file left for the next round (the budget was reached)
        for n, (found, entry) in enumerate(to_read):
            if self._heard_chars > ctx.said_budget:
                ctx.more = True
                for later, known in to_read[n:]:
                    if known is not None:
                        files[later.rel] = known
                    deferred.update(i for i in (later.native_id, known and known.native_id) if i)
                break
            fresh = self._read(found, entry, ctx)
            ctx.advance()
            if fresh is None:
                if entry is not None:
                    files[found.rel] = entry
                continue
            files[found.rel] = fresh
            if entry is None or (entry.fold, entry.native_id, entry.path) != (fresh.fold, fresh.native_id, fresh.path):
                changed.update(i for i in (fresh.native_id, entry and entry.native_id) if i)
        for rel, entry in previous.files.items():
            if rel in files:
                continue
            if not discovery.complete:
                files[rel] = entry  # perhaps in a folder that could not be listed: keep it until we know
            elif entry.native_id:
                changed.add(entry.native_id)  # a file went away: another may hold the session now, or none
        groups: dict[str, Group] = {}
        for rel, entry in files.items():
            if entry.native_id:
                groups.setdefault(entry.native_id, []).append((rel, entry))
        if extra_changed is True:
            changed.update(groups)
        elif extra_changed:
            changed.update(extra_changed)
        changed -= deferred
        sessions: list[SessionFacts] = []
        said: dict[str, Said] = {}
        for native_id in sorted(changed.intersection(groups)):
            group = sorted(groups[native_id], key=lambda item: item[0])
            own = [(rel, entry) for rel, entry in group if not entry.aside]
            if not own:
                continue  # only files kept beside a session whose own files are gone
            reading = self.draft(native_id, own, extra)
            facts = ctx.settle(
                native_id,
                reading.draft,
                path=reading.path or reading.entry.path,
                locator=f"{reading.rel}@{reading.entry.tail.offset}",
            )
            if facts is not None:
                sessions.append(facts)
                speaker = reading.speaker or reading.rel
                aside = [r for r, e in group if e.aside]
                if ctx.conversations is not None and native_id not in ctx.conversations:
                    self._read_whole(dict(group), [speaker, *aside], ctx)  # skipped until now: all it said
                heard = self._session_said(speaker, aside)
                if heard:
                    said[native_id] = heard
        self._heard, self._heard_chars = {}, 0
        present = None
        if discovery.complete and not ctx.more:
            owned = {n for n, group in groups.items() if any(not entry.aside for _, entry in group)}
            present = frozenset(owned) | {f.native_id for f in discovery.files if f.native_id and not f.aside}
        encoded = msgspec.msgpack.encode(FileState(files=files, extra=extra))
        return ScanResult(encoded, sessions, present, said)

    def _read_whole(self, entries: dict[str, FileEntry[F]], rels: list[str], ctx: ScanContext) -> None:
        """Read these files of a session again from their start, for all they say (their state stays as read)."""
        for rel in rels:
            heard = self._heard.get(rel)
            entry = entries.get(rel)
            if entry is None or (heard is not None and heard.fresh):
                continue
            self._heard.pop(rel, None)
            self._read(Found(rel, entry.path, entry.kind, entry.native_id, entry.aside), None, ctx)

    def _session_said(self, rel: str, aside: list[str]) -> Said:
        """What a session said this pass: its file's new messages and usage, with the usage of the files beside
        it placed among them by time."""
        heard = self._heard.get(rel) or Said(fresh=False)
        for other in aside:
            if other in self._heard:
                heard.beside(self._heard[other])
        return heard

    def present(self, root: Path, state: bytes) -> frozenset[str] | None:
        known = self._load(state).files
        discovery = self.discover(root)
        if not discovery.complete:
            return None
        ids = set()
        for found in discovery.files:
            if found.aside:
                continue
            entry = known.get(found.rel)
            native_id = found.native_id or (entry.native_id if entry is not None else None)
            if native_id:
                ids.add(native_id)
        return frozenset(ids)

    def _load(self, state: bytes | None) -> FileState[F, G]:
        if state:
            try:
                return self._state_decoder.decode(state)  # type: ignore[no-any-return]
            except msgspec.DecodeError:
                pass  # an older layout: read everything again (the registry diff keeps that harmless)
        return FileState()

    def _fold_lines(self, fold: F, lines: Iterable[bytes | None], stats: LineStats, first_line: int) -> None:
        for number, record in decode_lines(lines, self._records, stats, first_line=first_line):
            self._apply(fold, record, number, stats)

    def _apply(self, fold: F, record: Any, number: int, stats: LineStats) -> None:
        try:
            self.apply(fold, record)
        except Exception as exc:  # a part of the record (a payload) is not what the parser expects
            stats.problem(number, f"record not understood ({type(exc).__name__}), skipped")

    def _read(self, found: Found, entry: FileEntry[F] | None, ctx: ScanContext) -> FileEntry[F] | None:
        """Read what is new in one file; None (after ``ctx.skip``) when it could not be read."""
        stats = LineStats(ctx.line_cap)
        base: F | None = None
        said = Said(fresh=True)
        try:
            if found.kind == "jsonl":
                with TailRead(found.path, entry.tail if entry is not None else None, cap=ctx.line_cap) as read:
                    if entry is None or read.restart or entry.kind != found.kind:
                        fold = self.new_fold(found)
                    else:
                        fold = self._copy(entry.fold if entry.base is None else entry.base)
                        said.fresh = False
                    stats = read.stats
                    self._listening(said, fold, lambda: self._fold_lines(fold, read.lines(), stats, read.first_line))
                    if read.pending is not None:
                        view = self._fold_last(fold, read.pending, read.line_count + 1, stats)
                        if view is not None:
                            base, fold = fold, view
                    tail = read.tail
                    ctx.bytes_read += read.bytes_read
            else:
                st = os.stat(found.path)
                with open_regular(found.path) as f:
                    data = f.read(_MAX_DOCUMENT + 1)
                if len(data) > _MAX_DOCUMENT:
                    ctx.skip(found.path, f"larger than {_MAX_DOCUMENT >> 20} MiB")
                    return None
                ctx.bytes_read += len(data)
                digest = hashlib.sha256(data).digest()[:16]
                tail = Tail(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_size, digest)
                if entry is not None and entry.kind == found.kind and entry.tail.fingerprint == digest:
                    return FileEntry(
                        path=found.path,
                        tail=tail,
                        fold=entry.fold,
                        kind=found.kind,
                        native_id=entry.native_id,
                        aside=found.aside,
                    )
                fold = self.new_fold(found)
                if found.kind == "zst":
                    lines = compressed_lines(found.path, cap=ctx.line_cap)
                    self._listening(said, fold, lambda: self._fold_lines(fold, lines, stats, 1))
                else:
                    self._listening(said, fold, lambda: self.apply_document(fold, data))
        except FileNotFoundError as exc:
            reason = "vanished while being read" if exc.filename == found.path else str(exc)
            ctx.skip(found.path, reason)
            return None
        except (OSError, ValueError, msgspec.DecodeError, RecursionError) as exc:
            why = "nests too deep to read" if isinstance(exc, RecursionError) else None
            ctx.skip(found.path, f"unreadable: {why or getattr(exc, 'strerror', None) or exc}")
            return None
        ctx.files_read += 1
        for reason, count in stats.counts.items():
            ctx.skip(f"{found.path}:{stats.lines[reason][0]}", reason, count)
        native_id = self.identify(found, fold)
        if said:
            self._heard[found.rel] = said
            self._heard_chars += sum(len(m.text) for m in said.messages)
        return FileEntry(
            path=found.path, tail=tail, fold=fold, kind=found.kind, native_id=native_id, aside=found.aside, base=base
        )

    def _listening(self, said: Said, fold: F, fold_in: Callable[[], None]) -> None:
        """Fold records in while ``said`` hears what they say, then ``finish``."""
        self._saying = said
        try:
            fold_in()
            self.finish(fold)
        finally:
            self._saying = None

    def _copy(self, fold: F) -> F:
        return self._fold_decoder.decode(msgspec.msgpack.encode(fold))  # type: ignore[no-any-return]

    def _fold_last(self, fold: F, line: bytes, number: int, stats: LineStats) -> F | None:
        """``fold`` with a last line that has no newline folded in, on a copy; None when the line is not complete
        JSON (a writer may be in the middle of it: it is read on a later pass, and not reported)."""
        scratch = LineStats(stats.cap)
        records = list(decode_lines([line], self._records, scratch, first_line=number))
        if not records or set(scratch.counts) - {GLUED}:
            return None
        for reason in scratch.counts:
            stats.problem(number, reason)
        view = self._copy(fold)
        for _, record in records:
            self._apply(view, record, number, stats)
        return view
