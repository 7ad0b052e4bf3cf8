"""Gemini CLI: ``<GEMINI_CLI_HOME or ~>/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`` (legacy ``.json``).

A chat file is append-only but is *not* an append-only message log: a message is re-appended whole when it
changes (the last one wins, in its first place), ``{"$rewindTo": id}`` drops that message and all after it, and a
``{"$set": {"messages": [...]}}`` checkpoint replaces them all - so the fold keeps the ordered message ids.
The cwd is not in the session: it is the project root the folder belongs to (``.project_root`` in the folder,
else ``projects.json``, else - for the older ``tmp/<sha256 of the project root>/`` folders - the root whose hash
is the folder's name, among the roots ``projects.json`` names and the working directories the registry knows:
its store's sessions and this import's other agents', so Gemini is read after them; the hash is Gemini CLI's
``getProjectHash`` in ``packages/core/src/utils/paths.ts``: the hex sha256 of the root's path). Titles:
the AI summary (AGENT) > the first resumable user message (PROMPT) > the first user message even if it is a
slash command (PROMPT); there is no user-set title.

As Gemini CLI's own session list shows them (google-gemini/gemini-cli ``packages/cli/src/utils/
sessionUtils.ts``, ``getAllSessionFiles``): **message count** is every message of the conversation -
``user``, ``gemini``, and the ``info``/``error``/``warning`` lines it shows - after rewinds and checkpoints;
a session holding only ``info``/``error``/``warning`` messages is empty and not listed, nor is a
``kind: subagent`` chat.

**Messages** are said once a read has folded its records, in the conversation's order (so a message re-appended
whole in the same read is said as it ended, and a rewound one not at all): a ``user`` message's text, a
``gemini`` message's ``thoughts`` (subject and description), its text, and each of its ``toolCalls`` once it has
a final status (name, arguments, ``resultDisplay`` or the function's response); ``info``/``error``/``warning``
lines are Gemini CLI's, not the conversation's. A message is said once (the fold marks it): a later record of it
can add its tool calls and tokens, never say its text again; what a later pass rewinds stays said. **Usage**: a
``gemini`` message's ``tokens`` (``input`` holds the ``cached`` ones; ``thoughts`` and ``tool`` come on top of
``output`` and ``input``), counted once per message, with its ``model``. Gemini CLI states no cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final, NamedTuple

import msgspec

from events.model import Role, TitleSource
from registry.importers.base import (
    Activity,
    Draft,
    ScanContext,
    agent_time,
    env_path,
    home,
    prompt_title,
)
from registry.importers.files import FileSource, Group, Reading
from registry.importers.folders import Discovery, Found, folder_files, is_dir, scandir
from registry.importers.lines import open_regular
from registry.importers.said import arguments_summary, result_text, tool_text, usage

__all__ = ["Gemini"]

_SESSION_FILE = re.compile(r"^session-.+\.(jsonl|json)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NOT_RESUMABLE: Final = ("/", "?", "<session_context>", "<hook_context>")
_SETUP: Final = ("<session_context>", "<hook_context>")  # Gemini CLI's own context messages: not the user's words
_SMALL_FILE: Final = 1 << 20
_TEXT_SAID: Final = 1
_TOKENS_SAID: Final = 2
_CALLS_SHIFT: Final = 2
_FINAL: Final = frozenset({"success", "error", "cancelled", "canceled"})


class _Header(msgspec.Struct, rename="camel"):
    """What a chat says about its session: a ``.jsonl``'s header record, or the top of a legacy ``.json``."""

    session_id: Any = None
    project_hash: Any = None
    start_time: Any = None
    last_updated: Any = None
    kind: Any = None
    directories: Any = None
    summary: Any = None


class _Record(_Header, rename="camel"):
    id: Any = None
    timestamp: Any = None
    type: Any = None
    content: msgspec.Raw = msgspec.Raw()
    thoughts: Any = None
    tool_calls: Any = None
    tokens: Any = None
    model: Any = None
    set: Any = msgspec.field(default=None, name="$set")
    rewind_to: Any = msgspec.field(default=None, name="$rewindTo")


class _Document(_Header, rename="camel"):
    messages: Any = None


