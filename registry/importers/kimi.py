"""Kimi CLI: ``<KIMI_SHARE_DIR or ~/.kimi>/sessions/<md5(work dir)>/<uuid>/{wire.jsonl,state.json}``.

The folder hash is reversible only through ``kimi.json`` (its ``work_dirs``); a session whose folder matches no
work dir has no known cwd and is skipped until one does. ``wire.jsonl`` (append-only, the UI event log) gives
the times, the first prompt and the turns; ``context.jsonl`` is rotated and rewritten, so it is not read.
``state.json`` (rewritten whole) gives the title and the archive flag. Kimi fills ``custom_title`` itself with
the shortened first prompt, and keeps no reliable flag for a title the user chose: a title that is the first
prompt is PROMPT, any other is AGENT - never USER. Messages are counted as user turns plus finished turns.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

import msgspec

from events.model import TitleSource
from registry.importers.base import (
    PROMPT_TITLE_LENGTH,
    ScanContext,
    SessionSnapshot,
    canonical_dir,
    canonical_dirs,
    clean_title,
    env_path,
    home,
    is_uuid,
    parse_time,
)
from registry.importers.files import Discovery, FileSource, Found, Group, folder_files, is_dir

__all__ = ["Kimi"]

_SMALL_FILE: Final = 4 << 20


class _WireMessage(msgspec.Struct):
    type: Any = None
    payload: msgspec.Raw = msgspec.Raw()


class _Wire(msgspec.Struct):
    type: Any = None
    timestamp: Any = None
    message: _WireMessage | None = None


class _TurnBegin(msgspec.Struct):
    user_input: Any = None


class _State(msgspec.Struct):
    custom_title: Any = None
    title_generated: Any = None
    archived: Any = None
    additional_dirs: Any = None


class _Fold(msgspec.Struct, kw_only=True):
    hash_dir: str
    created: int | None = None
    last: int | None = None
    prompt: str | None = None
    turns: int = 0
    replies: int = 0
    custom_title: str | None = None
    title_generated: bool = False
    archived: bool = False
    additional_dirs: list[str] = msgspec.field(default_factory=list)


class _WorkDirs(msgspec.Struct, kw_only=True):
    dirs: dict[str, str] = msgspec.field(default_factory=dict)
    """Session folder name (``<md5>`` or ``<kaos>_<md5>``) -> work dir."""


_turn_decoder = msgspec.json.Decoder(_TurnBegin)
_state_decoder = msgspec.json.Decoder(_State)


class Kimi(FileSource[_Fold, _WorkDirs]):
    agent: ClassVar[str] = "kimi"
    fold_type = _Fold
    extra_type = _WorkDirs
    record_type = _Wire

    def default_root(self, environ: Mapping[str, str]) -> Path:
        return env_path(environ, "KIMI_SHARE_DIR") or home(environ) / ".kimi"

    def discover(self, root: Path) -> Discovery:
        return folder_files(root, ["sessions"], [""], _session_files)

    def new_fold(self, found: Found) -> _Fold:
        return _Fold(hash_dir=found.rel.split("/")[1])  # sessions/<hash>/<uuid>/<file>

    def apply(self, fold: _Fold, record: _Wire) -> None:
        at = parse_time(record.timestamp)
        if at is not None:
            fold.created = at if fold.created is None else min(fold.created, at)
            fold.last = at if fold.last is None else max(fold.last, at)
        message = record.message
        if message is None:
            return
        if message.type == "TurnBegin":
            fold.turns += 1
            if fold.prompt is None and message.payload:
                fold.prompt = clean_title(_text(_turn_decoder.decode(message.payload).user_input), PROMPT_TITLE_LENGTH)
        elif message.type == "TurnEnd":
            fold.replies += 1

    def apply_document(self, fold: _Fold, data: bytes) -> None:
        state = _state_decoder.decode(data)
        fold.custom_title = state.custom_title if isinstance(state.custom_title, str) else None
        fold.title_generated = state.title_generated is True
        fold.archived = state.archived is True
        dirs = state.additional_dirs if isinstance(state.additional_dirs, list) else []
        fold.additional_dirs = [d for d in dirs if isinstance(d, str)]

    def refresh_extra(
        self, root: Path, extra: _WorkDirs | None, ctx: ScanContext
    ) -> tuple[_WorkDirs | None, frozenset[str] | bool]:
        path = root / "kimi.json"
        try:
            with open(path, "rb") as f:
                work_dirs = json.loads(f.read(_SMALL_FILE)).get("work_dirs")
        except FileNotFoundError:
            work_dirs = []
        except (OSError, ValueError, AttributeError) as exc:
            ctx.skip(str(path), f"unreadable: {exc}")
            return extra, False
        dirs: dict[str, str] = {}
        for item in work_dirs if isinstance(work_dirs, list) else []:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                digest = hashlib.md5(item["path"].encode(), usedforsecurity=False).hexdigest()
                kaos = item.get("kaos")
                dirs[digest if kaos in (None, "local") else f"{kaos}_{digest}"] = item["path"]
        fresh = _WorkDirs(dirs=dirs)
        return fresh, fresh != extra

    def snapshot(
        self, native_id: str, files: Group, extra: _WorkDirs | None, ctx: ScanContext
    ) -> SessionSnapshot | None:
        wire = next((item for item in files if item[1].kind == "jsonl"), None)
        state = next((entry.fold for _, entry in files if entry.kind == "json"), None)
        if wire is None:
            return None
        rel, entry = wire
        fold: _Fold = entry.fold
        path = str(Path(entry.path).parent)
        custom = clean_title(state.custom_title) if state is not None else None
        if fold.turns == 0 and custom is None:
            ctx.skip(path, "empty session")
            return None
        work_dir = (extra or _WorkDirs()).dirs.get(fold.hash_dir)
        if work_dir is None:
            ctx.skip(path, "work dir unknown (no kimi.json entry hashes to its folder)")
            return None
        cwd = canonical_dir(work_dir)
        if cwd is None:
            ctx.skip(path, f"work dir is not an absolute POSIX path: {work_dir!r}")
            return None
        if fold.created is None:
            ctx.skip(path, "no timestamps")
            return None
        if custom is not None:
            source = TitleSource.PROMPT if _is_prompt(custom, fold.prompt) else TitleSource.AGENT
            title: str | None = custom
        else:
            title, source = fold.prompt, TitleSource.PROMPT
        return SessionSnapshot(
            native_id=native_id,
            cwd=cwd,
            created_at=fold.created,
            last_activity=fold.last or fold.created,
            path=path,
            locator=f"{rel}@{entry.tail.offset}",
            title=title,
            title_source=source if title is not None else None,
            messages=fold.turns + fold.replies,
            archived=state is not None and state.archived,
            additional_directories=canonical_dirs(state.additional_dirs if state is not None else (), cwd),
        )


def _session_files(rel: str, session: os.DirEntry[str]) -> list[Found]:
    # Legacy flat <uuid>.jsonl files are left alone: kimi moves them into <uuid>/ on its next start.
    if not is_uuid(session.name) or not is_dir(session):
        return []
    found = [Found(f"{rel}/wire.jsonl", f"{session.path}/wire.jsonl", "jsonl", session.name)]
    if os.path.exists(f"{session.path}/state.json"):
        found.append(Found(f"{rel}/state.json", f"{session.path}/state.json", "json", session.name))
    return found


def _text(user_input: object) -> str:
    if isinstance(user_input, str):
        return user_input
    if isinstance(user_input, list):
        parts = (p.get("text") if isinstance(p, dict) else p for p in user_input)
        return " ".join(p for p in parts if isinstance(p, str))
    return ""


def _is_prompt(title: str, prompt: str | None) -> bool:
    """Kimi's own title: the first prompt, shortened (perhaps with a trailing ellipsis)."""
    if prompt is None:
        return False
    stem = title.rstrip(".… ")
    return bool(stem) and prompt.startswith(stem)
