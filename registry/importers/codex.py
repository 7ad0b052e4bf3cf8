"""OpenAI Codex CLI: ``<CODEX_HOME or ~/.codex>/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl[.zst]``.

The session id is the UUID in the file name (the first ``session_meta`` says the same; later ones are a forked
parent's, replayed). The date folders and the name's time are *local* time and are never read as times: those
come from the records. Archiving moves a rollout to ``archived_sessions/`` and a background worker may replace
it with a ``.zst``: both keep the session (matched by id), only ``_meta`` changes. Titles: the latest thread
name (a ``thread_name_updated`` event or ``session_index.jsonl``, whichever is newer; USER, as codex keeps it
apart from the derived title) > the first ``user_message`` (PROMPT). Subagent, ``exec`` and ``mcp`` rollouts
are not interactive sessions and are skipped.

**Message count**, as codex's TUI replays a rollout on resume: one per ``event_msg`` of type ``user_message``
(what the user typed) and ``agent_message`` (a reply shown to the user); ``response_item`` records are what
the model was sent and said (context, tool calls, reasoning) and ``turn_context``/``token_count`` are
bookkeeping, none of them a message (openai/codex ``codex-rs/protocol`` ``EventMsg``, rollouts of 0.39 and
0.135 read alike).

**Messages** are those events (and ``agent_reasoning`` as thoughts), with the tool calls of the ``response_item``
records: a ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` said with its ``*_output`` as one tool
message, a ``web_search_call`` with its query. **Usage**: the ``token_count`` events' ``info.total_token_usage``,
the session's running totals, turned into what each added (a total that went down - a resumed session counting
afresh - gives that event's ``last_token_usage``); ``input_tokens`` there include the cached ones
(``cached_input_tokens``) and ``output_tokens`` the reasoning (``reasoning_output_tokens``); the model is the
latest ``turn_context``'s. Codex states no cost.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any, ClassVar, Final

import msgspec

from events.model import Role, TitleSource
from registry.importers.base import (
    Conversation,
    Draft,
    ScanContext,
    agent_time,
    clean_title,
    prompt_title,
)
from registry.importers.files import FileSource, Group, Reading
from registry.importers.folders import Discovery, Found, Index, quiet, refresh_index
from registry.importers.said import (
    Call,
    arguments_summary,
    hold_call,
    result_text,
    say_result,
    say_unanswered,
    tool_text,
    usage,
)

__all__ = ["Codex"]

_ROLLOUT = re.compile(
    r"^rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-"
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl(\.zst)?$"
)
_USER_MESSAGE_BEGIN: Final = "## My request for Codex:"  # legacy prompts carried context before this marker
_ARCHIVED: Final = "archived_sessions"
_NON_INTERACTIVE: Final = {"exec": "non-interactive run (codex exec)", "mcp": "non-interactive run (mcp)"}


class _Line(msgspec.Struct):
    timestamp: Any = None
    type: Any = None
    payload: msgspec.Raw = msgspec.Raw()


class _Payload(msgspec.Struct):
    """What the payloads the fold reads carry: a ``session_meta``'s (``id`` to ``git``), an ``event_msg``'s
    (``type`` to ``info``), a ``response_item``'s - the tool calls and their outputs - or a ``turn_context``'s."""

    id: Any = None
    timestamp: Any = None
    cwd: Any = None
    source: Any = None
    git: Any = None
    type: Any = None
    message: Any = None
    text: Any = None
    thread_name: Any = None
    images: Any = None
    info: Any = None
    name: Any = None
    arguments: Any = None
    input: Any = None
    call_id: Any = None
    output: Any = None
    action: Any = None
    model: Any = None


class _IndexLine(msgspec.Struct):
    id: Any = None
    thread_name: Any = None
    updated_at: Any = None


class _Fold(Conversation, kw_only=True):
    meta_seen: bool = False
    started: int | None = None
    """The ``session_meta``'s own time (else the first record's, ``created``)."""
    skip: str | None = None
    branch: str | None = None
    prompt: str | None = None
    name: str | None = None
    name_at: int = 0
    messages: int = 0
    model: str | None = None
    totals: list[int] = msgspec.field(default_factory=list)
    """The last ``total_token_usage``: input, cached input, cache write, output, reasoning tokens."""


_Names = Index[tuple[str, int]]
"""``session_index.jsonl``: the latest thread name per id, with its time."""


_payload_decoder = msgspec.json.Decoder(_Payload)
_CALLS: Final = {"function_call", "custom_tool_call", "local_shell_call"}
_OUTPUTS: Final = {"function_call_output", "custom_tool_call_output"}
_TOKENS: Final = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")
_index_decoder = msgspec.json.Decoder(_IndexLine)


_KNOWN = quiet(r".+\.(?:json|jsonl|zst|tmp|lock)")


class Codex(FileSource[_Fold, _Names]):
    agent: ClassVar[str] = "codex"
    record_type = _Line
    tops = ("sessions", _ARCHIVED)
    home_variable = "CODEX_HOME"
    home_folder = ".codex"

    def discover(self, root: Path) -> Discovery:
        if not (root / "sessions").is_dir() and not (root / _ARCHIVED).is_dir():
            return Discovery([], complete=False)
        found: dict[str, Found] = {}
        unread: list[str] = []
        complete = True
        for top in ("sessions", _ARCHIVED):
            errors: list[OSError] = []
            for folder, dirs, names in os.walk(root / top, onerror=errors.append):
                dirs.sort()
                for name in sorted(names):
                    match = _ROLLOUT.match(name)
                    if match is None:
                        if not _KNOWN(name):
                            unread.append(os.path.join(folder, name))
                        continue
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, root)
                    plain = rel.removesuffix(".zst")
                    if match.group(2) and plain in found:
                        continue  # a plain file wins over its compressed copy (codex reads it first too)
                    found.pop(plain + ".zst", None)
                    kind = "zst" if match.group(2) else "jsonl"
                    found[rel] = Found(rel, path, kind, match.group(1).lower())
            complete = complete and not any(not isinstance(e, FileNotFoundError) for e in errors)
        return Discovery(list(found.values()), complete, unread)

    def apply(self, fold: _Fold, line: _Line) -> None:
        at = agent_time(line.timestamp)
        fold.saw_time(at, active=False)
        if line.type == "session_meta":
            if fold.meta_seen:
                return  # a forked rollout replays its parent's session_meta: only the first is this session's
            fold.meta_seen = True
            meta = _payload_decoder.decode(line.payload) if line.payload else _Payload()
            fold.saw_cwd(meta.cwd)
            fold.started = agent_time(meta.timestamp) or at
            fold.skip = _source_skip(meta.source)
            if isinstance(meta.git, dict) and isinstance(meta.git.get("branch"), str):
                fold.branch = meta.git["branch"]
            return
        if line.type in ("response_item", "turn_context") and line.payload:
            self._item(fold, _payload_decoder.decode(line.payload), at)
        if line.type == "event_msg" and line.payload:
            event = _payload_decoder.decode(line.payload)
            if event.type == "thread_name_updated":
                if isinstance(event.thread_name, str):
                    fold.name, fold.name_at = event.thread_name, at or 0
                return  # a rename is not activity
            if event.type == "token_count":
                self._tokens(fold, event.info, at)
            elif event.type == "user_message":
                fold.messages += 1
                if fold.prompt is None:
                    fold.prompt = _prompt(event)
                say_unanswered(fold.calls, self.say)
                self.say(Role.USER, _user_text(event), at)
            elif event.type == "agent_message":
                fold.messages += 1
                self.say(Role.AGENT, event.message, at)
            elif event.type == "agent_reasoning":
                self.say(Role.THOUGHT, event.text, at)
        fold.saw_time(at, starts=False)

    def _item(self, fold: _Fold, item: _Payload, at: int | None) -> None:
        if isinstance(item.model, str) and item.model:
            fold.model = item.model  # a turn_context
        if item.type in _CALLS and isinstance(item.call_id, str):
            arguments = item.arguments if item.arguments is not None else item.input
            if item.type == "local_shell_call" and isinstance(item.action, dict):
                arguments = item.action
            name = item.name if isinstance(item.name, str) else "shell"
            hold_call(fold.calls, item.call_id, Call(name, arguments_summary(arguments), at), self.say)
        elif item.type in _OUTPUTS and isinstance(item.call_id, str):
            output = item.output
            if isinstance(output, str) and output.startswith("{"):  # often JSON: {"output": ..., "metadata": ...}
                with contextlib.suppress(msgspec.DecodeError):
                    decoded = msgspec.json.decode(output)
                    output = decoded if isinstance(decoded, dict) else output
            say_result(fold.calls, item.call_id, result_text(output), at, self.say)
        elif item.type == "web_search_call":
            self.say(Role.TOOL, tool_text("web_search", arguments_summary(item.action)), at)

    def _tokens(self, fold: _Fold, info: object, at: int | None) -> None:
        """What one ``token_count`` event adds to the session's running totals."""
        if not isinstance(info, dict):
            return
        total, last = _figures(info.get("total_token_usage")), _figures(info.get("last_token_usage"))
        if total is None:
            return
        if not fold.totals:
            added = total
        elif all(now >= before for now, before in zip(total, fold.totals, strict=True)):
            added = [now - before for now, before in zip(total, fold.totals, strict=True)]
        else:
            added = last or total  # the totals started again (a resumed session): this call's own figures
        fold.totals = total
        spent_last = info.get("last_token_usage")
        used = spent_last.get("total_tokens") if isinstance(spent_last, dict) else None
        self.used(
            usage(
                input_tokens=max(0, added[0] - added[1] - added[2]),
                cached_read=added[1],
                cached_write=added[2],
                output_tokens=added[3],
                thought=added[4],
                model=fold.model,
                context_used=used,
                context_size=info.get("model_context_window"),
            ),
            at,
        )

    def refresh_extra(self, root: Path, extra: _Names | None, ctx: ScanContext) -> tuple[_Names, frozenset[str] | bool]:
        return refresh_index(root / "session_index.jsonl", extra, _index_decoder, _index_line, ctx)

    def draft(self, native_id: str, files: Group, extra: _Names | None) -> Reading:
        # An active rollout wins over an archived copy of the same session (both exist only mid-move).
        rel, entry = min(files, key=lambda item: (item[0].startswith(_ARCHIVED), -(item[1].fold.last or 0)))
        fold: _Fold = entry.fold
        name, name_at = fold.name, fold.name_at
        indexed = (extra.entries if extra is not None else {}).get(native_id)
        if indexed is not None and indexed[1] >= name_at:
            name = indexed[0]
        skip = None
        if not fold.meta_seen:
            skip = "no session_meta record"
        elif fold.skip is not None:
            skip = fold.skip
        elif clean_title(name) is None and fold.prompt is None:
            skip = "no user message"
        draft = Draft(
            cwd=fold.cwd,
            created=fold.started or fold.created,
            last=fold.last,
            titles=[(name, TitleSource.USER), (fold.prompt, TitleSource.PROMPT)],
            messages=fold.messages,
            git_branch=fold.branch,
            archived=rel.startswith(_ARCHIVED),
            skip=skip,
        )
        return Reading(rel, entry, draft)


