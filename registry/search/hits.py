"""Searching every kept conversation: which sessions match a query, best first, with the passages that matched.

A session's relevance is that of its best-matching message (the index's BM25: rarer words and shorter messages weigh
more), in bands a factor ``RELEVANCE_BAND`` wide: sessions in one band count as equally relevant and come newest
first (``updatedAt``), then by id. The bands keep the order from hanging on small differences - those of message
lengths, and those between the index's shards, each of which scores with its own statistics. The filters -
``agent``, ``cwd``, ``archived``, and ``since``/``until`` on the time of the matching message - apply before
pagination, and a page's cursor is bound to the query and to all of them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Final

import msgspec

from events.store import EventStore
from registry.agents import split_id
from registry.errors import InvalidParams
from registry.filters import ARCHIVED_FILTERS
from registry.limits import MAX_SEARCH_HITS
from registry.model import SessionState, format_time, rank
from registry.readmodel import ReadModel
from registry.search.cursor import SearchCursor, SearchCursors
from registry.search.index import Match, SearchIndex
from registry.search.query import Query, parse

__all__ = [
    "RELEVANCE_BAND",
    "SNIPPETS",
    "SNIPPET_CHARS",
    "SearchFilter",
    "SearchHit",
    "SearchPage",
    "Searcher",
    "Snippet",
]

SNIPPETS: Final = 3
"""Passages shown per session: its best-matching messages."""
SNIPPET_CHARS: Final = 200
"""Characters of a message shown around its first match."""
RELEVANCE_BAND: Final = 1.5
"""Scores within this factor of each other are equally relevant (then the newer session comes first)."""
_LOG_BAND: Final = math.log(RELEVANCE_BAND)
_FIRST_LOOK: Final = 64
_MOST: Final = 1 << 20


class Snippet(msgspec.Struct, frozen=True):
    """A passage of a message that matched: who said it and the text around the match, each match in ``**``."""

    role: str
    text: str


class SearchHit(msgspec.Struct, frozen=True, rename="camel"):
    """A session that matched: ``session_id`` is the id ``show``, ``transcript`` and ``session/load`` (through a
    proxy in front of its agent) take - the agent's own id for an agent's session."""

    session_id: str
    agent: str | None
    cwd: str
    title: str | None
    updated_at: str | None
    snippets: list[Snippet]


class SearchPage(msgspec.Struct, frozen=True, rename="camel"):
    """Hits best first; ``next_cursor`` when more follow. ``states`` are the hits' sessions (for ``session/list``)."""

    hits: list[SearchHit]
    next_cursor: str | None = None
    states: list[SessionState] = msgspec.field(default_factory=list)


class SearchFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which sessions a search looks in (None: any): an ``agent``'s, those in ``cwd`` (normalised), the archived ones
    left out (``exclude``), searched too (``include``) or only they (``only``); and which of their messages, said
    from ``since`` to ``until`` (epoch ns, both included). A page's cursor is bound to all of them, by name."""

    agent: str | None = None
    cwd: str | None = None
    archived: str | None = "exclude"
    since: int | None = None
    until: int | None = None

    def keeps(self, state: SessionState) -> bool:
        """Whether a session is one to look in (a deleted one never is)."""
        return not (
            state.deleted
            or (self.agent is not None and state.agent != self.agent)
            or (self.cwd is not None and state.cwd != self.cwd)
            or (self.archived == "exclude" and state.archived)
            or (self.archived == "only" and not state.archived)
        )

    def said_then(self, moment: int | None) -> bool:
        """Whether a message said at ``moment`` (None: unknown) is in the time the filter asks for."""
        return not (
            (self.since is not None and (moment is None or moment < self.since))
            or (self.until is not None and (moment is None or moment > self.until))
        )


def wire_id(state: SessionState) -> str:
    """The id a session is shown under: its agent's own id for an agent's session, else the stored id."""
    parts = split_id(state.session_id)
    return parts[2] if parts is not None and state.agent is not None and parts[0] == state.agent else state.session_id


class _Found:
    __slots__ = ("best", "keys", "state")

    def __init__(self, state: SessionState, score: float) -> None:
        self.state = state
        self.best = score
        self.keys: list[tuple[int, int]] = []