class _Fold(Activity, kw_only=True):
    project_dir: str
    session_id: str | None = None
    project_hash: str | None = None
    start: int | None = None
    updated: int | None = None
    kind: str | None = None
    summary: str | None = None
    directories: list[str] = msgspec.field(default_factory=list)
    messages: dict[str, str] = msgspec.field(default_factory=dict)
    """Message id -> type, in first-appearance order (a re-appended message keeps its place)."""
    prompts: dict[str, str] = msgspec.field(default_factory=dict)
    """User message id -> its text, for the resumable ones (the title falls back to the first)."""
    commands: dict[str, str] = msgspec.field(default_factory=dict)
    """User message id -> its text, for the slash commands (a title of last resort)."""
    said: dict[str, int] = msgspec.field(default_factory=dict)
    """Message id -> what of it was said: its text (1), its tokens (2), and (above) how many of its tool calls."""


class _Message(NamedTuple):
    """A message record as a read last saw it."""

    type: str
    content: object
    at: int | None
    thoughts: object
    tool_calls: object
    tokens: object
    model: object


class _Projects(msgspec.Struct, kw_only=True):
    roots: dict[str, str] = msgspec.field(default_factory=dict)
    """Project folder name under ``tmp/`` -> project root (the cwd of its sessions)."""
    hashes: dict[str, str] = msgspec.field(default_factory=dict)
    """sha256 of a known project root -> that root (for headers' ``projectHash``)."""


_document_decoder = msgspec.json.Decoder(_Document)


