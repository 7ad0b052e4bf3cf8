"""Claude Code: ``<CLAUDE_CONFIG_DIR or ~/.claude>/projects/<encoded cwd>/<uuid>.jsonl``, append-only.

The folder name encodes the cwd lossily (every non-alphanumeric character becomes ``-``), so the cwd is always
taken from the records. Subagent transcripts (``agent-*.jsonl``, ``<id>/subagents/``, a first record with
``isSidechain: true``) are not sessions. Titles, last wins within each kind, in this order: ``custom-title``
(the user's: USER) > ``ai-title`` (AGENT) > ``last-prompt`` (PROMPT) > ``summary`` (AGENT) > the first real
prompt (PROMPT). A session whose last ``tag`` is ``__hidden`` (the SDK's soft delete) counts as deleted.
"""

from __future__ import annotations

import os
import re
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
    clean_title,
    env_path,
    home,
    is_uuid,
    parse_time,
)
from registry.importers.files import Discovery, FileSource, Found, Group, NoExtra, folder_files, is_dir

__all__ = ["ClaudeCode"]

_RECENT: Final = 32
"""Assistant message ids remembered to count a message split over several lines once (they come close together)."""
_NOT_A_PROMPT = re.compile(
    r"^(?:<local-command-stdout>|<session-start-hook>|<tick>|<goal>|\[Request interrupted by user"
    r"|<ide_opened_file>|<ide_selection>)"
)
_COMMAND = re.compile(r"<command-name>\s*([^<]*?)\s*</command-name>")


class _Block(msgspec.Struct):
    type: Any = None
    text: Any = None


class _UserMessage(msgspec.Struct):
    content: str | list[_Block] | None = None


class _AssistantMessage(msgspec.Struct):
    id: Any = None


class _Record(msgspec.Struct, rename="camel"):
    type: Any = None
    timestamp: Any = None
    cwd: Any = None
    session_id: Any = None
    is_sidechain: Any = None
    is_meta: Any = None
    is_compact_summary: Any = None
    team_name: Any = None
    git_branch: Any = None
    message: msgspec.Raw = msgspec.Raw()
    custom_title: Any = None
    ai_title: Any = None
    last_prompt: Any = None
    summary: Any = None
    tag: Any = None


class _Fold(msgspec.Struct, kw_only=True):
    session_id: str
    cwd: str | None = None
    created: int | None = None
    last: int | None = None
    sidechain: bool | None = None
    first_prompt: str | None = None
    command: str | None = None
    custom_title: str | None = None
    ai_title: str | None = None
    last_prompt: str | None = None
    summary: str | None = None
    git_branch: str | None = None
    tag: str | None = None
    prompts: int = 0
    replies: int = 0
    recent: list[str] = msgspec.field(default_factory=list)


_user_message = msgspec.json.Decoder(_UserMessage)
_assistant_message = msgspec.json.Decoder(_AssistantMessage)


