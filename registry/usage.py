"""What sessions used: a session's totals as the fold keeps them (``SessionUsage``), what ``_meta`` shows of them,
what a turn adds to the read model's daily totals, and a turn's usage in words.

Each turn's ``events.Usage`` is what the turn added (disjoint token counts, the cost the agent reported, the model);
a session's totals are their sum, folded with the session's state (``registry.fold.fold``), so the list shows
them without reading the log. Costs are kept per currency, never added across currencies; a turn that reported no
cost keeps its tokens by model (``unpriced``), which a price table prices when they are shown (``registry.prices``):
such a cost is an estimate and says so wherever it appears.

The read model also keeps daily totals (``rm_usage`` and ``rm_usage_days``, ``registry.readmodel.usage_tables``):
what the turns added, by UTC day of the turn, agent, cwd, model and the currency the agent reported a cost in (''
for none); ``fold_usage`` is the one rule of what a turn adds there. A session's usage stays in those totals after
it is deleted or archived: what was spent, was spent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from events.model import Usage
from registry.errors import InvalidParams

if TYPE_CHECKING:
    from registry.prices import PriceTable


__all__ = [
    "DAY_NS",
    "MAX_COST_NANOS",
    "MAX_NAME",
    "MAX_TOKENS",
    "TOKEN_FIELDS",
    "SessionUsage",
    "UsageKey",
    "added",
    "amount_text",
    "check_usage",
    "costs_shown",
    "current",
    "estimates",
    "fold_usage",
    "meta_value",
    "total_usage_text",
    "turn_usage_text",
    "with_tokens",
]

DAY_NS: Final = 86_400_000_000_000
MAX_TOKENS: Final = 1 << 40
"""Tokens of one kind one turn may add (a trillion): sums of them stay far inside a 64-bit integer."""
MAX_COST_NANOS: Final = 1 << 53
"""The cost one turn may report, in billionths (about 9 million units of its currency)."""
MAX_NAME: Final = 200
"""Characters of a model name, or of a currency code."""
TOKEN_FIELDS: Final = ("input_tokens", "output_tokens", "cached_read_tokens", "cached_write_tokens", "thought_tokens")
"""``events.Usage``'s token counts, in the order every total here keeps them."""

ModelTokens = tuple[str, int, int, int, int, int]
"""A model ('' for none named) and the tokens of ``TOKEN_FIELDS`` its turns used without a reported cost."""
UsageKey = tuple[int, str, str, str, str]
"""A daily total's key: the turn's UTC day (days since 1970-01-01), agent, cwd, model and the currency of the cost
it reported ('' for none)."""


class SessionUsage(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A session's usage so far: the sum of its turns' ``events.Usage``. Tokens in total (``TOKEN_FIELDS``) and
    ``turns`` (those that reported usage); ``costs``: the costs the agent reported, ``(currency, nanos)`` sorted by
    currency; ``unpriced``: the tokens of turns that reported none, by model (sorted), for a price table to
    estimate. Kept lean, as every list page reads it: a turn's model and context window are in the turn's event."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_read_tokens: int = 0
    cached_write_tokens: int = 0
    thought_tokens: int = 0
    turns: int = 0
    costs: tuple[tuple[str, int], ...] = ()
    unpriced: tuple[ModelTokens, ...] = ()

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cached_read_tokens
            + self.cached_write_tokens
            + self.thought_tokens
        )


def check_usage(usage: object, field: str = "usage") -> Usage | None:
    """A turn's ``events.Usage`` within the registry's rules (None: no usage): counts from 0 to ``MAX_TOKENS``, a
    cost from 0 to ``MAX_COST_NANOS`` with a currency, names printable and at most ``MAX_NAME`` characters."""
    if usage is None:
        return None
    if type(usage) is not Usage:
        raise InvalidParams(f"{field} must be an events.Usage, not {type(usage).__name__}")
    counts = _tokens(usage)
    cost, currency, model = usage.cost_nanos, usage.currency, usage.model
    if (  # every turn's check: the usual usage in one expression, the rules one by one only when it fails
        all(type(count) is int and 0 <= count < MAX_TOKENS for count in counts)
        and usage.context_used is None
        and usage.context_size is None
        and (cost is None or (type(cost) is int and 0 <= cost < MAX_COST_NANOS and currency is not None))
        and (currency is None or (type(currency) is str and 0 < len(currency) <= MAX_NAME and currency.isprintable()))
        and (model is None or (type(model) is str and 0 < len(model) <= MAX_NAME and model.isprintable()))
    ):
        return usage
    for name in TOKEN_FIELDS:
        _count(getattr(usage, name), f"{field}.{name}", MAX_TOKENS)
    for name in ("context_used", "context_size"):
        value = getattr(usage, name)
        if value is not None:
            _count(value, f"{field}.{name}", MAX_TOKENS)
    if cost is not None:
        _count(cost, f"{field}.cost_nanos", MAX_COST_NANOS)
        if currency is None:
            raise InvalidParams(f"{field}.currency is needed with a cost (an ISO 4217 code such as 'USD')")
    for name in ("currency", "model"):
        value = getattr(usage, name)
        if value is not None and (
            not isinstance(value, str) or not value or len(value) > MAX_NAME or not value.isprintable()
        ):
            raise InvalidParams(f"{field}.{name} must be a printable name of 1 to {MAX_NAME} characters")
    return usage


