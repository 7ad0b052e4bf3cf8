"""What a registry answers of what its sessions said and spent: a session's transcript, search across every
session's conversation (also ``session/list``'s ``query``), and usage totals. ``SessionRegistry`` is a
``SaidAndSpent``; these reads load their modules (search, prices, the usage report) only when first asked, so that a
registry that only lists never does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import UNSET

from events.store import EventStore
from registry.agents import known_name
from registry.commands import check_session_id
from registry.errors import InvalidParams, SessionNotFound
from registry.limits import MAX_SEARCH_HITS
from registry.model import META_SNIPPETS, ListSessionsResult, SessionState, parse_time, session_info
from registry.paths import normalise_cwd
from registry.readmodel import ReadModel

if TYPE_CHECKING:
    from registry.prices import PriceTable
    from registry.search.hits import Searcher, SearchPage
    from registry.search.on_demand import IndexOnDemand
    from registry.transcripts import Transcript
    from registry.usage_report import UsageReport

__all__ = ["SEARCHED_FILTERS", "SaidAndSpent"]

SEARCHED_FILTERS: Final = frozenset({"archived", "agent"})
"""The list filters (``registry.filters``) a list with a query applies, beside its cwd (``search``'s keywords); a
list with a query refuses the others rather than drop them."""


class SaidAndSpent:
    """The reads of sessions' conversations and usage, over what a ``SessionRegistry`` holds."""

    _store: EventStore
    _read_model: ReadModel
    _search: IndexOnDemand
    _searcher: Searcher | None
    _additional_directories: bool
    resolve_symlinks: bool
    page_size: int

    def state(self, session_id: str) -> SessionState | None:
        raise NotImplementedError

    def transcript(self, session_id: str) -> Transcript:
        """A session's conversation in order (a fork's starts with its source's up to the fork): every message kept
        for it, with its role and time; [] for a session with none recorded, or whose conversation a delete erased.
        An unknown id -> ``SessionNotFound``."""
        from registry.transcripts import transcript  # noqa: PLC0415 - reading conversations: not what a list loads

        check_session_id(session_id)
        if self.state(session_id) is None:
            raise SessionNotFound(session_id)
        return transcript(self._store, session_id)

    def search(
        self,
        query: str,
        *,
        agent: str | None = None,
        cwd: str | None = None,
        archived: str | None = "exclude",
        since: Any = None,
        until: Any = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> SearchPage:
        """The sessions whose conversations match ``query`` - words, ``"exact phrases"``, ``prefix*``, code-shaped
        terms - best first (relevance, then recency), each with the passages that matched; across every agent.
        ``agent``, ``cwd`` (absolute), ``archived`` and ``since``/``until`` (the matching message's time: epoch ns,
        an aware datetime or RFC 3339) narrow it before pagination; ``cursor`` continues a walk (bound to the query
        and filters: another -> ``InvalidCursor``). A message recorded in any process is found at once: the index
        is caught up first. See ``registry.search``."""
        from registry.search.hits import SearchFilter  # noqa: PLC0415 - search loads only where it is used

        where = SearchFilter(
            agent=None if agent is None else known_name(agent),
            cwd=None if cwd is None else normalise_cwd(cwd, resolve_symlinks=self.resolve_symlinks),
            archived=archived,
            since=None if since is None else parse_time(since, field="since"),
            until=None if until is None else parse_time(until, field="until"),
        )
        return self.searcher.search(query, where, limit=limit, cursor=cursor)

    @property
    def searcher(self) -> Searcher:
        """The search over this store's kept conversations (made on first use)."""
        if self._searcher is None:
            from registry.search.hits import Searcher  # noqa: PLC0415 - search loads only where it is used

            self._searcher = Searcher(self._store, self._read_model, self._search.index)
        return self._searcher

    def _searched(
        self, query: str, cwd: str | None, cursor: str | None, filters: Mapping[str, Any]
    ) -> ListSessionsResult:
        """A list with a query: the search's page, with the list filters the search applies (``SEARCHED_FILTERS``);
        another filter given (not None) is refused, never dropped."""
        for name, value in filters.items():
            if value is not None and name not in SEARCHED_FILTERS:
                searched = ", ".join(sorted(SEARCHED_FILTERS))
                raise InvalidParams(f"{name}: a list with a query is filtered by cwd, {searched} only", field=name)
        page = self.search(
            query,
            agent=filters.get("agent"),
            cwd=cwd,
            archived=filters.get("archived", "exclude"),
            limit=min(self.page_size, MAX_SEARCH_HITS),
            cursor=cursor,
        )
        sessions = []
        for state, hit in zip(page.states, page.hits, strict=True):
            info = session_info(state, additional_directories=self._additional_directories)
            meta = dict(info.meta) if info.meta is not UNSET else {}
            meta[META_SNIPPETS] = [{"role": s.role, "text": s.text} for s in hit.snippets]
            sessions.append(msgspec.structs.replace(info, meta=meta))
        return ListSessionsResult(sessions, UNSET if page.next_cursor is None else page.next_cursor)

    def usage(
        self,
        *,
        by: str = "day",
        since: Any = None,
        until: Any = None,
        agent: str | None = None,
        cwd: str | None = None,
        prices: PriceTable | None = None,
    ) -> UsageReport:
        """What the sessions' turns used, totalled ``by`` day, week, month, agent, cwd or model, from the UTC day
        ``since`` to the UTC day ``until`` (both included; a date, ``YYYY-MM-DD``, or a time - epoch ns, an aware
        datetime, RFC 3339 - standing for its day), of one ``agent`` and one ``cwd`` (absolute): tokens, and costs
        per currency - as the agents reported them, else estimated with ``prices`` (default: the user's price file
        over the shipped table, ``registry.prices``) and marked so. Deleted and archived sessions count: what was
        spent, was spent. From the read model's daily totals, caught up first: no scan of the log."""
        from registry.prices import current  # noqa: PLC0415 - usage loads only where it is asked for
        from registry.usage_report import day_bound, query_of, report  # noqa: PLC0415

        first, last = day_bound(since, "since"), day_bound(until, "until")
        name = None if agent is None else known_name(agent)
        where = None if cwd is None else normalise_cwd(cwd, resolve_symlinks=self.resolve_symlinks)
        query = query_of(by, first, last, name, where)
        self._read_model.catch_up()
        groups = self._read_model.usage(query)
        table = current() if prices is None else prices
        return report(groups, by=by, prices=table, since=first, until=last, agent=name, cwd=where)