class ClaudeCode(FileSource[_Fold, NoExtra]):
    agent: ClassVar[str] = "claude-code"
    fold_type = _Fold
    record_type = _Record

    def default_root(self, environ: Mapping[str, str]) -> Path:
        return env_path(environ, "CLAUDE_CONFIG_DIR") or home(environ) / ".claude"

    def discover(self, root: Path) -> Discovery:
        return folder_files(root, ["projects"], [""], _session_file)

    def new_fold(self, found: Found) -> _Fold:
        assert found.native_id is not None
        return _Fold(session_id=found.native_id)

    def apply(self, fold: _Fold, record: _Record) -> None:
        kind = record.type
        if fold.sidechain is None and isinstance(record.is_sidechain, bool):
            fold.sidechain = record.is_sidechain
        if fold.cwd is None and isinstance(record.cwd, str) and record.cwd:
            fold.cwd = record.cwd
        at = parse_time(record.timestamp)
        if fold.created is None and at is not None:
            fold.created = at
        if isinstance(record.git_branch, str) and record.git_branch:
            fold.git_branch = record.git_branch
        if kind == "custom-title" and isinstance(record.custom_title, str):
            fold.custom_title = record.custom_title
        elif kind == "ai-title" and isinstance(record.ai_title, str):
            fold.ai_title = record.ai_title
        elif kind == "last-prompt" and isinstance(record.last_prompt, str):
            fold.last_prompt = record.last_prompt
        elif kind == "summary" and isinstance(record.summary, str):
            fold.summary = record.summary
        elif kind == "tag" and isinstance(record.tag, str):
            fold.tag = record.tag
        elif kind in ("user", "assistant"):
            # History carried over from another session (another sessionId) is not this session's activity.
            if record.session_id not in (None, fold.session_id) or record.is_sidechain is True:
                return
            if record.team_name is not None:
                return
            if at is not None and (fold.last is None or at > fold.last):
                fold.last = at  # tool results are activity too, though not messages
            if kind == "user":
                self._user(fold, record)
            else:
                self._assistant(fold, record)

    @staticmethod
    def _user(fold: _Fold, record: _Record) -> None:
        """Count a real prompt (not a tool result, meta or compaction text); remember the first one."""
        if record.is_meta is True or record.is_compact_summary is True:
            return
        try:
            content = _user_message.decode(record.message).content if record.message else None
        except msgspec.DecodeError:
            return
        if isinstance(content, list):
            if any(block.type == "tool_result" for block in content):
                return
            text = " ".join(b.text for b in content if b.type == "text" and isinstance(b.text, str))
        else:
            text = content or ""
        fold.prompts += 1
        if fold.first_prompt is None:
            stripped = text.strip()
            command = _COMMAND.search(stripped)
            if command is not None:
                fold.command = fold.command or command.group(1) or None
            elif stripped and not _NOT_A_PROMPT.match(stripped):
                fold.first_prompt = clean_title(stripped, PROMPT_TITLE_LENGTH)

    @staticmethod
    def _assistant(fold: _Fold, record: _Record) -> None:
        """Count an API message once, though it is split over several lines sharing ``message.id``."""
        try:
            message_id = _assistant_message.decode(record.message).id if record.message else None
        except msgspec.DecodeError:
            message_id = None
        if isinstance(message_id, str):
            if message_id in fold.recent:
                return
            fold.recent.append(message_id)
            del fold.recent[:-_RECENT]
        fold.replies += 1

    def snapshot(self, native_id: str, files: Group, extra: NoExtra | None, ctx: ScanContext) -> SessionSnapshot | None:
        # The same session can sit in two project folders (a moved repository, a worktree): the one with the
        # latest activity is the session.
        rel, entry = max(files, key=lambda item: (item[1].fold.last or 0, item[1].tail.offset, item[0]))
        fold: _Fold = entry.fold
        path = entry.path
        if fold.sidechain:
            ctx.skip(path, "subagent transcript (isSidechain)")
            return None
        if fold.cwd is None:
            ctx.skip(path, "no cwd recorded")
            return None
        cwd = canonical_dir(fold.cwd)
        if cwd is None:
            ctx.skip(path, f"cwd is not an absolute POSIX path: {fold.cwd!r}")
            return None
        title, source = _title(fold)
        if title is None:
            ctx.skip(path, "metadata only (no prompt, title or summary)")
            return None
        if fold.created is None:
            ctx.skip(path, "no timestamps")
            return None
        return SessionSnapshot(
            native_id=native_id,
            cwd=cwd,
            created_at=fold.created,
            last_activity=fold.last or fold.created,
            path=path,
            locator=f"{rel}@{entry.tail.offset}",
            title=title,
            title_source=source,
            messages=fold.prompts + fold.replies,
            git_branch=fold.git_branch,
            gone="hidden by the agent (tag __hidden)" if fold.tag == "__hidden" else None,
        )


def _session_file(rel: str, entry: os.DirEntry[str]) -> list[Found]:
    # agent-*.jsonl (legacy subagent transcripts) and <id>/subagents/ never match a UUID stem.
    name = entry.name
    if name.endswith(".jsonl") and is_uuid(name[:-6]) and not is_dir(entry):
        return [Found(rel, entry.path, native_id=name[:-6])]
    return []


def _title(fold: _Fold) -> tuple[str | None, TitleSource | None]:
    for text, source, limit in (
        (fold.custom_title, TitleSource.USER, None),
        (fold.ai_title, TitleSource.AGENT, None),
        (fold.last_prompt, TitleSource.PROMPT, PROMPT_TITLE_LENGTH),
        (fold.summary, TitleSource.AGENT, None),
        (fold.first_prompt, TitleSource.PROMPT, PROMPT_TITLE_LENGTH),
        (fold.command, TitleSource.PROMPT, PROMPT_TITLE_LENGTH),
    ):
        title = clean_title(text) if limit is None else clean_title(text, limit)
        if title is not None:
            return title, source
    return None, None