def _index_line(names: dict[str, tuple[str, int]], line: _IndexLine) -> None:
    if isinstance(line.id, str) and isinstance(line.thread_name, str):
        names[line.id.lower()] = (line.thread_name, agent_time(line.updated_at) or 0)


def _source_skip(source: object) -> str | None:
    if isinstance(source, dict) and "subagent" in source:
        return "subagent thread"
    if isinstance(source, str):
        return _NON_INTERACTIVE.get(source)
    return None


def _figures(value: object) -> list[int] | None:
    """A ``TokenUsage`` as numbers: input, cached input, cache write, output, reasoning tokens."""
    if not isinstance(value, dict):
        return None
    keys = (*_TOKENS, "reasoning_output_tokens")
    return [v if isinstance(v := value.get(k), int) and not isinstance(v, bool) and v > 0 else 0 for k in keys]


def _user_text(event: _Payload) -> str:
    """What the user typed (legacy prompts: after ``_USER_MESSAGE_BEGIN``); ``[image]`` for pictures alone."""
    text = event.message if isinstance(event.message, str) else ""
    _, marker, after = text.partition(_USER_MESSAGE_BEGIN)
    text = after.strip() if marker else text
    return text if text.strip() or not event.images else "[image]"


def _prompt(event: _Payload) -> str | None:
    text = event.message if isinstance(event.message, str) else ""
    _, marker, after = text.partition(_USER_MESSAGE_BEGIN)
    if marker:
        text = after
    if not text.strip() and event.images:
        return "[Image]"
    return prompt_title(text)
