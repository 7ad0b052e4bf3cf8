"""Kimi CLI: ``<KIMI_SHARE_DIR or ~/.kimi>/sessions/<md5(work dir)>/<uuid>/{context,wire}.jsonl, state.json``.

Format knowledge, checked in MoonshotAI/kimi-cli (``src/kimi_cli/session.py`` ``Session.list``/``is_empty``/
``refresh``, ``ui/shell/replay.py``, ``wire/file.py``, ``session_state.py``), versions 0.x to 1.x:

- **Layouts**: the current one keeps ``context.jsonl`` (the model's history, rewritten on compaction),
  ``wire.jsonl`` (the UI's event log, append-only) and ``state.json`` in ``<uuid>/``. Older sessions have no
  ``wire.jsonl`` (only ``context.jsonl``), and the oldest are a flat ``<md5>/<uuid>.jsonl`` context file that
  Kimi moves into ``<uuid>/context.jsonl`` when it next lists them. All three are read (the flat file in place:
  it is never moved here).
- **Listed** as Kimi lists them: a session needs a ``context.jsonl`` (or the flat file) and is empty - not
  listed - unless it has a ``custom_title``, a ``wire.jsonl`` record other than its metadata line, or a
  context record whose ``role`` does not start with ``_`` (``_checkpoint``, ``_usage``, ``_system_prompt``
  are bookkeeping). The folder hash is reversible only through ``kimi.json`` (its ``work_dirs``): a session
  whose folder matches no work dir has no known cwd and is skipped until one does.
- **Message count**, as Kimi replays a session: turns. A user message - a ``TurnBegin``/``SteerInput`` in
  ``wire.jsonl``, or in ``context.jsonl`` a ``user`` record that is not Kimi's own (``<system>CHECKPOINT``,
  ``<notification ...``, ``<system-reminder>``) - counts one, and the assistant's reply to it one more (any
  number of steps and tool calls make one reply).
- **Times**: ``wire.jsonl`` records carry epoch-float ``timestamp``s (created: the first, activity: the last).
  ``context.jsonl`` records carry none, so a session without a wire log has only its file's modification
  time - which is what Kimi itself shows for every session.
- **Titles**: Kimi fills ``custom_title`` itself with the shortened first prompt and keeps no reliable flag for
  a title the user chose: a title that is the first prompt is PROMPT, any other is AGENT - never USER; without
  one, the first prompt (PROMPT). ``state.json`` ``archived`` marks archived sessions; a deleted session's
  folder is gone (``rmtree``). ``subagents/`` inside a session are not sessions.
- **Messages**, from the file that gives the session's times: in ``wire.jsonl`` a ``TurnBegin``/``SteerInput``'s
  input, the reply's ``TextPart``/``ThinkPart`` chunks (consecutive chunks of one kind are one message, said when
  something else follows), each ``ToolCall`` (its arguments streamed in ``ToolCallPart``s) with its
  ``ToolResult`` as one tool message; in ``context.jsonl`` the ``user``/``assistant`` records (``think`` parts are
  thoughts, ``tool_calls`` said with the ``tool`` record that answers them). **Usage**: the wire log's
  ``StatusUpdate.token_usage`` - one model call's ``input_other``, ``output``, ``input_cache_read``,
  ``input_cache_creation``, once per ``message_id`` - subagents' (``SubagentEvent``) included; the wire log names
  no model, and Kimi states no cost. A session with only a context file has no usage (its ``_usage`` records are
  the context's size, not what a call used).
"""

from __future__ import annotations

import hashlib
import json
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
    first_text,
    is_uuid,
    prompt_title,
)
from registry.importers.files import FileEntry, FileSource, Group, Reading
from registry.importers.folders import Discovery, Found, folder_files, is_dir, session_folder
from registry.importers.lines import open_regular
from registry.importers.said import Call, arguments_summary, hold_call, result_text, say_result, say_unanswered, usage

__all__ = ["Kimi"]

_SMALL_FILE: Final = 4 << 20
_KIMI_OWN = re.compile(r"^\s*(?:<system>CHECKPOINT|<notification |<system-reminder>)")
_KIMI_CODE_SESSION = re.compile(r"^session_[A-Za-z0-9._-]+$")
_RECENT: Final = 32
_CHUNKS: Final = {"TextPart": "text", "ThinkPart": "think", "ContentPart": None}


