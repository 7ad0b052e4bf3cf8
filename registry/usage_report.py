"""Usage totals as people and programs ask for them: by day, week, month, agent, cwd or model, over a stretch of
days, with costs - reported, else estimated by a price table (marked), else tokens only - never added across
currencies (``SessionRegistry.usage``, ``acp-registry usage``).

The read model answers from its daily totals (``rm_usage``: one indexed pass, no log scan); weeks (from Monday) and
months are days grouped again here. Days are UTC days: the totals are shared by every host of a store, whatever its
zone, so ``since`` and ``until`` name UTC days (a time stands for its UTC day), both included.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from registry.errors import InvalidParams
from registry.model import parse_time
from registry.prices import PriceTable
from registry.readmodel.usage_tables import UsageGroup, UsageQuery
from registry.usage import DAY_NS, costs_shown

__all__ = ["BY", "UsageCost", "UsageLine", "UsagePrices", "UsageReport", "day_bound", "query_of", "report"]

BY: Final = ("day", "week", "month", "agent", "cwd", "model")
_EPOCH: Final = dt.date(1970, 1, 1)


class UsageCost(msgspec.Struct, rename="camel", omit_defaults=True):
    """A cost in one currency: ``nanos`` billionths of it (exact), ``amount`` the same as a decimal string;
    ``estimated`` when any of it is a price table's estimate (``estimated_nanos`` of it)."""

    currency: str
    amount: str
    nanos: int
    estimated: bool = False
    estimated_nanos: int = 0


class UsageLine(msgspec.Struct, rename="camel"):
    """One group's totals (``key``: the day ``2026-12-01``, the week's Monday, the month ``2026-12``, the agent, the
    cwd or the model; None for turns that named no agent or model). ``unpriced_tokens``: tokens with neither a
    reported cost nor a price (their models in ``unpriced_models``); ``models``: every model the group's turns
    named."""

    key: str | None
    turns: int
    input_tokens: int
    output_tokens: int
    cached_read_tokens: int
    cached_write_tokens: int
    thought_tokens: int
    total_tokens: int
    costs: list[UsageCost]
    unpriced_tokens: int
    unpriced_models: list[str | None]
    models: list[str | None]


class UsagePrices(msgspec.Struct, rename="camel"):
    """The price table estimates were made with: its date, currency and where it came from."""

    as_of: str
    currency: str
    source: str


class UsageReport(msgspec.Struct, rename="camel"):
    """``acp-registry usage --json``: the question (``by``, the UTC days ``since`` and ``until``, ``agent``,
    ``cwd``; None: not narrowed), one line per group in order (days, weeks and months oldest first; agents, cwds
    and models most tokens first), the ``total`` of every line, and the price table."""

    by: str
    since: str | None
    until: str | None
    agent: str | None
    cwd: str | None
    lines: list[UsageLine]
    total: UsageLine
    prices: UsagePrices


def day_bound(value: object, field: str) -> int | None:
    """A UTC day (days since 1970-01-01) from a date, a ``YYYY-MM-DD`` string, or a time ``parse_time`` reads (its
    UTC day); None stays None."""
    if value is None:
        return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return (value - _EPOCH).days
    if isinstance(value, str) and len(value.strip()) == 10:
        try:
            return (dt.date.fromisoformat(value.strip()) - _EPOCH).days
        except ValueError:
            raise InvalidParams(f"{field} is not a day (YYYY-MM-DD) or an RFC 3339 time: {value!r}") from None
    try:
        return parse_time(value, field=field) // DAY_NS
    except InvalidParams:
        raise InvalidParams(f"{field} is not a day (YYYY-MM-DD) or an RFC 3339 time: {value!r}") from None


def _date(day: int) -> str:
    return (_EPOCH + dt.timedelta(days=day)).isoformat()


def _period(by: str, day: int) -> str:
    date = _EPOCH + dt.timedelta(days=day)
    if by == "week":
        return (date - dt.timedelta(days=date.weekday())).isoformat()
    if by == "month":
        return date.isoformat()[:7]
    return date.isoformat()


