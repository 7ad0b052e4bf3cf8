"""Qwen Code: ``<QWEN_RUNTIME_DIR or ~/.qwen>/projects/<sanitised cwd>/chats/<uuid>.jsonl``, append-only.

The folder name is lossy like Claude Code's, so the cwd comes from the first record. ``chats/archive/<id>.jsonl``
is an archived session (when both copies exist, the active one wins). Titles: the last ``system/custom_title``
record - ``titleSource`` ``manual`` or absent (legacy) is the user's (USER), ``auto`` the model's (AGENT) - else
the first user prompt within the first 10 records (PROMPT). A session that starts with a ``parent_session``
record is a sub-session and is skipped. Writers may glue two records on one line (``}{``): both are recovered.

**Message count**, as Qwen Code defines it for its session list (QwenLM/qwen-code ``packages/core/src/
services/sessionService.ts``, ``SessionListItem.messageCount``): the ``user`` and ``assistant`` records with
distinct ``uuid`` (a record written twice counts once); ``system`` and tool records are not messages.

**Messages**: a ``user`` record's text parts; an ``assistant`` record's parts - text (a ``thought`` part is a
thought) and each ``functionCall``, said with the ``functionResponse`` of the ``tool_result`` record that answers
it as one tool message; a subagent's records (``isSidechain``) say nothing. **Usage**: an ``assistant`` record's
``usageMetadata`` (Gemini's: ``promptTokenCount`` holds ``cachedContentTokenCount``, ``thoughtsTokenCount`` is
apart from ``candidatesTokenCount``) with its ``model``, once per ``uuid``, subagents' records included. Qwen
Code states no cost.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar, Final

import msgspec

from events.model import Role, TitleSource
from registry.importers.base import (
    Conversation,
    Draft,
    TranscriptRecord,
    agent_time,
    clean_title,
    first_text,
    prompt_title,
)
from registry.importers.files import FileSource, Group, NoExtra, Reading
from registry.importers.folders import Discovery, Found, folder_files, is_dir
from registry.importers.said import Call, arguments_summary, hold_call, result_text, say_result, say_unanswered, usage

__all__ = ["Qwen"]

_SESSION_FILE = re.compile(r"^([0-9a-fA-F-]{32,36})\.jsonl$")
_PROMPT_LINES: Final = 10
_RECENT: Final = 32


class _Message(msgspec.Struct):
    parts: Any = None


class _Usage(msgspec.Struct, rename="camel"):
    prompt_token_count: Any = 0
    candidates_token_count: Any = 0
    cached_content_token_count: Any = 0
    thoughts_token_count: Any = 0
    tool_use_prompt_token_count: Any = 0


class _Record(TranscriptRecord):
    subtype: Any = None
    system_payload: Any = None
    usage_metadata: _Usage | None = None
    model: Any = None
    tool_call_result: Any = None


class _Fold(Conversation, kw_only=True):
    records: int = 0
    prompt: str | None = None
    title: str | None = None
    title_source: str | None = None
    branch: str | None = None
    child: bool = False
    messages: int = 0


_message_decoder = msgspec.json.Decoder(_Message)


class Qwen(FileSource[_Fold, NoExtra]):
    agent: ClassVar[str] = "qwen"
    record_type = _Record
    tops = ("projects", "tmp")
    home_variable = "QWEN_RUNTIME_DIR"
    home_folder = ".qwen"

    def discover(self, root: Path) -> Discovery:
        # tmp/<hash>/chats is an older layout (unverified; tolerated).
        return folder_files(root, self.tops, ["chats", "chats/archive"], _chat_file)

    def apply(self, fold: _Fold, record: _Record) -> None:
        fold.records += 1
        fold.saw_cwd(record.cwd)
        at = agent_time(record.timestamp)
        fold.saw_time(at, active=False)
        if isinstance(record.git_branch, str) and record.git_branch:
            fold.branch = record.git_branch
        if record.type == "system":
            payload = record.system_payload if isinstance(record.system_payload, dict) else {}
            if record.subtype == "custom_title" and isinstance(payload.get("customTitle"), str):
                fold.title = payload["customTitle"]
                fold.title_source = payload.get("titleSource") if isinstance(payload.get("titleSource"), str) else None
            elif record.subtype == "parent_session":
                fold.child = True
            return  # system records (titles re-anchored every 32 KiB among them) are not activity
        fold.saw_time(at, starts=False)
        if record.type not in ("user", "assistant", "tool_result") or not fold.first_sight(record.uuid, _RECENT):
            return
        parts = _message_decoder.decode(record.message).parts if record.message else None
        parts = parts if isinstance(parts, list) else []
        if record.type == "assistant" and record.usage_metadata is not None:
            self.used(_usage(record.usage_metadata, record.model), at)
        if record.type == "tool_result":
            if record.is_sidechain is not True:
                self._results(fold, parts, record.tool_call_result, at)
            return
        fold.messages += 1
        if record.type == "user" and fold.prompt is None and fold.records <= _PROMPT_LINES:
            fold.prompt = prompt_title(first_text(parts))
        if record.is_sidechain is True:
            return
        if record.type == "user":
            say_unanswered(fold.calls, self.say)
            self.say(Role.USER, _texts(parts), at)
        else:
            self._reply(fold, parts, at)

    def _reply(self, fold: _Fold, parts: list[Any], at: int | None) -> None:
        for part in parts:
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall")
            if isinstance(call, dict):
                key = call.get("id") or call.get("name")
                if isinstance(key, str):
                    held = Call(str(call.get("name") or "tool"), arguments_summary(call.get("args")), at)
                    hold_call(fold.calls, key, held, self.say)
            elif isinstance(part.get("text"), str):
                self.say(Role.THOUGHT if part.get("thought") is True else Role.AGENT, part["text"], at)

    def _results(self, fold: _Fold, parts: list[Any], shown: object, at: int | None) -> None:
        for part in parts:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if not isinstance(response, dict):
                continue
            key = response.get("id") or response.get("name")
            display = shown.get("resultDisplay") if isinstance(shown, dict) else None
            result = display if isinstance(display, str) and display.strip() else result_text(response.get("response"))
            say_result(fold.calls, key, result, at, self.say, name=response.get("name"))

    def draft(self, native_id: str, files: Group, extra: NoExtra | None) -> Reading:
        rel, entry = min(files, key=lambda item: ("/chats/archive/" in item[0], -(item[1].fold.last or 0)))
        fold: _Fold = entry.fold
        skip = None
        if fold.child:
            skip = "sub-session (parent_session record)"
        elif clean_title(fold.title) is None and fold.prompt is None and fold.messages == 0:
            skip = "no messages"
        source = TitleSource.AGENT if fold.title_source == "auto" else TitleSource.USER
        draft = Draft(
            cwd=fold.cwd,
            created=fold.created,
            last=fold.last,
            titles=[(fold.title, source), (fold.prompt, TitleSource.PROMPT)],
            messages=fold.messages,
            git_branch=fold.branch,
            archived="/chats/archive/" in rel,
            skip=skip,
        )
        return Reading(rel, entry, draft)


def _texts(parts: list[Any]) -> str:
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _usage(spent: _Usage, model: object) -> Any:
    def count(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    cached, thoughts = count(spent.cached_content_token_count), count(spent.thoughts_token_count)
    return usage(
        input_tokens=max(0, count(spent.prompt_token_count) - cached) + count(spent.tool_use_prompt_token_count),
        cached_read=cached,
        output_tokens=count(spent.candidates_token_count) + thoughts,
        thought=thoughts,
        model=model,
    )


def _chat_file(rel: str, entry: os.DirEntry[str]) -> list[Found]:
    match = _SESSION_FILE.match(entry.name)
    return [Found(rel, entry.path, native_id=match.group(1).lower())] if match and not is_dir(entry) else []