class _WireMessage(msgspec.Struct):
    type: Any = None
    payload: msgspec.Raw = msgspec.Raw()


class _Line(msgspec.Struct):
    """A ``wire.jsonl`` record (``timestamp``, ``message``) or a ``context.jsonl`` one (``role``, ``content``)."""

    type: Any = None
    timestamp: Any = None
    message: _WireMessage | None = None
    role: Any = None
    content: Any = None
    tool_calls: Any = None
    tool_call_id: Any = None


class _Payload(msgspec.Struct):
    """What the wire events the conversation is read from carry (a ``TurnBegin``'s and ``SteerInput``'s
    ``user_input`` too)."""

    user_input: Any = None
    type: Any = None
    text: Any = None
    think: Any = None
    id: Any = None
    function: Any = None
    arguments_part: Any = None
    tool_call_id: Any = None
    return_value: Any = None
    token_usage: Any = None
    message_id: Any = None
    context_tokens: Any = None
    max_context_tokens: Any = None
    event: Any = None


class _State(msgspec.Struct):
    custom_title: Any = None
    archived: Any = None
    additional_dirs: Any = None


class _Fold(CountedConversation, kw_only=True):
    """A tool call streamed in parts holds its raw arguments as its ``summary`` until its result comes."""

    hash_dir: str
    role: str
    """``wire``, ``context`` or ``state``: which of a session's files this is."""
    prompt: str | None = None
    replied: bool = True
    """The current turn has its reply counted already (True before the first user message)."""
    content: bool = False
    """A record that makes the session non-empty for Kimi's list."""
    custom_title: str | None = None
    archived: bool = False
    additional_dirs: list[str] = msgspec.field(default_factory=list)
    chunk: tuple[str, str, int | None] | None = None
    """The reply's text (or thinking) streamed so far - role, text, time - said when something else follows."""
    spent: list[str] = msgspec.field(default_factory=list)
    """The latest ``message_id``s whose usage was counted."""


class _WorkDirs(msgspec.Struct, kw_only=True):
    dirs: dict[str, str] = msgspec.field(default_factory=dict)
    """Session folder name (``<md5>`` or ``<kaos>_<md5>``) -> work dir."""


_payload_decoder = msgspec.json.Decoder(_Payload)
_state_decoder = msgspec.json.Decoder(_State)