def _count(value: object, field: str, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise InvalidParams(f"{field} must be an int from 0 to {limit - 1}, got {value!r}")


def _tokens(usage: Usage) -> tuple[int, int, int, int, int]:
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_read_tokens,
        usage.cached_write_tokens,
        usage.thought_tokens,
    )


def with_tokens(
    tokens: Sequence[int],
    *,
    cost_nanos: int | None,
    currency: str | None,
    model: str | None,
    context_used: int | None,
    context_size: int | None,
) -> Usage:
    """A turn's ``Usage`` from its five token counts in ``SessionUsage``'s order (input, output, cached read, cached
    write, thought) and what else it reported."""
    return Usage(
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cached_read_tokens=tokens[2],
        cached_write_tokens=tokens[3],
        thought_tokens=tokens[4],
        cost_nanos=cost_nanos,
        currency=currency,
        model=model,
        context_used=context_used,
        context_size=context_size,
    )


def added(total: SessionUsage | None, usage: Usage) -> SessionUsage:
    """``total`` (None: nothing yet) with one turn's ``usage`` added: what the fold keeps."""
    total = _EMPTY if total is None else total
    costs, unpriced = total.costs, total.unpriced
    counts = _tokens(usage)
    if usage.cost_nanos is not None:
        costs = _merged(costs, usage.currency or "", (usage.cost_nanos,))
    elif any(counts):
        unpriced = _merged(unpriced, usage.model or "", counts)
    return SessionUsage(
        total.input_tokens + counts[0],
        total.output_tokens + counts[1],
        total.cached_read_tokens + counts[2],
        total.cached_write_tokens + counts[3],
        total.thought_tokens + counts[4],
        total.turns + 1,
        costs,
        unpriced,
    )


_EMPTY: Final = SessionUsage()


def _merged(entries: tuple[Any, ...], name: str, values: tuple[int, ...]) -> tuple[Any, ...]:
    """``entries`` (each a name and numbers, sorted by name) with ``values`` added to the numbers of ``name``."""
    for n, entry in enumerate(entries):
        if entry[0] == name:
            summed = (name, *map(int.__add__, entry[1:], values))
            return (*entries[:n], summed, *entries[n + 1 :])
    return tuple(sorted((*entries, (name, *values)), key=lambda item: item[0]))


