"""Claude Code: ``<CLAUDE_CONFIG_DIR or ~/.claude>/projects/<encoded cwd>/<uuid>.jsonl``, append-only.

Format knowledge, checked against the transcripts Claude Code 1.0.x and 2.1.x write and against Anthropic's
own reader of them, the Agent SDK (anthropics/claude-agent-sdk-python ``_internal/sessions.py``:
``_parse_session_info_from_lite``, ``_extract_first_prompt_from_head``, ``_is_visible_message``):

- The folder name encodes the cwd lossily (every non-alphanumeric character becomes ``-``), so the cwd is
  taken from the records. Subagent transcripts (``agent-*.jsonl``, ``<id>/subagents/**/agent-*.jsonl``, a first
  record with ``isSidechain: true``) are not sessions: they are read beside their session for its usage.
- **The session's own records**: a transcript that continues an earlier session begins with that session's
  history, under the earlier ``sessionId``. Only records with this file's session id give its created time,
  its activity and its messages (the file name is authoritative, as in Zed's claude-code-acp).
- **Message count**, as Claude Code's transcript view shows messages: real prompts - ``user`` records that are
  not ``isMeta``, ``isCompactSummary``, ``isSidechain`` or a team's, not tool-result carriers (a prompt that is
  only a pasted image counts: the UI shows it as a message), and not text the
  tool itself writes as ``user``: interrupt markers (``[Request interrupted by user...]``), slash-command echoes
  (``<command-name>``, ``<command-message>``, ``<command-args>``, ``<local-command-stdout>``,
  ``<local-command-stderr>``, ``<local-command-caveat>``), hook and IDE context (``<session-start-hook>``,
  ``<user-prompt-submit-hook>``, ``<system-reminder>``, ``<ide_opened_file>``, ``<ide_selection>``, ``<tick>``,
  ``<goal>``) - plus assistant replies counted once per ``message.id`` (one API reply is streamed as several
  lines - thinking, text, each tool use - sharing its id).
- **Titles**, last wins within each kind, in this order: ``custom-title`` (the user's: USER) > ``ai-title``
  (AGENT) > ``last-prompt`` (PROMPT) > ``summary`` (AGENT) > the first real prompt (PROMPT) > the first
  slash command's name (PROMPT). A file with none of them holds only metadata and is not listed (the SDK
  drops those too). A session whose last ``tag`` is ``__hidden`` (the SDK's soft delete) counts as deleted.
- **Whose summary**: Claude Code writes ``summary`` records for every conversation of the project that lacks
  one into whichever transcript is open (anthropics/claude-code#2597), and its ``/resume`` list gives a summary
  to the conversation whose leaf message has the summary's ``leafUuid``. So a ``summary`` is this session's
  only when its ``leafUuid`` is one of this session's own records (with this file's ``sessionId``); the others
  are about other sessions and are ignored. The fold remembers the uuids of the session's last ``_LEAVES``
  records (a summary is written after the leaf it names, at the next start in the project), so a summary of an
  older leaf is missed - the title then falls back to the first prompt, never to another session's summary.
  (The Agent SDK's lister takes any summary in the file: it shows the foreign titles.)
- **Messages**: each real prompt (its text; ``[image]`` for a pasted picture alone), and each block of a reply:
  ``text`` (agent), ``thinking`` (thought), ``tool_use`` - said with its ``tool_result`` (from the next ``user``
  line) as one tool message. Subagents' lines (``isSidechain``) and carried-over history say nothing here.
- **Usage**: ``message.usage`` of the assistant lines - ``input_tokens``, ``output_tokens``,
  ``cache_read_input_tokens``, ``cache_creation_input_tokens`` - with the reply's ``model``. The lines of one
  reply share its ``message.id`` and each repeats its usage as streamed so far: a reply counts once, with the
  largest figure its lines reach (the last line's). The subagent transcripts beside the session (and its own
  ``isSidechain`` lines) count too: they are calls the session made. Older versions wrote ``costUSD`` on a line:
  a cost in dollars, counted the same way; newer ones write no cost.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar, Final

import msgspec

from events.model import Role, TitleSource
from registry.importers.base import CountedConversation, Draft, TranscriptRecord, agent_time, is_uuid
from registry.importers.files import FileSource, Group, NoExtra, Reading
from registry.importers.folders import Discovery, Found, folder_files, is_dir, quiet
from registry.importers.said import Call, arguments_summary, hold_call, result_text, say_result, say_unanswered, usage

__all__ = ["ClaudeCode"]

_RECENT: Final = 64
"""Assistant message ids remembered to count a reply split over several lines once: its lines come together
(only the tool results of its own tool uses come between them), so a window suffices and the state stays small."""
_LEAVES: Final = 64
"""Uuids of the session's own latest records a ``summary``'s ``leafUuid`` is matched against."""
_NOT_A_MESSAGE = re.compile(
    r"^\s*(?:<command-name>|<command-message>|<command-args>|<local-command-stdout>|<local-command-stderr>"
    r"|<local-command-caveat>|<session-start-hook>|<user-prompt-submit-hook>|<system-reminder>|<tick>|<goal>"
    r"|\[Request interrupted by user|<ide_opened_file>|<ide_selection>)"
)
_COMMAND = re.compile(r"<command-name>\s*([^<]*?)\s*</command-name>")
_KNOWN = quiet(r"agent-.+\.jsonl|sessions-index\.json|[0-9a-fA-F-]{36}|.+\.meta\.json")


class _Block(msgspec.Struct):
    type: Any = None
    text: Any = None
    thinking: Any = None
    id: Any = None
    name: Any = None
    input: Any = None
    tool_use_id: Any = None
    content: Any = None


_PICTURES: Final = frozenset({"image", "document"})
"""Blocks a user pastes or drops in: a prompt of only these is still a message."""


class _UserMessage(msgspec.Struct):
    content: str | list[_Block] | None = None


class _Usage(msgspec.Struct):
    input_tokens: Any = 0
    output_tokens: Any = 0
    cache_read_input_tokens: Any = 0
    cache_creation_input_tokens: Any = 0


class _AssistantMessage(msgspec.Struct):
    id: Any = None
    model: Any = None
    content: str | list[_Block] | None = None
    usage: _Usage | None = None


class _Record(TranscriptRecord):
    leaf_uuid: Any = None
    is_meta: Any = None
    is_compact_summary: Any = None
    team_name: Any = None
    custom_title: Any = None
    ai_title: Any = None
    last_prompt: Any = None
    summary: Any = None
    tag: Any = None
    cost_usd: Any = msgspec.field(default=None, name="costUSD")


class _Fold(CountedConversation, kw_only=True):
    session_id: str
    aside: bool = False
    """A subagent's transcript beside the session: read for its usage only."""
    other_cwd: str | None = None
    sidechain: bool | None = None
    first_prompt: str | None = None
    command: str | None = None
    custom_title: str | None = None
    ai_title: str | None = None
    last_prompt: str | None = None
    summary: str | None = None
    git_branch: str | None = None
    tag: str | None = None
    leaves: list[str] = msgspec.field(default_factory=list)
    """The uuids of this session's latest own records (``_LEAVES``): what its own summaries point at."""
    spent: dict[str, list[int]] = msgspec.field(default_factory=dict)
    """The usage counted so far of the latest replies (``_RECENT``), by ``message.id``: input, output, cache
    read, cache write tokens and cost in nanodollars."""


