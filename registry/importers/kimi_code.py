"""Kimi Code: ``<KIMI_CODE_HOME or ~/.kimi-code>/sessions/wd_<slug>_<hash>/session_<id>/``.

Kimi Code (MoonshotAI/kimi-code, the TypeScript successor of Kimi CLI) writes another layout and another record
format than Kimi CLI, so it is its own agent. Format knowledge, checked in its source (``packages/agent-core/
src/session/store/session-store.ts`` ``summaryFromDir``/``titleFromState``, ``session-index.ts``,
``agent/records/types.ts``, ``agent/compaction/handoff.ts`` ``isRealUserInput``, ``services/message/
transcript.ts``; ``docs/en/configuration/data-locations.md``) and its own test recordings
(``apps/vis/server/test/fixtures/sessions/``, wire protocol 1.1):

- A session folder holds ``state.json`` (``title``, ``isCustomTitle``, ``customTitle``, ``lastPrompt``,
  ``createdAt``, ``updatedAt``, ``workDir``, ``archived``, ``custom``) and ``agents/main/wire.jsonl``, the main
  agent's record log (``{"type": ..., "time": <epoch ms>}`` per line, a ``metadata`` line with ``created_at``
  first). ``agents/agent-<n>/`` are sub-agents, not sessions. ``session_index.jsonl`` beside ``sessions/`` maps
  session ids to their folder and work dir (a ``deleted: true`` line removes one).
- **cwd**: ``state.json`` ``workDir``, else the index's, else the first ``config.update`` record's ``cwd``.
- **Message count**, as its transcript shows messages: ``context.append_message`` records of real user input
  (``origin`` absent or ``user``, or a ``skill_activation``/``plugin_command`` the user typed as a slash
  command; injections, hook results, background-task and cron notices are not) and assistant messages - one
  per ``context.append_message`` from the assistant or per ``step.begin`` loop event (each step opens one).
- **Times**: created from the metadata line's ``created_at`` (else ``state.json`` ``createdAt``), activity the
  newest message record's ``time``; folder and file times are not read (Kimi Code's own list uses them).
- **Titles**: ``title`` when ``isCustomTitle`` is set (USER) or not (AGENT), else ``customTitle`` (USER), else
  ``lastPrompt``, else the first prompt (PROMPT). Sessions Kimi Code migrated from Kimi CLI
  (``custom.imported_from_kimi_cli``) are hidden by Kimi Code and imported as ``kimi`` sessions already.
- **Messages**: those the count takes - the user's ``context.append_message`` text, the assistant's (a ``think``
  part is a thought) - with each ``content.part`` loop event (text, or thinking) and each ``tool.call`` said with
  its ``tool.result`` as one tool message. **Usage**: the ``usage.record`` records, each what one model call
  added (``inputOther``, ``output``, ``inputCacheRead``, ``inputCacheCreation``) with its ``model``; Kimi Code
  states no cost.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar, Final

import msgspec

from events.model import Role, TitleSource
from registry.importers.base import (
    CountedConversation,
    Draft,
    ScanContext,
    agent_time,
    clean_title,
    epoch_ns,
    first_text,
)
from registry.importers.files import FileEntry, FileSource, Group, Reading
from registry.importers.folders import Discovery, Found, Index, folder_files, is_dir, refresh_index, session_folder
from registry.importers.said import Call, arguments_summary, hold_call, result_text, say_result, say_unanswered, usage

__all__ = ["KimiCode"]

_SESSION = re.compile(r"^[A-Za-z0-9._-]+$")
_USER_ORIGINS: Final = frozenset({"user"})
_SLASH_ORIGINS: Final = frozenset({"skill_activation", "plugin_command"})


class _Message(msgspec.Struct):
    role: Any = None
    content: Any = None
    origin: Any = None


class _Event(msgspec.Struct, rename="camel"):
    type: Any = None
    part: Any = None
    tool_call_id: Any = None
    name: Any = None
    args: Any = None
    result: Any = None


class _Record(msgspec.Struct):
    type: Any = None
    time: Any = None
    created_at: Any = None
    cwd: Any = None
    message: _Message | None = None
    event: _Event | None = None
    model: Any = None
    usage: Any = None


class _State(msgspec.Struct, rename="camel"):
    title: Any = None
    is_custom_title: Any = None
    custom_title: Any = None
    last_prompt: Any = None
    created_at: Any = None
    work_dir: Any = None
    archived: Any = None
    custom: Any = None


class _Fold(CountedConversation, kw_only=True):
    role: str
    """``wire`` or ``state``."""
    prompt: str | None = None
    title: str | None = None
    title_is_users: bool = False
    custom_title: str | None = None
    last_prompt: str | None = None
    work_dir: str | None = None
    archived: bool = False
    migrated: bool = False


_WorkDirs = Index[str]
"""``session_index.jsonl``: the work dir of each session id."""


class _IndexLine(msgspec.Struct, rename="camel"):
    session_id: Any = None
    work_dir: Any = None
    deleted: Any = None


_state_decoder = msgspec.json.Decoder(_State)
_index_decoder = msgspec.json.Decoder(_IndexLine)


class KimiCode(FileSource[_Fold, _WorkDirs]):
    agent: ClassVar[str] = "kimi-code"
    record_type = _Record
    tops = ("sessions",)
    home_variable = "KIMI_CODE_HOME"
    home_folder = ".kimi-code"

    def discover(self, root: Path) -> Discovery:
        return folder_files(root, self.tops, [""], _session_files)

    def new_fold(self, found: Found) -> _Fold:
        return _Fold(role="state" if found.kind == "json" else "wire")

    def apply(self, fold: _Fold, record: _Record) -> None:
        at = _ms(record.time)
        kind = record.type
        if kind == "metadata":
            fold.created = _ms(record.created_at) or fold.created
            return
        if kind == "config.update":
            fold.saw_cwd(record.cwd)
        if kind == "usage.record" and isinstance(record.usage, dict):
            spent = record.usage
            self.used(
                usage(
                    input_tokens=spent.get("inputOther"),
                    output_tokens=spent.get("output"),
                    cached_read=spent.get("inputCacheRead"),
                    cached_write=spent.get("inputCacheCreation"),
                    model=record.model,
                ),
                at,
            )
        if kind == "context.append_message" and record.message is not None:
            message = record.message
            origin = message.origin.get("kind") if isinstance(message.origin, dict) else None
            if message.role == "user" and _real_user_input(origin, message.origin):
                fold.prompts += 1
                if fold.prompt is None:
                    fold.prompt = clean_title(first_text(message.content))
                say_unanswered(fold.calls, self.say)
                self.say(Role.USER, first_text(message.content), at)
            elif message.role == "assistant" and origin != "hook_result":
                fold.replies += 1
                for part in message.content if isinstance(message.content, list) else [message.content]:
                    self._part(part, at)
            else:
                return
        elif kind == "context.append_loop_event" and record.event is not None:
            self._loop_event(fold, record.event, at)
        elif kind not in ("turn.prompt", "turn.steer"):
            return  # configuration, usage and tool bookkeeping are not activity
        fold.saw_time(at)

    def _loop_event(self, fold: _Fold, event: _Event, at: int | None) -> None:
        if event.type == "step.begin":
            fold.replies += 1
        elif event.type == "content.part":
            self._part(event.part, at)
        elif event.type == "tool.call" and isinstance(event.tool_call_id, str):
            name = event.name if isinstance(event.name, str) else "tool"
            hold_call(fold.calls, event.tool_call_id, Call(name, arguments_summary(event.args), at), self.say)
        elif event.type == "tool.result" and isinstance(event.tool_call_id, str):
            say_result(fold.calls, event.tool_call_id, result_text(event.result), at, self.say)

    def _part(self, part: object, at: int | None) -> None:
        if isinstance(part, str):
            self.say(Role.AGENT, part, at)
        elif isinstance(part, dict) and part.get("type") == "think":
            self.say(Role.THOUGHT, part.get("think"), at)
        elif isinstance(part, dict) and part.get("type") == "text":
            self.say(Role.AGENT, part.get("text"), at)

    def apply_document(self, fold: _Fold, data: bytes) -> None:
        state = _state_decoder.decode(data)
        if isinstance(state.title, str):
            fold.title, fold.title_is_users = state.title, state.is_custom_title is True
        fold.custom_title = state.custom_title if isinstance(state.custom_title, str) else None
        fold.last_prompt = state.last_prompt if isinstance(state.last_prompt, str) else None
        fold.created = agent_time(state.created_at) if isinstance(state.created_at, str) else _ms(state.created_at)
        fold.work_dir = state.work_dir if isinstance(state.work_dir, str) else None
        fold.archived = state.archived is True
        fold.migrated = isinstance(state.custom, dict) and state.custom.get("imported_from_kimi_cli") is True

    def refresh_extra(
        self, root: Path, extra: _WorkDirs | None, ctx: ScanContext
    ) -> tuple[_WorkDirs, frozenset[str] | bool]:
        return refresh_index(root / "session_index.jsonl", extra, _index_decoder, _index_line, ctx)

    def draft(self, native_id: str, files: Group, extra: _WorkDirs | None) -> Reading:
        by_role: dict[str, tuple[str, FileEntry[Any]]] = {entry.fold.role: (rel, entry) for rel, entry in files}
        state: _Fold = by_role["state"][1].fold if "state" in by_role else _Fold(role="state")
        rel, entry = by_role.get("wire") or by_role["state"]
        wire: _Fold = by_role["wire"][1].fold if "wire" in by_role else _Fold(role="wire")
        titles = [
            (state.title, TitleSource.USER if state.title_is_users else TitleSource.AGENT),
            (state.custom_title, TitleSource.USER),
            (state.last_prompt, TitleSource.PROMPT),
            (wire.prompt, TitleSource.PROMPT),
        ]
        skip = None
        if state.migrated:
            skip = "migrated from Kimi CLI (Kimi Code hides it; imported as a kimi session)"
        elif wire.prompts == 0 and not any(clean_title(t) for t, _ in titles):
            skip = "empty session"
        draft = Draft(
            cwd=state.work_dir or (extra.entries if extra is not None else {}).get(native_id) or wire.cwd,
            created=wire.created or state.created,
            last=wire.last,
            titles=titles,
            messages=wire.messages,
            archived=state.archived,
            skip=skip,
        )
        return Reading(
            rel, entry, draft, path=str(Path(by_role["state"][1].path).parent) if "state" in by_role else None
        )


def _index_line(work_dirs: dict[str, str], line: _IndexLine) -> None:
    if not isinstance(line.session_id, str):
        return
    if line.deleted is True:
        work_dirs.pop(line.session_id, None)
    elif isinstance(line.work_dir, str):
        work_dirs[line.session_id] = line.work_dir


def _real_user_input(kind: object, origin: object) -> bool:
    """Kimi Code's ``isRealUserInput``: what the user typed, not what the agent put into the conversation."""
    if kind is None or kind in _USER_ORIGINS:
        return True
    return kind in _SLASH_ORIGINS and isinstance(origin, dict) and origin.get("trigger") == "user-slash"


def _session_files(rel: str, entry: os.DirEntry[str]) -> list[Found] | None:
    if not _SESSION.match(entry.name) or entry.name in (".", "..") or not is_dir(entry):
        return None
    return session_folder(rel, entry, [("state.json", "json"), ("agents/main/wire.jsonl", "jsonl")])


def _ms(value: object) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_ns(value, unit_ns=1_000_000)
    return None
