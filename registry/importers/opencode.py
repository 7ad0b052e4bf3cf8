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
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Final

from events.model import TitleSource
from registry.importers.base import Draft, env_path, epoch_ns, home
from registry.importers.databases import DatabaseSource, Row, SchemaError, columns

__all__ = ["Opencode"]

_DEFAULT_TITLE = re.compile(r"^(New session - |Child session - )\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_REQUIRED: Final = ("id", "directory", "title", "time_created")
_OPTIONAL: Final = {"parent_id": "NULL", "time_archived": "NULL"}


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


def _ms(value: object) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_ns(value, unit_ns=1_000_000)
    return None