class Gemini(FileSource[_Fold, _Projects]):
    agent: ClassVar[str] = "gemini"
    uses_known_cwds: ClassVar[bool] = True
    """Read after the other agents: their sessions' directories may name its hash-named folders."""
    record_type = _Record
    tops = ("tmp",)

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, _Message] = {}  # the messages the read under way folded in, latest record each

    def default_root(self, environ: Mapping[str, str]) -> Path:
        return (env_path(environ, "GEMINI_CLI_HOME") or home(environ)) / ".gemini"

    def discover(self, root: Path) -> Discovery:
        return folder_files(root, self.tops, ["chats"], _chat_file)

    def new_fold(self, found: Found) -> _Fold:
        return _Fold(project_dir=found.rel.split("/")[1])  # tmp/<project>/chats/<file>

    def identify(self, found: Found, fold: _Fold) -> str | None:
        return fold.session_id

    def apply(self, fold: _Fold, record: _Record) -> None:
        if record.set is not None:
            if isinstance(record.set, dict):
                self._set(fold, record.set)
        elif record.rewind_to is not None:
            self._rewind(fold, record.rewind_to)
        elif record.id is not None and record.type is not None:
            content = msgspec.json.decode(record.content) if record.content else None
            self._message(fold, record.id, record.type, content, record.timestamp)
            if self._saying is not None and isinstance(record.id, str) and isinstance(record.type, str):
                self._seen[record.id] = _Message(
                    record.type,
                    content,
                    agent_time(record.timestamp),
                    record.thoughts,
                    record.tool_calls,
                    record.tokens,
                    record.model,
                )
        elif record.session_id is not None:
            self._header(fold, record)

    def apply_document(self, fold: _Fold, data: bytes) -> None:
        document = _document_decoder.decode(data)
        self._header(fold, document)
        if isinstance(document.messages, list):
            self._checkpoint(fold, document.messages)

    @staticmethod
    def _header(fold: _Fold, header: _Header) -> None:
        if isinstance(header.session_id, str) and fold.session_id is None:
            fold.session_id = header.session_id
        if isinstance(header.project_hash, str):
            fold.project_hash = header.project_hash
        fold.start = agent_time(header.start_time) or fold.start
        fold.updated = agent_time(header.last_updated) or fold.updated
        if isinstance(header.kind, str):
            fold.kind = header.kind
        if isinstance(header.summary, str):
            fold.summary = header.summary
        if isinstance(header.directories, list):
            fold.directories = [d for d in header.directories if isinstance(d, str)]

    def _set(self, fold: _Fold, changes: dict[str, Any]) -> None:
        if "lastUpdated" in changes:
            fold.updated = agent_time(changes["lastUpdated"]) or fold.updated
        if isinstance(changes.get("summary"), str):
            fold.summary = changes["summary"]
        if isinstance(changes.get("kind"), str):
            fold.kind = changes["kind"]
        if isinstance(changes.get("messages"), list):
            self._checkpoint(fold, changes["messages"])

    def _checkpoint(self, fold: _Fold, messages: list[Any]) -> None:
        fold.messages, fold.prompts, fold.commands = {}, {}, {}
        for message in messages:
            if isinstance(message, dict):
                mid, kind = message.get("id"), message.get("type")
                self._message(fold, mid, kind, message.get("content"), message.get("timestamp"))
                if self._saying is not None and isinstance(mid, str) and isinstance(kind, str):
                    self._seen[mid] = _Message(
                        kind,
                        message.get("content"),
                        agent_time(message.get("timestamp")),
                        message.get("thoughts"),
                        message.get("toolCalls"),
                        message.get("tokens"),
                        message.get("model"),
                    )
        fold.said = {k: v for k, v in fold.said.items() if k in fold.messages}

    @staticmethod
    def _rewind(fold: _Fold, target: object) -> None:
        ids = list(fold.messages)
        keep = ids.index(target) if isinstance(target, str) and target in fold.messages else 0
        for dropped in ids[keep:]:
            del fold.messages[dropped]
            fold.prompts.pop(dropped, None)
            fold.commands.pop(dropped, None)
            fold.said.pop(dropped, None)

    def finish(self, fold: _Fold) -> None:
        """Say the messages this read folded in, in the conversation's order: what of each was not said yet."""
        seen, self._seen = self._seen, {}
        for mid in fold.messages:
            message = seen.get(mid)
            if message is not None:
                fold.said[mid] = self._said(message, fold.said.get(mid, 0))

    def _said(self, message: _Message, flags: int) -> int:
        at = message.at
        if not flags & _TEXT_SAID:
            flags |= _TEXT_SAID
            if message.type == "user":
                text = _text(message.content)
                if not text.strip().startswith(_SETUP):
                    self.say(Role.USER, text, at)
            elif message.type == "gemini":
                for thought in message.thoughts if isinstance(message.thoughts, list) else ():
                    self.say(Role.THOUGHT, _thought(thought), at)
                self.say(Role.AGENT, _text(message.content), at)
        calls = message.tool_calls if isinstance(message.tool_calls, list) else []
        done = flags >> _CALLS_SHIFT
        for call in calls[done:]:
            if not isinstance(call, dict) or call.get("status") not in _FINAL:
                break  # said in order: a call still running holds the ones after it
            self.say(Role.TOOL, _call(call), at)
            done += 1
        flags = (flags & ((1 << _CALLS_SHIFT) - 1)) | (done << _CALLS_SHIFT)
        tokens = message.tokens
        if isinstance(tokens, dict) and not flags & _TOKENS_SAID:
            flags |= _TOKENS_SAID
            self.used(_usage(tokens, message.model), at)
        return flags

    @staticmethod
    def _message(fold: _Fold, message_id: object, kind: object, content: object, timestamp: object) -> None:
        if not isinstance(message_id, str) or not isinstance(kind, str):
            return
        fold.messages[message_id] = kind
        if kind == "user":
            text = _text(content).strip()
            fold.prompts.pop(message_id, None)
            fold.commands.pop(message_id, None)
            if text and not text.startswith(_NOT_RESUMABLE):
                fold.prompts[message_id] = prompt_title(text) or ""
            elif text and not text.startswith(_SETUP):
                fold.commands[message_id] = prompt_title(text) or ""
        fold.saw_span(agent_time(timestamp))

    def refresh_extra(
        self, root: Path, extra: _Projects | None, ctx: ScanContext
    ) -> tuple[_Projects | None, frozenset[str] | bool]:
        known: dict[str, str] = {}  # project root -> its folder name, from projects.json
        data = _small_file(root / "projects.json")
        if data is not None:
            try:
                projects = json.loads(data).get("projects")
            except (ValueError, AttributeError):
                ctx.skip(str(root / "projects.json"), "unreadable JSON")
                projects = None
            if isinstance(projects, dict):
                known = {k: v for k, v in projects.items() if isinstance(k, str) and isinstance(v, str)}
        roots: dict[str, str] = {}
        for project in scandir(root / "tmp") or []:
            marker = _small_file(Path(project.path) / ".project_root")
            if marker is not None and marker.strip():
                roots[project.name] = marker.decode(errors="replace").strip()
        for path, folder in known.items():
            roots.setdefault(folder, path)
        every_root = set(known) | set(roots.values())
        hashes = {_sha256(p): p for p in every_root}
        unknown = [p.name for p in scandir(root / "tmp") or [] if _SHA256.match(p.name) and p.name not in roots]
        if any(name not in hashes for name in unknown):
            # An older folder named by the hash of its root: perhaps a directory the registry knows already.
            elsewhere = {_sha256(cwd): cwd for cwd in ctx.known_cwds()}
            hashes.update((name, elsewhere[name]) for name in unknown if name in elsewhere and name not in hashes)
        for name in unknown:
            if name in hashes:
                roots[name] = hashes[name]
        fresh = _Projects(roots=roots, hashes=hashes)
        return fresh, fresh != extra

    def draft(self, native_id: str, files: Group, extra: _Projects | None) -> Reading:
        # A resumed legacy .json is migrated to a .jsonl beside it, and the old file stays: the .jsonl wins.
        rel, entry = min(files, key=lambda item: (item[1].kind != "jsonl", -(item[1].fold.updated or 0)))
        fold: _Fold = entry.fold
        projects = extra or _Projects()
        project_root = projects.roots.get(fold.project_dir) or projects.hashes.get(fold.project_hash or "")
        skip = None
        if fold.kind == "subagent":
            skip = "subagent chat"
        elif not fold.prompts and "gemini" not in fold.messages.values():
            # Gemini CLI lists a chat only when it has something to resume: a prompt (not a /command, ?help or its
            # own <session_context>, which it writes into a chat file of its own on authenticate) or a model reply.
            skip = "no prompt and no model message (Gemini CLI does not list it)"
        elif project_root is None:
            skip = "project root unknown (not in projects.json, no .project_root, no known directory hashes to it)"
        first_prompt = next((fold.prompts[i] for i in fold.messages if fold.prompts.get(i)), None)
        first_command = next((fold.commands[i] for i in fold.messages if fold.commands.get(i)), None)
        draft = Draft(
            cwd=project_root,
            created=fold.start or fold.updated or fold.created,
            last=fold.updated or fold.last,
            titles=[
                (fold.summary, TitleSource.AGENT),
                (first_prompt, TitleSource.PROMPT),
                (first_command, TitleSource.PROMPT),
            ],
            messages=len(fold.messages),
            directories=fold.directories,
            skip=skip,
        )
        return Reading(rel, entry, draft)


