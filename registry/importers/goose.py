"""goose: ``sessions.db`` (SQLite) under ``<GOOSE_PATH_ROOT>/data/sessions/`` or ``~/.local/share/goose/sessions/``.

One row per session in ``sessions``, messages in ``messages``. Titles: ``name`` (legacy ``description``) - the
user's when ``user_set_name`` (USER), else generated (AGENT); empty means untitled. Last activity is the newest
message's ``created_timestamp`` (epoch seconds, or milliseconds in some rows), else ``created_at``; the row's
``updated_at`` is not used, as it also moves on renames. Only ``user`` and ``acp`` sessions are listed: sub-agent,
hidden, scheduled, terminal and gateway sessions, and any with a parent, are skipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Final

from events.model import TitleSource
from registry.importers.base import SessionSnapshot, canonical_dir, clean_title, env_path, epoch_ns, home, parse_time
from registry.importers.databases import DatabaseSource, Row, SchemaError, columns

__all__ = ["Goose"]

KNOWN_SCHEMA: Final = 17
"""The newest ``schema_version`` this importer was written against. Newer ones are read while the columns it
needs are still there (they have been stable for many versions)."""
_LISTED_TYPES: Final = frozenset({"user", "acp", ""})
_REQUIRED: Final = ("id", "working_dir", "created_at")
_OPTIONAL: Final = {
    "name": "''",
    "description": "''",
    "user_set_name": "0",
    "session_type": "'user'",
    "archived_at": "NULL",
    "parent_session_id": "NULL",
}
_MILLISECONDS: Final = 10_000_000_000  # goose's own threshold: larger timestamps are milliseconds


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

    def rows(self, db: sqlite3.Connection, path: Path) -> list[Row]:
        version = None
        if columns(db, "schema_version"):
            version = db.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        have = columns(db, "sessions")
        missing = [c for c in _REQUIRED if c not in have] + (["messages table"] if not columns(db, "messages") else [])
        if missing:
            newer = f"; schema version {version} is newer than {KNOWN_SCHEMA}" if (version or 0) > KNOWN_SCHEMA else ""
            raise SchemaError(f"schema not understood: missing {', '.join(missing)}{newer}")
        select = ", ".join(f"s.{c}" if c in have else f"{default} AS {c}" for c, default in _OPTIONAL.items())
        query = (
            f"SELECT s.id, s.working_dir, s.created_at, {select}, m.n, m.last FROM sessions s LEFT JOIN "
            "(SELECT session_id, count(*) AS n, max(created_timestamp) AS last FROM messages GROUP BY session_id) m "
            "ON m.session_id = s.id ORDER BY s.id"
        )
        out = []
        for (
            key,
            working_dir,
            created_at,
            name,
            description,
            user_set_name,
            session_type,
            archived_at,
            parent,
            count,
            last,
        ) in db.execute(query):
            native_id = str(key)
            out.append(
                Row(
                    native_id,
                    *_snapshot(
                        native_id,
                        working_dir,
                        created_at,
                        name or description,
                        bool(user_set_name),
                        session_type,
                        archived_at,
                        parent,
                        count or 0,
                        last,
                        path,
                    ),
                )
            )
        return out


def _snapshot(
    native_id: str,
    working_dir: object,
    created_at: object,
    name: object,
    user_set_name: bool,
    session_type: object,
    archived_at: object,
    parent: object,
    count: int,
    last: object,
    path: Path,
) -> tuple[SessionSnapshot | None, str | None]:
    if parent is not None:
        return None, "sub-session (has a parent session)"
    if session_type not in _LISTED_TYPES and session_type is not None:
        return None, f"session type {session_type!r} is not listed"
    cwd = canonical_dir(working_dir)
    if cwd is None:
        return None, f"working_dir is not an absolute POSIX path: {working_dir!r}"
    created = parse_time(created_at)
    if created is None:
        return None, "no valid created_at"
    activity = None
    if isinstance(last, int | float) and not isinstance(last, bool):
        activity = epoch_ns(last, unit=0.001 if last > _MILLISECONDS else 1.0)
    title = clean_title(name)
    return (
        SessionSnapshot(
            native_id=native_id,
            cwd=cwd,
            created_at=created,
            last_activity=max(activity or created, created),
            path=f"{path}#{native_id}",
            locator="",
            title=title,
            title_source=(TitleSource.USER if user_set_name else TitleSource.AGENT) if title is not None else None,
            messages=count,
            archived=archived_at is not None,
        ),
        None,
    )
