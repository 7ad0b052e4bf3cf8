"""What the recorder writes of a turn or a load the proxy captured (``registry.proxy.capture``): its messages, and the
``Usage`` the turn added.

Usage, per turn: ``Usage`` holds what the turn added. ACP's cost (``usage_update.cost``) is the session's cumulative
amount, so a turn's cost is the last amount it reported less the amount before it: the last one seen on this
connection, else 0 for a session made here, else what the registry recorded for the session (an agent that
restarted its count - a lower amount - is taken at its word: all it reports is new). The prompt answer's
``usage`` is cumulative for the session by the schema's wording and is taken so (the same rule), except from the
agents that send the turn's own (``PER_TURN_USAGE``; docs/proxy.md says what each sends).
"""

from __future__ import annotations

from typing import Final

from events.model import Message, Usage
from registry.conversation import counted
from registry.proxy.assembly import Reading, Said
from registry.service import SessionRegistry
from registry.usage import with_tokens

__all__ = ["PER_TURN_USAGE", "kept", "record_replay", "usage_of"]

PER_TURN_USAGE: Final = frozenset({"claude-code", "codex"})
"""Agents whose prompt answer's ``usage`` is the turn's own, not the session's so far (claude-agent-acp starts its
tally afresh each turn; codex-acp reports its last model request)."""


def kept(
    said: Said | None, registry: SessionRegistry, sid: str, *, made_here: bool, agent: str
) -> tuple[list[Message], Usage | None]:
    """A turn's messages and its ``Usage`` (what it added: see the module's docstring), for ``record_turn``."""
    if said is None:
        return [], None
    return said.messages, usage_of(said.reading, registry, sid, made_here=made_here, per_turn=agent in PER_TURN_USAGE)


def usage_of(reading: Reading, registry: SessionRegistry, sid: str, *, made_here: bool, per_turn: bool) -> Usage | None:
    """What a turn added, from what the agent reported during it and what it reported before."""
    totals: list[tuple[tuple[int, ...], dict[str, int]]] = []

    def recorded() -> tuple[tuple[int, ...], dict[str, int]]:
        if not totals:
            totals.append(_recorded(registry, sid) if not made_here else ((0, 0, 0, 0, 0), {}))
        return totals[0]

    tokens: tuple[int, ...] = (0, 0, 0, 0, 0)
    if reading.tokens is not None:
        tokens = reading.tokens
        if not per_turn:
            before = reading.tokens_before if reading.tokens_before is not None else recorded()[0]
            if all(now >= then for now, then in zip(tokens, before, strict=True)):
                tokens = tuple(now - then for now, then in zip(tokens, before, strict=True))
    cost_nanos = currency = None
    if reading.cost is not None:
        currency, amount = reading.cost
        before_cost = reading.cost_before
        then = before_cost[1] if before_cost is not None and before_cost[0] == currency else None
        if then is None:
            then = recorded()[1].get(currency, 0)
        cost_nanos = amount - then if amount >= then else amount  # lower: the agent's count started again
    if reading.tokens is None and reading.cost is None and reading.context_used is None and reading.model is None:
        return None  # nothing reported
    return with_tokens(
        tokens,
        cost_nanos=cost_nanos,
        currency=currency,
        model=reading.model,
        context_used=reading.context_used,
        context_size=reading.context_size,
    )


def _recorded(registry: SessionRegistry, sid: str) -> tuple[tuple[int, ...], dict[str, int]]:
    """The tokens and costs (by currency) the registry holds for a session: where an agent's cumulative count
    stood when this connection first saw the session."""
    tokens = [0, 0, 0, 0, 0]
    costs: dict[str, int] = {}
    for event in registry.activity(sid):
        usage = event.usage
        if usage is None:
            continue
        for n, value in enumerate(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_read_tokens,
                usage.cached_write_tokens,
                usage.thought_tokens,
            )
        ):
            tokens[n] += value
        if usage.cost_nanos is not None and usage.currency is not None:
            costs[usage.currency] = costs.get(usage.currency, 0) + usage.cost_nanos
    return tuple(tokens), costs


def record_replay(registry: SessionRegistry, sid: str, said: Said | None) -> None:
    """The past the agent replayed on ``session/load``, kept for a session the registry holds no message of yet
    (they were said before this registry saw them: their times are the session's last activity, which does not
    move; the count becomes what they count, unless it is higher already)."""
    if said is None or not said.messages:
        return
    state = registry.state(sid)
    if state is None or state.deleted:
        return
    if any(event.content is not None for event in registry.activity(sid)):
        return  # it has its messages: a replay would say them again
    count = max(0, counted(said.messages) - state.messages)  # what the session was counted with is this past
    registry.record_messages(sid, said.messages, at=state.updated_at, count=count)