_user_message = msgspec.json.Decoder(_UserMessage)
_assistant_message = msgspec.json.Decoder(_AssistantMessage)


class ClaudeCode(FileSource[_Fold, NoExtra]):
    agent: ClassVar[str] = "claude-code"
    record_type = _Record
    tops = ("projects",)
    home_variable = "CLAUDE_CONFIG_DIR"
    home_folder = ".claude"

    def discover(self, root: Path) -> Discovery:
        return folder_files(root, self.tops, [""], _session_file)

    def new_fold(self, found: Found) -> _Fold:
        return _Fold(session_id=found.native_id or "", aside=found.aside)

    def identify(self, found: Found, fold: _Fold) -> str | None:
        return found.native_id or fold.session_id or None  # a legacy agent-*.jsonl names its session inside

    def apply(self, fold: _Fold, record: _Record) -> None:
        kind = record.type
        if fold.sidechain is None and isinstance(record.is_sidechain, bool):
            fold.sidechain = record.is_sidechain
        if fold.aside:
            if not fold.session_id and isinstance(record.session_id, str):
                fold.session_id = record.session_id
            if kind == "assistant" and record.session_id == fold.session_id and record.team_name is None:
                self._usage(fold, record, _reply(record), agent_time(record.timestamp))
            return
        own = record.session_id is None or record.session_id == fold.session_id
        if own and isinstance(record.uuid, str) and kind != "summary":
            fold.leaves.append(record.uuid)
            del fold.leaves[:-_LEAVES]
        if own:
            fold.saw_cwd(record.cwd)
        elif fold.other_cwd is None and isinstance(record.cwd, str) and record.cwd:
            fold.other_cwd = record.cwd
        at = agent_time(record.timestamp) if own else None
        fold.saw_time(at, active=False)
        if own and isinstance(record.git_branch, str) and record.git_branch:
            fold.git_branch = record.git_branch
        if kind == "custom-title" and isinstance(record.custom_title, str):
            fold.custom_title = record.custom_title
        elif kind == "ai-title" and isinstance(record.ai_title, str):
            fold.ai_title = record.ai_title
        elif kind == "last-prompt" and isinstance(record.last_prompt, str):
            fold.last_prompt = record.last_prompt
        elif kind == "summary" and isinstance(record.summary, str):
            if record.leaf_uuid in fold.leaves:
                fold.summary = record.summary  # about this session; the others describe other sessions
        elif kind == "tag" and isinstance(record.tag, str):
            fold.tag = record.tag
        elif kind in ("user", "assistant"):
            if not own or record.team_name is not None:
                return  # history carried over from another session, or a team mate's line
            reply = _reply(record) if kind == "assistant" else None
            if reply is not None:
                self._usage(fold, record, reply, at)
            if record.is_sidechain is True:
                return  # a subagent's line: its usage is the session's, its messages are not
            fold.saw_time(at)  # tool results are activity too, though not messages
            if record.is_meta is True:
                return
            if reply is None:
                self._user(fold, record, at)
            else:
                self._assistant(fold, reply, at)

    def draft(self, native_id: str, files: Group, extra: NoExtra | None) -> Reading:
        # The same session can sit in two project folders (a moved repository, a worktree): the one with the
        # latest activity is the session (the SDK keeps the newest too).
        rel, entry = max(files, key=lambda item: (item[1].fold.last or 0, item[1].tail.offset, item[0]))
        fold: _Fold = entry.fold
        titles = [
            (fold.custom_title, TitleSource.USER),
            (fold.ai_title, TitleSource.AGENT),
            (fold.last_prompt, TitleSource.PROMPT),
            (fold.summary, TitleSource.AGENT),
            (fold.first_prompt, TitleSource.PROMPT),
            (fold.command, TitleSource.PROMPT),
        ]
        skip = None
        if fold.sidechain:
            skip = "subagent transcript (isSidechain)"
        elif fold.cwd is None and fold.other_cwd is None:
            skip = "no cwd recorded"
        elif not any(isinstance(text, str) and text.strip() for text, _ in titles):
            skip = "metadata only (no prompt, title or summary)"
        draft = Draft(
            cwd=fold.cwd or fold.other_cwd,
            created=fold.created,
            last=fold.last,
            titles=titles,
            messages=fold.messages,
            git_branch=fold.git_branch,
            gone="hidden by the agent (tag __hidden)" if fold.tag == "__hidden" else None,
            skip=skip,
        )
        return Reading(rel, entry, draft)

    def _user(self, fold: _Fold, record: _Record, at: int | None) -> None:
        """Count a real prompt and say it; remember the first one (and the first slash command, a title of last
        resort). A tool result is said with its call."""
        if record.is_compact_summary is True or not record.message:
            return
        content = _user_message.decode(record.message).content
        if isinstance(content, list):
            results = [block for block in content if block.type == "tool_result"]
            if results:
                for block in results:
                    self._result(fold, block, at)
                return
            texts = [b.text for b in content if b.type == "text" and isinstance(b.text, str)]
            pictures = any(block.type in _PICTURES for block in content)
        else:
            texts, pictures = [content or ""], False
        real = [t.strip() for t in texts if t.strip() and not _NOT_A_MESSAGE.match(t)]
        if not real and pictures and not any(t.strip() for t in texts):
            fold.prompts += 1  # a pasted screenshot alone: a message, with no text to title the session by
            self._prompt(fold, "[image]", at)
            return
        if not real:
            command = next((m.group(1) for t in texts if (m := _COMMAND.search(t)) is not None), None)
            fold.command = fold.command or command or None
            return
        fold.prompts += 1
        if fold.first_prompt is None:
            fold.first_prompt = " ".join(real)
        self._prompt(fold, "\n\n".join(real), at)

    def _prompt(self, fold: _Fold, text: str, at: int | None) -> None:
        say_unanswered(fold.calls, self.say)
        self.say(Role.USER, text, at)

    def _result(self, fold: _Fold, block: _Block, at: int | None) -> None:
        say_result(fold.calls, block.tool_use_id, result_text(block.content), at, self.say)

    def _assistant(self, fold: _Fold, message: _AssistantMessage, at: int | None) -> None:
        """Count an API reply once, though it is split over several lines sharing ``message.id``; say its
        blocks (a tool use once its result is read)."""
        if fold.first_sight(message.id, _RECENT):
            fold.replies += 1
        content = message.content
        if isinstance(content, str):
            self.say(Role.AGENT, content, at)
            return
        for block in content or ():
            if block.type == "text":
                self.say(Role.AGENT, block.text, at)
            elif block.type == "thinking":
                self.say(Role.THOUGHT, block.thinking, at)
            elif block.type == "tool_use" and isinstance(block.id, str):
                call = Call(str(block.name or "tool"), arguments_summary(block.input), at)
                hold_call(fold.calls, block.id, call, self.say)

    def _usage(self, fold: _Fold, record: _Record, message: _AssistantMessage, at: int | None) -> None:
        """A reply's usage, once per ``message.id``: what its lines report beyond what was counted."""
        cost = record.cost_usd
        nanos = round(cost * 1e9) if isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0 else 0
        if message.usage is None and not nanos:
            return
        spent = message.usage or _Usage()
        figures = [
            _tokens(spent.input_tokens),
            _tokens(spent.output_tokens),
            _tokens(spent.cache_read_input_tokens),
            _tokens(spent.cache_creation_input_tokens),
            nanos,
        ]
        key = message.id if isinstance(message.id, str) else None
        seen = fold.spent.pop(key, None) if key is not None else None
        delta = figures if seen is None else [max(0, f - s) for f, s in zip(figures, seen, strict=True)]
        if key is not None:
            fold.spent[key] = figures if seen is None else [max(f, s) for f, s in zip(figures, seen, strict=True)]
            while len(fold.spent) > _RECENT:
                del fold.spent[next(iter(fold.spent))]
        self.used(
            usage(
                input_tokens=delta[0],
                output_tokens=delta[1],
                cached_read=delta[2],
                cached_write=delta[3],
                cost=delta[4] / 1e9 if delta[4] else None,
                model=message.model,
            ),
            at,
        )