def report(
    groups: Iterable[UsageGroup],
    *,
    by: str,
    prices: PriceTable,
    since: int | None = None,
    until: int | None = None,
    agent: str | None = None,
    cwd: str | None = None,
) -> UsageReport:
    """The report of a query's groups (``ReadModel.usage`` grouped by ``query_of(by)``'s column)."""
    sums: dict[str | None, dict[tuple[str, str], list[int]]] = {}
    dated = by in ("day", "week", "month")
    periods: dict[int | str, str | None] = {}  # a period's key, made once for all of its groups
    for group, model, currency, *values in groups:
        key = periods.get(group, "")
        if key == "":
            key = periods[group] = _period(by, group) if dated and isinstance(group, int) else str(group) or None
        parts = sums.get(key)
        if parts is None:
            parts = sums[key] = {}
        found = parts.get((model, currency))
        if found is None:
            parts[(model, currency)] = values
        else:
            for n, value in enumerate(values):
                found[n] += value
    lines = [_line(key, parts, prices) for key, parts in sums.items()]
    if by in ("day", "week", "month"):
        lines.sort(key=lambda line: line.key or "")
    else:
        lines.sort(key=lambda line: (-line.total_tokens, line.key or ""))
    return UsageReport(
        by=by,
        since=None if since is None else _date(since),
        until=None if until is None else _date(until),
        agent=agent,
        cwd=cwd,
        lines=lines,
        total=_total(lines),
        prices=UsagePrices(prices.as_of, prices.currency, prices.source),
    )


def query_of(by: str, since: int | None, until: int | None, agent: str | None, cwd: str | None) -> UsageQuery:
    """The read model's query for a report grouped ``by`` (weeks and months are read by day)."""
    if by not in BY:
        raise InvalidParams(f"usage is totalled by {', '.join(BY)}; not by {by!r}")
    if since is not None and until is not None and since > until:
        raise InvalidParams(f"since ({_date(since)}) is after until ({_date(until)})")
    return UsageQuery("day" if by in ("week", "month") else by, since, until, agent, cwd)


def _line(key: str | None, parts: dict[tuple[str, str], list[int]], prices: PriceTable) -> UsageLine:
    tokens = [0] * 5
    turns = unpriced = 0
    reported: list[tuple[str, int]] = []
    estimated: list[tuple[str, int]] = []
    unpriced_models: set[str] = set()
    for (model, currency), (count, *counts, cost) in parts.items():
        turns += count
        tokens = [a + b for a, b in zip(tokens, counts, strict=True)]
        if currency:
            reported.append((currency, cost))
            continue
        nanos = prices.estimate(model, *counts)
        if nanos is None:
            if any(counts):
                unpriced += sum(counts)
                unpriced_models.add(model)
        else:
            estimated.append((prices.currency, nanos))
    models = sorted({model for model, _ in parts})
    return UsageLine(
        key=key,
        turns=turns,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cached_read_tokens=tokens[2],
        cached_write_tokens=tokens[3],
        thought_tokens=tokens[4],
        total_tokens=sum(tokens),
        costs=_costs(reported, estimated),
        unpriced_tokens=unpriced,
        unpriced_models=[model or None for model in sorted(unpriced_models)],
        models=[model or None for model in models],
    )


def _costs(reported: Iterable[tuple[str, int]], estimated: list[tuple[str, int]]) -> list[UsageCost]:
    guessed: dict[str, int] = {}
    for currency, nanos in estimated:
        guessed[currency] = guessed.get(currency, 0) + nanos
    return [
        UsageCost(currency, _amount(nanos), nanos, guess, guessed.get(currency, 0))
        for currency, nanos, guess in costs_shown(reported, estimated)
    ]


def _amount(nanos: int) -> str:
    """Billionths as an exact decimal string (``12.345678900``)."""
    whole, part = divmod(nanos, 1_000_000_000)
    return f"{whole}.{part:09d}"


def _total(lines: list[UsageLine]) -> UsageLine:
    reported: list[tuple[str, int]] = []
    estimated: list[tuple[str, int]] = []
    for line in lines:
        for cost in line.costs:
            reported.append((cost.currency, cost.nanos - cost.estimated_nanos))
            if cost.estimated_nanos:
                estimated.append((cost.currency, cost.estimated_nanos))
    fields: dict[str, Any] = {
        name: sum(getattr(line, name) for line in lines)
        for name in (
            "turns",
            "input_tokens",
            "output_tokens",
            "cached_read_tokens",
            "cached_write_tokens",
            "thought_tokens",
            "total_tokens",
            "unpriced_tokens",
        )
    }
    unpriced = sorted({model or "" for line in lines for model in line.unpriced_models})
    models = sorted({model or "" for line in lines for model in line.models})
    return UsageLine(
        key=None,
        costs=_costs(reported, estimated),
        unpriced_models=[model or None for model in unpriced],
        models=[model or None for model in models],
        **fields,
    )