def _thought(thought: object) -> str:
    if not isinstance(thought, dict):
        return ""
    subject, description = thought.get("subject"), thought.get("description")
    parts = [p for p in (subject, description) if isinstance(p, str) and p.strip()]
    return ": ".join(parts)


def _call(call: dict[str, Any]) -> str:
    """A tool call with its final status as one message: its name, arguments, and what it gave back."""
    name = call.get("name") or call.get("displayName")
    shown = call.get("resultDisplay")
    result = shown if isinstance(shown, str) else ""
    if not result.strip():
        parts = call.get("result")
        responses = [p.get("functionResponse") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        result = "\n".join(result_text(r.get("response")) for r in responses if isinstance(r, dict))
    return tool_text(name, arguments_summary(call.get("args")), result)


def _usage(tokens: dict[str, Any], model: object) -> Any:
    """A message's ``tokens`` (Gemini's usage metadata: ``input`` includes ``cached``; ``thoughts`` and ``tool``
    prompt tokens are apart from ``output`` and ``input``)."""

    def count(key: str) -> int:
        value = tokens.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    cached, thoughts = count("cached"), count("thoughts")
    return usage(
        input_tokens=max(0, count("input") - cached) + count("tool"),
        cached_read=cached,
        output_tokens=count("output") + thoughts,
        thought=thoughts,
        model=model,
    )


def _sha256(path: str) -> str:
    return hashlib.sha256(path.encode(errors="surrogateescape")).hexdigest()


def _chat_file(rel: str, entry: os.DirEntry[str]) -> list[Found]:
    # Subagent chats live in chats/<parent id>/: folders are never descended into.
    match = _SESSION_FILE.match(entry.name)
    if match is not None and not is_dir(entry):
        return [Found(rel, entry.path, match.group(1))]
    return []


def _text(content: object) -> str:
    """The text of a Gemini ``PartListUnion``: a string, a part, or a list of either."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if isinstance(content, list):
        return "".join(_text(part) for part in content)  # as Gemini CLI joins a message's parts
    return ""


def _small_file(path: Path) -> bytes | None:
    try:
        with open_regular(str(path)) as f:
            return f.read(_SMALL_FILE)
    except OSError:
        return None
