"""The importer interface: what a source of agent history is, and the facts it reports about each session.

A ``Source`` knows one agent's on-disk format. ``scan`` reads what changed under a root since the state it is
given (its own opaque bytes, kept by the importer between passes) and reports a ``SessionSnapshot`` per session
that may have changed - the session as the agent's files describe it *now*, never a delta - plus the set of
native ids present on disk (the importer tombstones the ones that disappeared). Sources never touch the log:
turning snapshots into events, with ids derived from the source, is the importer's job (``importer.py``).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import ClassVar, Final, NamedTuple, Protocol

import msgspec

from events.model import TitleSource
from registry.errors import InvalidParams
from registry.limits import MAX_TITLE_LENGTH
from registry.paths import normalise_cwd

__all__ = [
    "PROMPT_TITLE_LENGTH",
    "ScanContext",
    "ScanResult",
    "SessionSnapshot",
    "Skip",
    "Source",
    "canonical_dir",
    "canonical_dirs",
    "clean_title",
    "env_path",
    "epoch_ns",
    "home",
    "is_uuid",
    "parse_time",
]

PROMPT_TITLE_LENGTH: Final = 200
"""A title derived from a prompt is cut here (with an ellipsis), as Claude Code's SDK does."""

_MIN_NS: Final = 0
_MAX_NS: Final = 7_258_118_400 * 1_000_000_000  # 2200-01-01: later stamps are garbage, and int64 ns ends in 2262


class SessionSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """One session as the agent's files describe it now. Times are epoch ns from the records themselves.

    ``locator`` says where in the source this state was read up to (``file@offset``, ``row:<digest>``); event
    ids are derived from it. ``gone`` is set when the agent itself marks the session deleted (a reason).
    """

    native_id: str
    cwd: str
    created_at: int
    last_activity: int
    path: str
    locator: str
    title: str | None = None
    title_source: TitleSource | None = None
    messages: int = 0
    git_branch: str | None = None
    archived: bool = False
    additional_directories: tuple[str, ...] = ()
    gone: str | None = None


class Skip(NamedTuple):
    """Something not imported (or imported without some of its lines), and why."""

    item: str
    reason: str
    times: int = 1


class ScanContext:
    """What a scan may use and report: limits, the ids it must report again, skips, progress, read counters."""

    def __init__(
        self,
        *,
        line_cap: int = 16 << 20,
        sqlite_timeout: float = 2.0,
        want: frozenset[str] = frozenset(),
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.line_cap = line_cap
        self.sqlite_timeout = sqlite_timeout
        self.want = want
        """Native ids the importer could not write last time: report them again even if unchanged."""
        self.skips: list[Skip] = []
        self.files_read = 0
        self.bytes_read = 0
        self._progress = progress
        self._total = 0
        self._done = 0

    def skip(self, item: str, reason: str, count: int = 1) -> None:
        self.skips.append(Skip(item, reason, count))

    def reading(self, total: int) -> None:
        """About to read ``total`` files (or databases): drives the progress bar of a large first import."""
        self._total += total
        if self._progress is not None:
            self._progress(self._done, self._total)

    def advance(self, done: int = 1) -> None:
        self._done += done
        if self._progress is not None:
            self._progress(self._done, self._total)


class ScanResult(NamedTuple):
    state: bytes
    """The source's new state, opaque to the importer; handed back to the next ``scan``."""
    snapshots: list[SessionSnapshot]
    """Sessions that changed (and those in ``ScanContext.want``), each once."""
    present: frozenset[str] | None
    """Every native id the source has now, readable or not; None when discovery was incomplete (no deletes)."""


class Source(Protocol):
    """One agent's history on disk."""

    agent: ClassVar[str]
    """The agent's name: ``--agent`` value, ``_meta`` value and session id prefix (``claude-code:<id>``)."""

    def default_root(self, environ: Mapping[str, str]) -> Path:
        """Where the agent keeps its data: its environment override, else its default location."""
        ...

    def scan(self, root: Path, state: bytes | None, ctx: ScanContext) -> ScanResult:
        """Read what changed since ``state``. Never raises for bad input: skips go to ``ctx.skip``."""
        ...

    def present(self, root: Path, state: bytes) -> frozenset[str] | None:
        """A fresh, cheap look at which native ids exist (confirms a disappearance before a tombstone)."""
        ...


# -- helpers the sources share ------------------------------------------------------------------------


def env_path(environ: Mapping[str, str], name: str) -> Path | None:
    """An absolute path from an environment variable, ``~`` expanded; None when unset or empty."""
    value = environ.get(name, "").strip()
    return Path(os.path.expanduser(value)) if value else None


def home(environ: Mapping[str, str]) -> Path:
    value = environ.get("HOME", "").strip()
    return Path(value) if value else Path.home()


def parse_time(value: object) -> int | None:
    """Epoch ns from an ISO 8601 / RFC 3339 string (no zone: UTC) or epoch seconds; None when it is not one.

    Out-of-range stamps (before 1970, after 2200) are treated as missing: hostile input must not reach the log.
    """
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            parsed = _dt.datetime.fromisoformat(text)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=_dt.UTC)
        try:
            delta = parsed - _EPOCH
        except OverflowError:
            return None
        ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
        return ns if _MIN_NS <= ns <= _MAX_NS else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_ns(value)
    return None


def epoch_ns(seconds: float, *, unit: float = 1.0) -> int | None:
    """Epoch ns from a number of seconds (``unit`` 1e-3 for milliseconds); None when out of range."""
    try:
        ns = round(seconds * unit * 1_000_000_000)
    except (OverflowError, ValueError):
        return None
    return ns if _MIN_NS <= ns <= _MAX_NS else None


_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_SPACES = re.compile(r"\s+")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def clean_title(text: object, limit: int = MAX_TITLE_LENGTH) -> str | None:
    """One line of text at most ``limit`` characters (cut with an ellipsis); None when nothing is left.

    The registry refuses titles over 500 characters, so every imported title passes through here.
    """
    if not isinstance(text, str):
        return None
    line = _SPACES.sub(" ", text).strip()
    if not line:
        return None
    limit = min(limit, MAX_TITLE_LENGTH)
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def canonical_dir(path: object) -> str | None:
    """A directory in the registry's canonical form (``registry.paths``); None when it is not absolute POSIX."""
    try:
        return normalise_cwd(path)
    except InvalidParams:
        return None


def canonical_dirs(paths: Iterable[object], cwd: str) -> tuple[str, ...]:
    """Additional directories: the absolute ones, canonical, once each, without the cwd itself."""
    found = (canonical_dir(p) for p in paths)
    return tuple(dict.fromkeys(d for d in found if d is not None and d != cwd))


def is_uuid(text: str) -> bool:
    return _UUID.match(text) is not None


def stable_uuid(*parts: str) -> uuid.UUID:
    """A deterministic id from text parts (uuid5 in the importers' namespace)."""
    return uuid.uuid5(IMPORT_NAMESPACE, "\x1f".join(parts))


IMPORT_NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/acp-session-registry/importers")