def fold_usage(totals: dict[UsageKey, list[int]], at: int, agent: str | None, cwd: str, usage: Usage) -> None:
    """Add one turn to daily totals (``UsageKey`` -> turns, the ``TOKEN_FIELDS``, the cost's nanos: what
    ``usage_tables.usage_rows`` and ``day_rows`` make the tables' rows of). The one rule every keeper of them - the
    tables' fold, ``verify``, the in-memory read model - follows: a turn the session's fold applied, at the turn's
    time."""
    cost = usage.cost_nanos
    key = (at // DAY_NS, agent or "", cwd, usage.model or "", "" if cost is None else usage.currency or "")
    row = totals.get(key)
    if row is None:
        totals[key] = [1, *_tokens(usage), cost or 0]
        return
    row[0] += 1
    row[1] += usage.input_tokens
    row[2] += usage.output_tokens
    row[3] += usage.cached_read_tokens
    row[4] += usage.cached_write_tokens
    row[5] += usage.thought_tokens
    row[6] += cost or 0


def current() -> PriceTable:
    """The process's price table (``registry.prices.current``), its module loaded with the first estimate."""
    table: PriceTable = (_prices or _load_prices()).current()
    return table


_prices: Any = None


def _load_prices() -> Any:
    global _prices  # noqa: PLW0603 - the module, imported once: not by a list that estimates nothing
    import registry.prices  # noqa: PLC0415

    _prices = registry.prices
    return _prices


# -- shown ----------------------------------------------------------------------------------------------------


def costs_shown(
    reported: Iterable[tuple[str, int]], estimated: Iterable[tuple[str, int]]
) -> list[tuple[str, int, bool]]:
    """Costs by currency, each ``(currency, nanos, estimated)``: reported and estimated amounts of one currency
    added (``estimated`` when any of it is), never amounts of two currencies; sorted by currency."""
    amounts: dict[str, list[int]] = {}
    for currency, nanos in reported:
        amounts.setdefault(currency, [0, 0])[0] += nanos
    for currency, nanos in estimated:
        amounts.setdefault(currency, [0, 0])[1] += nanos
    return [(currency, sum(parts), parts[1] > 0) for currency, parts in sorted(amounts.items())]


def estimates(unpriced: Iterable[ModelTokens], prices: PriceTable) -> tuple[list[tuple[str, int]], int]:
    """What ``prices`` says ``unpriced`` tokens cost (in its one currency: [] when it prices none of them), and how
    many of them it has no price for."""
    estimate = prices.estimate
    found = False
    nanos = left = 0
    for entry in unpriced:
        cost = estimate(*entry)
        if cost is None:
            left += entry[1] + entry[2] + entry[3] + entry[4] + entry[5]
        else:
            found = True
            nanos += cost
    return ([(prices.currency, nanos)] if found else []), left


def meta_value(usage: SessionUsage, prices: PriceTable | None = None) -> dict[str, Any]:
    """What a session's ``_meta`` shows under ``acp-session-registry/usage``: the token counts as ACP's prompt
    usage names them (``inputTokens``, ``outputTokens``; ``cachedReadTokens``, ``cachedWriteTokens``,
    ``thoughtTokens`` when not 0), and ``costs``: one ``{amount, currency}`` a currency, with ``estimated: true``
    when any of it is a price table's estimate (absent when no cost is known). ``prices``: the table estimates
    are made with (default: ``registry.prices.current()``). Lean, as every list page carries it."""
    shown: dict[str, Any] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.cached_read_tokens:
        shown["cachedReadTokens"] = usage.cached_read_tokens
    if usage.cached_write_tokens:
        shown["cachedWriteTokens"] = usage.cached_write_tokens
    if usage.thought_tokens:
        shown["thoughtTokens"] = usage.thought_tokens
    costs = usage.costs
    if usage.unpriced:
        estimated = estimates(usage.unpriced, current() if prices is None else prices)[0]
        if estimated and not costs:  # the usual case: one agent that reports no cost
            ((currency, nanos),) = estimated
            shown["costs"] = [{"amount": nanos / 1e9, "currency": currency, "estimated": True}]
            return shown
        if estimated:
            shown["costs"] = [
                {"amount": nanos / 1e9, "currency": currency, "estimated": True}
                if guess
                else {"amount": nanos / 1e9, "currency": currency}
                for currency, nanos, guess in costs_shown(costs, estimated)
            ]
            return shown
    if costs:
        shown["costs"] = [{"amount": nanos / 1e9, "currency": currency} for currency, nanos in costs]
    return shown


def amount_text(nanos: int, currency: str) -> str:
    """An amount for people: ``$1.23`` for USD, ``1.23 EUR`` for another currency; four decimals below a dime."""
    value = nanos / 1e9
    digits = 2 if value >= 0.095 or value == 0 else 4
    if currency == "USD":
        return f"${value:,.{digits}f}"
    return f"{value:,.{digits}f} {currency or '(no currency)'}"


def turn_usage_text(usage: Usage | None, prices: PriceTable | None = None) -> str:
    """A turn's usage in one line for people (``show``'s and ``transcript``'s turns): its tokens by kind, its cost -
    reported, or a price table's estimate marked ``estimated`` - and its model; '' for a turn without usage."""
    if usage is None:
        return ""
    names = ("in", "out", "cache read", "cache write", "thought")
    parts = [f"{count:,} {name}" for count, name in zip(_tokens(usage), names, strict=True) if count]
    line = f"{sum(_tokens(usage)):,} tokens" + (f" ({', '.join(parts)})" if parts else "")
    if usage.cost_nanos is not None:
        line += f", {amount_text(usage.cost_nanos, usage.currency or '')}"
    elif any(_tokens(usage)):
        prices = current() if prices is None else prices
        nanos = prices.estimate(usage.model or "", *_tokens(usage))
        if nanos is not None:
            line += f", {amount_text(nanos, prices.currency)} estimated"
    if usage.model is not None:
        line += f", {usage.model}"
    if usage.context_used is not None and usage.context_size:
        line += f", context {usage.context_used:,} of {usage.context_size:,}"
    return line


def total_usage_text(usage: SessionUsage, prices: PriceTable | None = None) -> str:
    """A session's totals in one line for people (``show``): tokens by kind, costs by currency (estimates marked),
    tokens with no price, and the turns."""
    tokens = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_read_tokens,
        usage.cached_write_tokens,
        usage.thought_tokens,
    )
    names = ("in", "out", "cache read", "cache write", "thought")
    parts = [f"{count:,} {name}" for count, name in zip(tokens, names, strict=True) if count]
    line = f"{usage.total_tokens:,} tokens" + (f" ({', '.join(parts)})" if parts else "")
    estimated: list[tuple[str, int]] = []
    left = 0
    if usage.unpriced:
        estimated, left = estimates(usage.unpriced, current() if prices is None else prices)
    for currency, nanos, guess in costs_shown(usage.costs, estimated):
        line += f", {amount_text(nanos, currency)}" + (" estimated" if guess else "")
    if left:
        line += f", {left:,} tokens without a price"
    return line + f", {usage.turns:,} turn{'s' if usage.turns != 1 else ''}"