def _reply(record: _Record) -> _AssistantMessage:
    return _assistant_message.decode(record.message) if record.message else _AssistantMessage()


def _tokens(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _session_file(rel: str, entry: os.DirEntry[str]) -> list[Found] | None:
    # agent-*.jsonl (legacy subagent transcripts) and <id>/subagents/ are read beside their session.
    name = entry.name
    if name.endswith(".jsonl") and is_uuid(name[:-6]) and not is_dir(entry):
        return [Found(rel, entry.path, native_id=name[:-6])]
    if name.startswith("agent-") and name.endswith(".jsonl") and not is_dir(entry):
        return [Found(rel, entry.path, aside=True)]
    if is_uuid(name) and is_dir(entry):
        return _subagents(rel, entry.path, name)
    return [] if _KNOWN(name) else None


def _subagents(rel: str, folder: str, native_id: str) -> list[Found]:
    """The subagent transcripts kept in a session's folder (``subagents/``, nested workflows too)."""
    found = []
    for path, dirs, names in os.walk(os.path.join(folder, "subagents")):
        dirs.sort()
        for name in sorted(names):
            if name.startswith("agent-") and name.endswith(".jsonl"):
                full = os.path.join(path, name)
                found.append(Found(f"{rel}/{os.path.relpath(full, folder)}", full, native_id=native_id, aside=True))
    return found
