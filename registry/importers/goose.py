"""goose: ``sessions.db`` (SQLite) under ``<GOOSE_PATH_ROOT>/data/sessions/`` or ``~/.local/share/goose/sessions/``.

Format knowledge, checked in goose's own source (``crates/goose/src/session/session_manager.rs``: the upstream
schema 10 of aaif-goose/goose, and a schema-16 descendant carrying the newer columns):

- **Listed** as goose lists them: its session list (desktop, CLI, ``GET /sessions``) is
  ``list_sessions_by_types([User, Scheduled])`` and its ACP server's ``session/list`` lists ``Acp`` sessions.
  ``sub_agent``, ``hidden``, ``terminal`` and ``gateway`` sessions are not listed by goose, nor here; a session
  with a ``parent_session_id`` is a sub-session.
- **Message count**: the messages goose shows the user - those whose ``metadata_json`` does not say
  ``"userVisible": false`` (goose's ``user_visible_message_sql``: ``COALESCE(json_extract(metadata_json,
  '$.userVisible'), 1) != 0``). Messages kept only for the model (compaction summaries, tool plumbing) are not.
- **Last activity**: the newest user-visible message's ``created_timestamp`` (epoch seconds, or milliseconds
  above goose's own ``MILLISECOND_TIMESTAMP_THRESHOLD`` of 1e10), else ``created_at``; ``updated_at`` also
  moves on renames and token bookkeeping, so it is not activity.
- **Title**: ``name`` (legacy ``description``): the user's when ``user_set_name`` (USER), else generated
  (AGENT); empty means untitled. **Archived**: ``archived_at`` set. A deleted session's row is gone.
- **Messages**: the user-visible ``messages`` rows in ``id`` order, after the last one read: ``content_json``'s
  ``text`` parts (the user's or the agent's), ``thinking`` (thought), and each ``toolRequest`` said with its
  ``toolResponse`` (in the next user row) as one tool message. A conversation goose rewrote (its first row is
  another) is read again from its start.
- **Usage**: goose keeps no usage per message, only the session's running totals
  (``accumulated_input_tokens``, ``accumulated_output_tokens``): what they grew by since the last import is
  counted with the messages read with it (per import, not per turn), with the session's model
  (``model_config_json``'s ``model_name``). goose states no cost.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

from events.model import Role, TitleSource
from registry.importers.base import Draft, agent_time, env_path, epoch_ns, home
from registry.importers.databases import DatabaseSource, Row, SchemaError, columns
from registry.importers.said import Said, arguments_summary, result_text, tool_text, usage

__all__ = ["Goose"]

KNOWN_SCHEMA: Final = 16
"""The newest ``schema_version`` this parser was checked against. Newer ones are read while the columns it
needs are still there (they have been stable for many versions)."""
LISTED_TYPES: Final = frozenset({"user", "scheduled", "acp"})
_REQUIRED: Final = ("id", "working_dir", "created_at")
_OPTIONAL: Final = {
    "name": "''",
    "description": "''",
    "user_set_name": "0",
    "session_type": "'user'",
    "archived_at": "NULL",
    "parent_session_id": "NULL",
}
_MILLISECONDS: Final = 10_000_000_000
_TOKENS: Final = ("accumulated_input_tokens", "accumulated_output_tokens")
_VISIBLE: Final = (
    "CASE WHEN metadata_json IS NULL OR NOT json_valid(metadata_json) THEN 1 "
    "ELSE coalesce(json_extract(metadata_json, '$.userVisible'), 1) END != 0"
)


class Goose(DatabaseSource):
    agent: ClassVar[str] = "goose"

    def default_root(self, environ: Mapping[str, str]) -> Path:
        override = env_path(environ, "GOOSE_PATH_ROOT")
        if override is not None:
            return override / "data"
        base = home(environ)
        data = env_path(environ, "XDG_DATA_HOME") or base / ".local" / "share"
        candidates = [data / "goose", base / "Library" / "Application Support" / "goose", data / "Block" / "goose"]
        return next((c for c in candidates if (c / "sessions" / "sessions.db").exists()), candidates[0])

    def databases(self, root: Path) -> list[Path]:
        path = root / "sessions" / "sessions.db"
        return [path] if path.is_file() else []

    def unavailable(self, root: Path) -> str:
        return f"no sessions/sessions.db under {root}"

    def rows(self, db: sqlite3.Connection) -> list[Row]:
        version = None
        if columns(db, "schema_version"):
            version = db.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        have = columns(db, "sessions")
        message = columns(db, "messages")
        missing = [c for c in _REQUIRED if c not in have]
        missing += [f"messages.{c}" for c in ("session_id", "created_timestamp") if c not in message]
        if missing:
            newer = f"; schema version {version} is newer than {KNOWN_SCHEMA}" if (version or 0) > KNOWN_SCHEMA else ""
            raise SchemaError(f"schema not understood: missing {', '.join(missing)}{newer}")
        select = ", ".join(f"s.{c}" if c in have else f"{default} AS {c}" for c, default in _OPTIONAL.items())
        tokens = ", ".join(f"s.{c}" if c in have else "NULL" for c in (*_TOKENS, "model_config_json"))
        visible = _VISIBLE if "metadata_json" in message else "1"
        query = (
            f"SELECT s.id, s.working_dir, s.created_at, {select}, m.n, m.last, {tokens} FROM sessions s LEFT JOIN "
            f"(SELECT session_id, count(*) AS n, max(created_timestamp) AS last FROM messages WHERE {visible} "
            "GROUP BY session_id) m ON m.session_id = s.id ORDER BY s.id"
        )
        out = []
        for key, cwd, created, name, description, user_set, kind, archived, parent, count, last, *spent in db.execute(
            query
        ):
            out.append(
                Row(
                    str(key),
                    _draft(cwd, created, name or description, bool(user_set), kind, archived, parent, count, last),
                    spent,
                )
            )
        return out

    def conversation(self, db: sqlite3.Connection, row: Row, mark: Any) -> tuple[Said, Any] | None:
        """The visible messages after the last one read, and what the session's token totals grew by. The mark:
        the last and first message ids read, the totals counted, and the tool calls awaiting their responses."""
        have = columns(db, "messages")
        if "content_json" not in have or "role" not in have:
            return None
        visible = _VISIBLE if "metadata_json" in have else "1"
        last_id, first_id, counted, calls = mark if isinstance(mark, list) and len(mark) == 4 else (0, None, None, {})
        first = db.execute("SELECT min(id) FROM messages WHERE session_id = ?", (row.native_id,)).fetchone()[0]
        said = Said(fresh=mark is None or first != first_id)
        if said.fresh:  # the first read, or goose rewrote the conversation: from its start
            last_id, calls = 0, {}
        query = (
            f"SELECT id, role, content_json, created_timestamp FROM messages WHERE session_id = ? AND id > ? "
            f"AND {visible} ORDER BY id"
        )
        newest = None
        for message_id, role, content, created in db.execute(query, (row.native_id, last_id)):
            last_id = message_id
            newest = _time(created) or newest
            _message(said, calls, role, content, _time(created))
        totals, model = list(row.tokens[:2]), _model(row.tokens[2])
        if isinstance(counted, list) and all(isinstance(v, int) for v in counted):
            grown = [max(0, (now or 0) - before) for now, before in zip(totals, counted, strict=True)]
        else:
            grown = [now or 0 for now in totals]
        said.used(usage(input_tokens=grown[0], output_tokens=grown[1], model=model), newest)
        return said, [last_id, first, [v or 0 for v in totals], calls]


def _time(value: object) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_ns(value, unit_ns=1_000_000 if value > _MILLISECONDS else 1_000_000_000)
    return None


def _model(config: object) -> str | None:
    try:
        model = json.loads(config).get("model_name") if isinstance(config, str) else None
    except (ValueError, AttributeError):
        return None
    return model if isinstance(model, str) else None


def _message(said: Said, calls: dict[str, list[Any]], role: object, content: object, at: int | None) -> None:
    """One row's ``content_json``: text, thinking, tool requests (held in ``calls``) and responses."""
    try:
        parts = json.loads(content) if isinstance(content, str) else []
    except ValueError:
        return
    texts = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "thinking":
            said.say(Role.THOUGHT, part.get("thinking"), at)
        elif kind == "toolRequest" and isinstance(part.get("id"), str):
            value = (part.get("toolCall") or {}).get("value") if isinstance(part.get("toolCall"), dict) else None
            value = value if isinstance(value, dict) else {}
            calls[part["id"]] = [value.get("name") or "tool", arguments_summary(value.get("arguments")), at]
        elif kind == "toolResponse" and isinstance(part.get("id"), str):
            result = part.get("toolResult")
            value = result.get("value") if isinstance(result, dict) else None
            name, summary, when = calls.pop(part["id"], ["tool", "", at])
            said.say(Role.TOOL, tool_text(name, summary, result_text(value)), when)
    said.say(Role.USER if role == "user" else Role.AGENT, "\n".join(texts), at)


def _draft(
    cwd: object,
    created_at: object,
    name: object,
    user_set_name: bool,
    session_type: object,
    archived_at: object,
    parent: object,
    count: int | None,
    last: object,
) -> Draft:
    if parent is not None:
        return Draft(skip="sub-session (has a parent session)")
    if (session_type or "user") not in LISTED_TYPES:
        return Draft(skip=f"session type {session_type!r} is not listed by goose")
    created = agent_time(created_at)
    activity = None
    if isinstance(last, int | float) and not isinstance(last, bool):
        activity = epoch_ns(last, unit_ns=1_000_000 if last > _MILLISECONDS else 1_000_000_000)
    return Draft(
        cwd=cwd,
        created=created,
        last=activity,
        titles=[(name, TitleSource.USER if user_set_name else TitleSource.AGENT)],
        messages=count or 0,
        archived=archived_at is not None,
    )
