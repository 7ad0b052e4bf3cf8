"""opencode: ``opencode.db`` (and ``opencode-<channel>.db``) under ``~/.local/share/opencode``, SQLite.

Format knowledge, checked in opencode's source (anomalyco/opencode ``packages/opencode/src/session/
session.sql.ts``, ``storage/db.ts``, ``storage/json-migration.ts``):

- One row per session in ``session``; a child session (``parent_id``, a subagent's) is not listed - opencode's
  own ACP ``session/list`` asks for root sessions only.
- **Message count**: the ``message`` rows of the session: opencode stores one row per message it renders (a
  user prompt, or one assistant reply with its parts in ``part``), so each row is a message in its UI.
- **Last activity**: the newest message's time (``time_updated``, else ``time_created``, epoch ms);
  ``session.time_updated`` also moves on token and cost bookkeeping, so it is not activity.
- **Title**: ``session.title`` unless it is opencode's placeholder (``New session - <ISO time>``,
  ``Child session - <ISO time>``), which means untitled. opencode keeps no flag telling a title the user typed
  from one the model generated, so titles are AGENT: a title set in the registry by its user is never replaced
  by one. **Archived**: ``time_archived`` set.
- The pre-SQLite JSON ``storage/`` layout is not read: opencode migrates it into the database on its next start.
- **Messages**: the ``message`` rows after the last one read (their ids ascend), each with its ``part`` rows in
  order: ``text`` (the user's or the agent's; opencode's ``synthetic`` ones left out), ``reasoning`` (thought) and
  ``tool`` parts with a final status (name, input, output or error). A reply still streaming - an assistant
  message without ``time.completed``, last in its session - is read once it is complete.
- **Usage**: an assistant message's ``tokens`` (``input`` without the cached ones, ``cache.read`` /
  ``cache.write``, ``output`` without ``reasoning``) and ``cost`` - the dollars opencode computed and stored
  for it, a cost the agent states - with its ``modelID``. Child sessions' (subagents') usage stays theirs.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

from events.model import Role, TitleSource
from registry.importers.base import Draft, env_path, epoch_ns, home
from registry.importers.databases import DatabaseSource, Row, SchemaError, columns
from registry.importers.said import Said, arguments_summary, result_text, tool_text, usage

__all__ = ["Opencode"]

_DEFAULT_TITLE = re.compile(r"^(New session - |Child session - )\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_REQUIRED: Final = ("id", "directory", "title", "time_created")
_OPTIONAL: Final = {"parent_id": "NULL", "time_archived": "NULL"}
_FINAL: Final = frozenset({"completed", "error"})


class Opencode(DatabaseSource):
    agent: ClassVar[str] = "opencode"

    def default_root(self, environ: Mapping[str, str]) -> Path:
        override = env_path(environ, "OPENCODE_DATA_DIR")  # the name ccusage uses; upstream's is unverified
        if override is not None:
            return override
        data = env_path(environ, "XDG_DATA_HOME") or home(environ) / ".local" / "share"
        return data / "opencode"

    def databases(self, root: Path) -> list[Path]:
        paths = [root / "opencode.db", *sorted(root.glob("opencode-*.db"))]
        return [p for p in paths if p.is_file()]

    def unavailable(self, root: Path) -> str:
        if (root / "storage").is_dir():
            return "only the legacy JSON storage/ exists (opencode migrates it to opencode.db on its next start)"
        return f"no opencode.db under {root}"

    def rows(self, db: sqlite3.Connection) -> list[Row]:
        have = columns(db, "session")
        message = columns(db, "message")
        missing = [f"session.{c}" for c in _REQUIRED if c not in have]
        missing += [f"message.{c}" for c in ("session_id", "time_created") if c not in message]
        if missing:
            raise SchemaError(f"schema not understood: missing {', '.join(missing)}")
        select = ", ".join(f"s.{c}" if c in have else f"{default} AS {c}" for c, default in _OPTIONAL.items())
        message_time = "coalesce(time_updated, time_created)" if "time_updated" in message else "time_created"
        query = (
            f"SELECT s.id, s.directory, s.title, s.time_created, {select}, m.n, m.last FROM session s LEFT JOIN "
            f"(SELECT session_id, count(*) AS n, max({message_time}) AS last FROM message GROUP BY session_id) m "
            "ON m.session_id = s.id ORDER BY s.id"
        )
        return [
            Row(str(key), _draft(directory, title, created, parent, archived, count, last))
            for key, directory, title, created, parent, archived, count, last in db.execute(query)
        ]

    def conversation(self, db: sqlite3.Connection, row: Row, mark: Any) -> tuple[Said, Any] | None:
        """The messages after the last one read (the mark: its id), each with its parts."""
        if "data" not in columns(db, "message") or row.draft.skip is not None:
            return None
        after = mark if isinstance(mark, str) else ""
        said = Said(fresh=mark is None)
        messages = db.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? AND id > ? ORDER BY id",
            (row.native_id, after),
        ).fetchall()
        parts: dict[str, list[Any]] = {}
        if messages and {"message_id", "data"} <= columns(db, "part"):
            first = messages[0][0]
            query = "SELECT message_id, data FROM part WHERE session_id = ? AND message_id >= ? ORDER BY id"
            if "session_id" not in columns(db, "part"):
                query = "SELECT message_id, data FROM part WHERE message_id IN (SELECT id FROM message WHERE "
                query += "session_id = ? AND id >= ?) ORDER BY id"
            for message_id, data in db.execute(query, (row.native_id, first)):
                parts.setdefault(message_id, []).append(_json(data))
        for n, (message_id, created, data) in enumerate(messages):
            info = _json(data)
            done = isinstance(info.get("time"), dict) and info["time"].get("completed") is not None
            if info.get("role") == "assistant" and not done and n == len(messages) - 1:
                break  # still streaming: read once complete
            _message(said, info, parts.get(message_id, []), _ms(created))
            after = message_id
        return said, after


def _draft(
    directory: object, title: object, created: object, parent: object, archived: object, count: int | None, last: object
) -> Draft:
    if parent is not None:
        return Draft(skip="child session (subagent)")
    placeholder = isinstance(title, str) and _DEFAULT_TITLE.match(title) is not None
    return Draft(
        cwd=directory,
        created=_ms(created),
        last=_ms(last),
        titles=[] if placeholder else [(title, TitleSource.AGENT)],
        messages=count or 0,
        archived=archived is not None,
    )


def _json(data: object) -> dict[str, Any]:
    try:
        value = json.loads(data) if isinstance(data, str | bytes) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _message(said: Said, info: dict[str, Any], parts: list[dict[str, Any]], at: int | None) -> None:
    """One message: its parts said in order, then (a reply's) usage."""
    role = info.get("role")
    texts: list[str] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and part.get("synthetic") is not True:
            if role == "user":
                texts.append(part["text"])
            else:
                said.say(Role.AGENT, part["text"], at)
        elif kind == "reasoning":
            said.say(Role.THOUGHT, part.get("text"), at)
        elif kind == "tool" and isinstance(part.get("state"), dict) and part["state"].get("status") in _FINAL:
            state = part["state"]
            result = state.get("output") if state.get("status") == "completed" else state.get("error")
            said.say(
                Role.TOOL, tool_text(part.get("tool"), arguments_summary(state.get("input")), result_text(result)), at
            )
    if role == "user":
        said.say(Role.USER, "\n".join(texts), at)
        return
    tokens = info.get("tokens")
    if isinstance(tokens, dict):
        cache: dict[str, Any] = tokens["cache"] if isinstance(tokens.get("cache"), dict) else {}
        reasoning = tokens.get("reasoning")
        reasoning = reasoning if isinstance(reasoning, int) and not isinstance(reasoning, bool) and reasoning > 0 else 0
        output = tokens.get("output")
        output = output if isinstance(output, int) and not isinstance(output, bool) and output > 0 else 0
        said.used(
            usage(
                input_tokens=tokens.get("input"),
                output_tokens=output + reasoning,
                thought=reasoning,
                cached_read=cache.get("read"),
                cached_write=cache.get("write"),
                cost=info.get("cost") or None,
                model=info.get("modelID"),
            ),
            at,
        )


def _ms(value: object) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_ns(value, unit_ns=1_000_000)
    return None
