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
from registry.readmodel.usage_tables import SUMS, UsageGroup, UsageQuery
from registry.usage import DAY_NS

__all__ = ["BY", "UsageCost", "UsageLine", "UsagePrices", "UsageReport", "day_bound", "query_of", "report"]

BY: Final = ("day", "week", "month", "agent", "cwd", "model")
_EPOCH: Final = dt.date(1970, 1, 1)
_COUNTS: Final = (*(name for name in SUMS if name != "cost_nanos"), "total_tokens", "unpriced_tokens")
"""A line's counts, which the total adds up line by line (its costs are added by currency)."""


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
    """One group's line: its parts' sums added, each part without a reported cost priced by ``prices``."""
    turns = input_tokens = output_tokens = cached_read = cached_write = thought = 0
    reported: dict[str, int] = {}
    estimated, found, unpriced = 0, False, 0
    unpriced_models: list[str] = []
    estimate = prices.estimate
    for (model, currency), (count, a, b, c, d, e, cost) in parts.items():  # every line's loop: kept lean
        turns += count
        input_tokens += a
        output_tokens += b
        cached_read += c
        cached_write += d
        thought += e
        if currency:
            reported[currency] = reported.get(currency, 0) + cost
            continue
        nanos = estimate(model, a, b, c, d, e)
        if nanos is not None:
            estimated += nanos
            found = True
        elif a or b or c or d or e:
            unpriced += a + b + c + d + e
            unpriced_models.append(model)
    return UsageLine(
        key=key,
        turns=turns,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_read_tokens=cached_read,
        cached_write_tokens=cached_write,
        thought_tokens=thought,
        total_tokens=input_tokens + output_tokens + cached_read + cached_write + thought,
        costs=_costs(reported, {prices.currency: estimated} if found else {}),
        unpriced_tokens=unpriced,
        unpriced_models=[model or None for model in sorted(set(unpriced_models))],
        models=[model or None for model in sorted({model for model, _ in parts})],
    )


def _costs(reported: dict[str, int], estimated: dict[str, int]) -> list[UsageCost]:
    """The costs by currency (sorted): reported and estimated amounts of a currency added, marked ``estimated`` when
    any of it is; never amounts of two currencies."""
    if not estimated and len(reported) == 1:  # one currency, as the agent reported it
        ((currency, nanos),) = reported.items()
        return [UsageCost(currency, _amount(nanos), nanos)]
    costs = []
    for currency in sorted(reported.keys() | estimated.keys()):
        guess = estimated.get(currency, 0)
        nanos = reported.get(currency, 0) + guess
        costs.append(UsageCost(currency, _amount(nanos), nanos, currency in estimated, guess))
    return costs


def _amount(nanos: int) -> str:
    """Billionths as an exact decimal string (``12.345678900``)."""
    whole, part = divmod(nanos, 1_000_000_000)
    return f"{whole}.{part:09d}"


def _total(lines: list[UsageLine]) -> UsageLine:
    reported: dict[str, int] = {}
    estimated: dict[str, int] = {}
    for line in lines:
        for cost in line.costs:
            reported[cost.currency] = reported.get(cost.currency, 0) + cost.nanos - cost.estimated_nanos
            if cost.estimated:
                estimated[cost.currency] = estimated.get(cost.currency, 0) + cost.estimated_nanos
    fields: dict[str, Any] = {name: sum(getattr(line, name) for line in lines) for name in _COUNTS}
    unpriced = sorted({model or "" for line in lines for model in line.unpriced_models})
    models = sorted({model or "" for line in lines for model in line.models})
    return UsageLine(
        key=None,
        costs=_costs(reported, estimated),
        unpriced_models=[model or None for model in unpriced],
        models=[model or None for model in models],
        **fields,
    )