class Searcher:
    """Searches one store's kept messages (its ``index``), with the registry's read model for each session's facts."""

    def __init__(self, store: EventStore, read_model: ReadModel, index: SearchIndex) -> None:
        self._store = store
        self._read_model = read_model
        self._index = index
        self._cursors = SearchCursors(store.identity)

    @property
    def index(self) -> SearchIndex:
        return self._index

    def search(
        self,
        query: object,
        where: SearchFilter,
        *,
        limit: int = 20,
        cursor: str | None = None,
        wire: Callable[[SessionState], str] = wire_id,
    ) -> SearchPage:
        """One page of the sessions matching ``query`` (see the module docstring) among those ``where`` keeps."""
        parsed = parse(query)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH_HITS:
            raise InvalidParams(f"limit must be an int from 1 to {MAX_SEARCH_HITS}, got {limit!r}")
        if where.archived is None:
            where = msgspec.structs.replace(where, archived="exclude")
        if where.archived not in ARCHIVED_FILTERS:
            raise InvalidParams(f"archived must be one of {', '.join(ARCHIVED_FILTERS)}, got {where.archived!r}")
        bound = SearchCursors.bound_to(parsed.terms, where)
        self._index.catch_up()
        if cursor is None:
            at = SearchCursor(self._read_model.catch_up(), 0)
        else:
            at = self._cursors.decode(cursor, bound)
            self._read_model.catch_up()

        found = self._sessions(parsed, at, at.offset + limit + 1, where)
        ordered = sorted(found, key=lambda f: (_band(f.best), rank(f.state.updated_at), f.state.session_id))
        page = ordered[at.offset : at.offset + limit]
        more = len(ordered) > at.offset + limit
        hits = self._hits(parsed, page, wire)
        following = self._cursors.encode(SearchCursor(at.position, at.offset + limit), bound) if more else None
        return SearchPage(hits, following, [f.state for f in page])

    def _sessions(
        self,
        query: Query,
        at: SearchCursor,
        need: int,
        where: SearchFilter,
    ) -> list[_Found]:
        """The matching sessions, at least ``need`` of them where there are that many: the index is asked for more
        messages, four times as many each time, until enough distinct sessions pass the filters."""
        limit = max(_FIRST_LOOK, need * 8)
        states: dict[str, SessionState | None] = {}
        while True:
            matches, whole = self._index.matches(query, limit)
            found: dict[str, _Found] = {}
            owners = self._index_owners([m for m in matches if m.position <= at.position])
            for match in matches:
                owner = owners.get((match.position, match.seq))
                if owner is None:
                    continue  # past the walk's position, or erased since it was indexed
                session_id, when = owner
                if session_id not in states:
                    states[session_id] = self._read_model.get(session_id)
                state = states[session_id]
                if state is None or not where.keeps(state):
                    continue
                if not where.said_then(when if when is not None else state.updated_at):
                    continue
                hit = found.get(session_id)
                if hit is None:
                    hit = found[session_id] = _Found(state, match.score)
                if len(hit.keys) < SNIPPETS:
                    hit.keys.append((match.position, match.seq))
            if whole or len(found) >= need or limit >= _MOST:
                return list(found.values())
            limit *= 4

    def _index_owners(self, matches: list[Match]) -> dict[tuple[int, int], tuple[str, int | None]]:
        return self._index.owners([(m.position, m.seq) for m in matches])

    def _hits(self, query: Query, page: list[_Found], wire: Callable[[SessionState], str]) -> list[SearchHit]:
        texts = self._store.messages_at([key for found in page for key in found.keys])
        strict, loose = query.highlight(), _loose(query)
        hits = []
        for found in page:
            state = found.state
            snippets = [
                Snippet(kept.message.role.value, snippet(kept.message.text, strict, loose))
                for key in found.keys
                if (kept := texts.get(key)) is not None
            ]
            hits.append(
                SearchHit(
                    session_id=wire(state),
                    agent=state.agent,
                    cwd=state.cwd,
                    title=state.title,
                    updated_at=None if state.updated_at is None else format_time(state.updated_at),
                    snippets=snippets,
                )
            )
        return hits


def _band(score: float) -> int:
    """The relevance band of a BM25 score (lower is better: the index's scores are negative, stronger more so)."""
    return -round(math.log(-score) / _LOG_BAND) if score < 0 else 1 << 30


def _loose(query: Query) -> re.Pattern[str]:
    """The query's terms anywhere in a word (a part of a ``CamelCase`` word matched through the index's parts)."""
    words = [r"[\W_]*".join(re.escape(w) for w in term.words) for term in query.terms]
    return re.compile("|".join(sorted(words, key=len, reverse=True)), re.IGNORECASE)


_SPACE: Final = re.compile(r"\s+")


def snippet(text: str, strict: re.Pattern[str], loose: re.Pattern[str], width: int = SNIPPET_CHARS) -> str:
    """The passage of ``text`` around its first match, on one line, every match in it marked ``**...**``."""
    pattern = strict
    first = strict.search(text)
    if first is None:
        pattern, first = loose, loose.search(text)
    start = 0 if first is None else max(0, first.start() - width // 3)
    end = min(len(text), start + width)
    if first is not None and first.end() > end:
        end = min(len(text), first.end() + width // 3)
    window = _SPACE.sub(" ", text[start:end]).strip()
    marked = pattern.sub(lambda m: f"**{m.group(0)}**", window) if first is not None else window
    return ("…" if start > 0 else "") + marked + ("…" if end < len(text) else "")