class Kimi(FileSource[_Fold, _WorkDirs]):
    agent: ClassVar[str] = "kimi"
    record_type = _Line
    tops = ("sessions",)
    home_variable = "KIMI_SHARE_DIR"
    home_folder = ".kimi"

    def discover(self, root: Path) -> Discovery:
        discovery = folder_files(root, self.tops, [""], _session_files)
        kimi_code = [p for p in discovery.unread if _KIMI_CODE_SESSION.match(os.path.basename(p))]
        if kimi_code:  # said once, not once per folder: the whole root is another agent's
            others = [p for p in discovery.unread if p not in kimi_code]
            note = f"{kimi_code[0]} (and {len(kimi_code) - 1} more): Kimi Code sessions, read with --agent kimi-code"
            return discovery._replace(unread=[note, *others])
        return discovery

    def new_fold(self, found: Found) -> _Fold:
        role = "state" if found.kind == "json" else ("wire" if found.rel.endswith("/wire.jsonl") else "context")
        return _Fold(hash_dir=found.rel.split("/")[1], role=role)  # sessions/<hash>/...

    def apply(self, fold: _Fold, record: _Line) -> None:
        if fold.role == "wire":
            self._wire(fold, record)
        else:
            self._context(fold, record)

    def _wire(self, fold: _Fold, record: _Line) -> None:
        if record.type == "metadata":
            return
        fold.content = True
        at = agent_time(record.timestamp)
        fold.saw_span(at)
        message = record.message
        if message is None:
            return
        if message.type in ("TurnBegin", "SteerInput"):
            fold.prompts += 1
            fold.replied = False
            text = first_text(_payload_decoder.decode(message.payload).user_input) if message.payload else ""
            if fold.prompt is None:
                fold.prompt = prompt_title(text)
            self._flush(fold, calls=True)
            self.say(Role.USER, text, at)
            return
        if message.type == "StepBegin" and not fold.replied:
            fold.replies += 1
            fold.replied = True
        payload = _payload_decoder.decode(message.payload) if message.payload else _Payload()
        if message.type in _CHUNKS:
            self._chunk(fold, payload, at)
            return
        if message.type == "ToolCallPart" and fold.calls and isinstance(payload.arguments_part, str):
            key = next(reversed(fold.calls))
            call = fold.calls[key]
            fold.calls[key] = Call(call.name, call.summary + payload.arguments_part, call.at)
            return
        self._flush(fold)
        if message.type == "ToolCall" and isinstance(payload.id, str):
            function = payload.function if isinstance(payload.function, dict) else {}
            arguments = function.get("arguments")
            self._call(fold, payload.id, function.get("name"), arguments if isinstance(arguments, str) else "", at)
        elif message.type == "ToolResult" and isinstance(payload.tool_call_id, str):
            value = payload.return_value if isinstance(payload.return_value, dict) else {}
            self._result(fold, payload.tool_call_id, value.get("output") or value.get("message"), at)
        elif message.type == "StatusUpdate":
            self._usage(fold, payload, at)
        elif message.type == "SubagentEvent" and isinstance(payload.event, dict):
            inner = payload.event
            if inner.get("type") == "StatusUpdate" and isinstance(inner.get("payload"), dict):
                self._usage(fold, msgspec.convert(inner["payload"], _Payload), at)

    def _chunk(self, fold: _Fold, payload: _Payload, at: int | None) -> None:
        think = payload.type == "think"
        text = payload.think if think else payload.text
        if not isinstance(text, str):
            return
        role = (Role.THOUGHT if think else Role.AGENT).value
        if fold.chunk is not None and fold.chunk[0] == role:
            fold.chunk = (role, fold.chunk[1] + text, fold.chunk[2])
        else:
            self._flush(fold)
            fold.chunk = (role, text, at)

    def _flush(self, fold: _Fold, *, calls: bool = False) -> None:
        """Say the reply streamed so far (and, at a new prompt, the calls whose results never came)."""
        if fold.chunk is not None:
            role, text, at = fold.chunk
            self.say(Role(role), text, at)
            fold.chunk = None
        if calls:
            say_unanswered(fold.calls, self.say, summary=arguments_summary)

    def _call(self, fold: _Fold, key: str, name: object, arguments: str, at: int | None) -> None:
        call = Call(name if isinstance(name, str) else "tool", arguments, at)
        hold_call(fold.calls, key, call, self.say, summary=arguments_summary)

    def _result(self, fold: _Fold, key: str, output: object, at: int | None) -> None:
        say_result(fold.calls, key, result_text(output), at, self.say, summary=arguments_summary)

    def _usage(self, fold: _Fold, payload: _Payload, at: int | None) -> None:
        spent = payload.token_usage
        if not isinstance(spent, dict):
            return
        if isinstance(payload.message_id, str):
            if payload.message_id in fold.spent:
                return  # the same step's usage again
            fold.spent.append(payload.message_id)
            del fold.spent[:-_RECENT]
        self.used(
            usage(
                input_tokens=spent.get("input_other"),
                output_tokens=spent.get("output"),
                cached_read=spent.get("input_cache_read"),
                cached_write=spent.get("input_cache_creation"),
                context_used=payload.context_tokens,
                context_size=payload.max_context_tokens,
            ),
            at,
        )

    def _context(self, fold: _Fold, record: _Line) -> None:
        role = record.role
        if not isinstance(role, str) or role.startswith("_"):
            return
        fold.content = True
        if role == "user":
            text = first_text(record.content)
            if _KIMI_OWN.match(text):
                return
            fold.prompts += 1
            fold.replied = False
            if fold.prompt is None:
                fold.prompt = prompt_title(text)
            self._flush(fold, calls=True)
            self.say(Role.USER, text, None)
        elif role == "assistant":
            if not fold.replied:
                fold.replies += 1
                fold.replied = True
            for part in record.content if isinstance(record.content, list) else [record.content]:
                if isinstance(part, str):
                    self.say(Role.AGENT, part, None)
                elif isinstance(part, dict) and part.get("type") == "think":
                    self.say(Role.THOUGHT, part.get("think"), None)
                elif isinstance(part, dict):
                    self.say(Role.AGENT, part.get("text"), None)
            for call in record.tool_calls if isinstance(record.tool_calls, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(call.get("id"), str):
                    arguments = function.get("arguments")
                    self._call(
                        fold, call["id"], function.get("name"), arguments if isinstance(arguments, str) else "", None
                    )
        elif role == "tool" and isinstance(record.tool_call_id, str):
            self._result(fold, record.tool_call_id, record.content, None)

    def apply_document(self, fold: _Fold, data: bytes) -> None:
        state = _state_decoder.decode(data)
        fold.custom_title = state.custom_title if isinstance(state.custom_title, str) else None
        fold.archived = state.archived is True
        dirs = state.additional_dirs if isinstance(state.additional_dirs, list) else []
        fold.additional_dirs = [d for d in dirs if isinstance(d, str)]

    def refresh_extra(
        self, root: Path, extra: _WorkDirs | None, ctx: ScanContext
    ) -> tuple[_WorkDirs | None, frozenset[str] | bool]:
        path = root / "kimi.json"
        try:
            with open_regular(str(path)) as f:
                work_dirs = json.loads(f.read(_SMALL_FILE)).get("work_dirs")
        except FileNotFoundError:
            work_dirs = []
        except (OSError, ValueError, AttributeError, RecursionError) as exc:
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

    def draft(self, native_id: str, files: Group, extra: _WorkDirs | None) -> Reading:
        by_role: dict[str, tuple[str, FileEntry[Any]]] = {}
        for rel, entry in files:  # sorted: <hash>/<uuid>.jsonl (flat) before <hash>/<uuid>/context.jsonl
            by_role[entry.fold.role] = (rel, entry)
        wire, context = by_role.get("wire"), by_role.get("context")
        state: _Fold | None = by_role["state"][1].fold if "state" in by_role else None
        rel, entry = wire if wire is not None and wire[1].fold.content else (context or wire or by_role["state"])
        fold: _Fold = entry.fold
        custom = state.custom_title if state is not None else None
        skip = None
        if context is None:
            skip = "no context.jsonl (Kimi does not list it)"
        elif not (clean_title(custom) or fold.content or context[1].fold.content):
            skip = "empty session"
        elif (extra or _WorkDirs()).dirs.get(fold.hash_dir) is None:
            skip = "work dir unknown (no kimi.json entry hashes to its folder)"
        created, last = fold.created, fold.last
        if fold.role == "context":  # no times in the records: the file's, as Kimi shows it
            created = last = entry.tail.mtime_ns
        prompt = fold.prompt or (context[1].fold.prompt if context is not None else None)
        source = TitleSource.PROMPT if _is_prompt(clean_title(custom) or "", prompt) else TitleSource.AGENT
        draft = Draft(
            cwd=(extra or _WorkDirs()).dirs.get(fold.hash_dir),
            created=created,
            last=last,
            titles=[(custom, source), (prompt, TitleSource.PROMPT)],
            messages=fold.messages,
            archived=state is not None and state.archived,
            directories=state.additional_dirs if state is not None else (),
            skip=skip,
        )
        in_folder = rel.count("/") == 3  # sessions/<hash>/<uuid>/<file>, not the flat sessions/<hash>/<uuid>.jsonl
        speaker = (wire or context or (rel, entry))[0]  # the wire log when there is one, even before its first turn
        return Reading(rel, entry, draft, path=str(Path(entry.path).parent) if in_folder else None, speaker=speaker)


def _session_files(rel: str, entry: os.DirEntry[str]) -> list[Found] | None:
    name = entry.name
    if name.endswith(".jsonl") and is_uuid(name[:-6]) and not is_dir(entry):  # the flat legacy context file
        return [Found(rel, entry.path, "jsonl", name[:-6])]
    if not is_uuid(name) or not is_dir(entry):
        return None
    return session_folder(rel, entry, [("context.jsonl", "jsonl"), ("wire.jsonl", "jsonl"), ("state.json", "json")])


def _is_prompt(title: str, prompt: str | None) -> bool:
    """Kimi's own title: the first prompt, shortened (perhaps with a trailing ellipsis)."""
    if prompt is None:
        return False
    stem = title.rstrip(".… ")
    return bool(stem) and prompt.startswith(stem)
