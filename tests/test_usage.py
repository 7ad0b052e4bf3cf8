"""What sessions used and cost: a turn's usage checked, folded into the session's totals, shown in ``_meta`` (and in a
diff when it moves), totalled by day, week, month, agent, cwd and model from the read model's daily totals - the same
figures on SQLite, PostgreSQL and in memory - with costs reported, else estimated (marked), never added across
currencies."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from events.model import Message, Role, SessionUpdated, Usage
from registry import SessionRegistry
from registry.commands import check_event
from registry.diffs import Updated, diff
from registry.errors import InvalidParams
from registry.model import META_USAGE
from registry.prices import SHIPPED, Price, PriceTable
from registry.readmodel.check import check_read_model
from registry.usage import DAY_NS, SessionUsage, added, meta_value, turn_usage_text

DAY = 20_420  # 2025-11-28
T0 = DAY * DAY_NS + 9 * 3_600_000_000_000  # 09:00 UTC that day

SONNET = Usage(input_tokens=1_000, output_tokens=200, cached_read_tokens=5_000, model="claude-sonnet-4-5-20250929")
SONNET_NANOS = 1_000 * 3_000 + 200 * 15_000 + 5_000 * 300  # $3, $15 and $0.30 per million tokens, in nanos
REPORTED = Usage(input_tokens=10, output_tokens=20, cost_nanos=1_500_000, currency="USD", model="gemini-2.5-pro")
EUROS = Usage(output_tokens=7, thought_tokens=3, cost_nanos=40_000_000, currency="EUR", model="mistral-large")
UNKNOWN = Usage(input_tokens=50, output_tokens=5, model="mystery-1")


def test_a_sessions_totals_are_its_turns_summed_costs_apart_by_currency() -> None:
    total = None
    for usage in (SONNET, REPORTED, EUROS, UNKNOWN, SONNET, Usage(context_used=900, context_size=200_000)):
        total = added(total, usage)
    assert total == SessionUsage(
        input_tokens=2_060,
        output_tokens=432,
        cached_read_tokens=10_000,
        thought_tokens=3,
        turns=6,
        costs=(("EUR", 40_000_000), ("USD", 1_500_000)),
        unpriced=(("claude-sonnet-4-5-20250929", 2_000, 400, 10_000, 0, 0), ("mystery-1", 50, 5, 0, 0, 0)),
    )  # a turn's model and context window stay in its event: the list reads these on every page
    assert total.total_tokens == 2_060 + 432 + 10_000 + 3


def test_meta_shows_tokens_costs_by_currency_and_marks_estimates() -> None:
    total = added(added(added(None, SONNET), REPORTED), EUROS)
    shown = meta_value(total, SHIPPED)
    assert shown == {
        "inputTokens": 1_010,
        "outputTokens": 227,
        "cachedReadTokens": 5_000,
        "thoughtTokens": 3,
        "costs": [
            {"amount": 0.04, "currency": "EUR"},
            {"amount": (SONNET_NANOS + 1_500_000) / 1e9, "currency": "USD", "estimated": True},
        ],
    }
    # tokens only, where neither a cost nor a price applies
    assert "costs" not in meta_value(added(None, UNKNOWN), SHIPPED)
    assert meta_value(added(None, REPORTED), SHIPPED)["costs"] == [{"amount": 0.0015, "currency": "USD"}]


def test_a_turn_is_checked_before_it_is_recorded(tmp_path: Path) -> None:
    with SessionRegistry.open(f"sqlite://{tmp_path}/log.db") as registry:
        registry.create("/w", session_id="s")
        for bad, said in [
            (Usage(input_tokens=-1), "usage.input_tokens must be an int from 0"),
            (Usage(output_tokens=1 << 41), "usage.output_tokens must be an int from 0"),
            (Usage(cost_nanos=5), "usage.currency is needed with a cost"),
            (Usage(model="two\nlines"), "usage.model must be a printable name"),
            (Usage(currency=""), "usage.currency must be a printable name"),
        ]:
            with pytest.raises(InvalidParams, match=said):
                registry.record_turn("s", messages=2, usage=bad)
            with pytest.raises(InvalidParams, match=said):
                registry.record_messages("s", [Message(role=Role.USER, text="hi")], usage=bad)
        with pytest.raises(InvalidParams, match=r"must be an events\.Usage"):
            registry.record_turn("s", messages=2, usage={"input_tokens": 1})  # type: ignore[arg-type]
        assert registry.state("s").usage is None  # type: ignore[union-attr]
        assert registry.store.head() == 1  # nothing was written


def test_an_imported_turn_is_held_to_the_same_rules() -> None:
    good = SessionUpdated(at=T0, messages=2, usage=SONNET)
    assert check_event(good) is good
    with pytest.raises(InvalidParams, match=r"event\.usage\.cost_nanos must be an int from 0"):
        check_event(SessionUpdated(at=T0, usage=Usage(cost_nanos=-5, currency="USD")))


def test_the_list_carries_usage_and_a_turn_with_usage_sends_it_in_a_diff(tmp_path: Path) -> None:
    with SessionRegistry.open(f"sqlite://{tmp_path}/log.db") as registry:
        registry.create("/w", session_id="s", at=T0)
        before = registry.state("s")
        registry.record_turn("s", messages=2, at=T0 + 1, usage=SONNET)
        after = registry.state("s")
        registry.record_turn("s", messages=0, at=T0 + 10**9)  # no usage, no message: only updatedAt moves
        later = registry.state("s")
        assert before is not None and after is not None and later is not None
        (listed,) = registry.list().sessions
        assert listed.meta[META_USAGE] == meta_value(after.usage, SHIPPED)  # type: ignore[arg-type,index]
        assert later.usage == after.usage
        item = diff(after.position, before, after)
        assert isinstance(item, Updated) and item.notification.update.meta[META_USAGE]["inputTokens"] == 1_000  # type: ignore[index]
        quiet = diff(later.position, after, later)
        assert isinstance(quiet, Updated) and quiet.notification.update.meta is msgspec.UNSET


@pytest.fixture
def story(store_urls: Callable[[], str]) -> str:
    """Three agents' sessions over three UTC days (a Monday among them), two cwds, costs reported in two currencies
    and estimated; a deleted session whose spending stays; an archived one."""
    url = store_urls()
    with SessionRegistry.open(url) as registry:
        _story(registry)
    return url


def _story(registry: SessionRegistry, prefix: str = "") -> None:
    registry.create("/work/app", session_id=f"{prefix}a", agent="claude-code", at=T0)
    registry.record_turn(f"{prefix}a", messages=2, at=T0 + 1, usage=SONNET)
    registry.record_turn(f"{prefix}a", messages=2, at=T0 + 2 * DAY_NS, usage=SONNET)
    registry.create("/work/api", session_id=f"{prefix}b", agent="gemini", at=T0)
    registry.record_turn(f"{prefix}b", messages=2, at=T0 + DAY_NS, usage=REPORTED)
    registry.record_turn(f"{prefix}b", messages=2, at=T0 + DAY_NS + 5, usage=EUROS)
    registry.archive(f"{prefix}b")
    registry.create("/work/app", session_id=f"{prefix}c", agent="codex", at=T0)
    registry.record_messages(f"{prefix}c", [Message(role=Role.USER, text="hi")], at=T0 + DAY_NS, usage=UNKNOWN)
    registry.delete(f"{prefix}c")


def _line(report: object, key: str | None) -> dict[str, object]:
    lines = msgspec.to_builtins(report)["lines"]
    (found,) = [line for line in lines if line["key"] == key]
    return found  # type: ignore[no-any-return]


def test_totals_by_day_week_month_agent_cwd_and_model(story: str) -> None:
    with SessionRegistry.open(story) as registry:
        days = registry.usage(by="day", prices=SHIPPED)
        assert [line.key for line in days.lines] == ["2025-11-28", "2025-11-29", "2025-11-30"]
        first = _line(days, "2025-11-28")
        assert (first["turns"], first["inputTokens"], first["cachedReadTokens"]) == (1, 1_000, 5_000)
        assert first["costs"] == [
            {
                "currency": "USD",
                "amount": f"0.{SONNET_NANOS:09d}",
                "nanos": SONNET_NANOS,
                "estimated": True,
                "estimatedNanos": SONNET_NANOS,
            }
        ]
        second = _line(days, "2025-11-29")  # reported costs in two currencies, and the deleted session's tokens
        assert second["turns"] == 3 and second["totalTokens"] == 30 + 10 + 55
        assert second["costs"] == [
            {"currency": "EUR", "amount": "0.040000000", "nanos": 40_000_000},
            {"currency": "USD", "amount": "0.001500000", "nanos": 1_500_000},
        ]
        assert (second["unpricedTokens"], second["unpricedModels"]) == (55, ["mystery-1"])
        total = msgspec.to_builtins(days.total)
        assert total["turns"] == 5 and total["totalTokens"] == sum(line.total_tokens for line in days.lines)
        assert [(c["currency"], c["nanos"], c.get("estimated", False)) for c in total["costs"]] == [
            ("EUR", 40_000_000, False),
            ("USD", 2 * SONNET_NANOS + 1_500_000, True),
        ]
        weeks = registry.usage(by="week", prices=SHIPPED)  # 2025-11-28 is a Friday: the 30th is in its week
        assert [(line.key, line.turns) for line in weeks.lines] == [("2025-11-24", 5)]
        months = registry.usage(by="month", prices=SHIPPED)
        assert [(line.key, line.turns) for line in months.lines] == [("2025-11", 5)]
        agents = registry.usage(by="agent", prices=SHIPPED)
        assert [(line.key, line.turns) for line in agents.lines] == [("claude-code", 2), ("codex", 1), ("gemini", 2)]
        cwds = registry.usage(by="cwd", prices=SHIPPED)
        assert [(line.key, line.total_tokens) for line in cwds.lines] == [("/work/app", 12_455), ("/work/api", 40)]
        models = registry.usage(by="model", prices=SHIPPED)
        assert [line.key for line in models.lines] == [
            "claude-sonnet-4-5-20250929",
            "mystery-1",
            "gemini-2.5-pro",
            "mistral-large",
        ]


def test_since_until_agent_and_cwd_narrow_the_totals(story: str) -> None:
    with SessionRegistry.open(story) as registry:
        one = registry.usage(since="2025-11-29", until=dt.date(2025, 11, 29), prices=SHIPPED)
        assert [line.key for line in one.lines] == ["2025-11-29"] and (one.since, one.until) == (
            "2025-11-29",
            "2025-11-29",
        )
        # a time stands for its UTC day
        assert registry.usage(since="2025-11-30T23:59:59Z", prices=SHIPPED).total.turns == 1
        assert registry.usage(until=T0, prices=SHIPPED).total.turns == 1
        assert registry.usage(agent="claude-code", by="month", prices=SHIPPED).total.turns == 2
        assert registry.usage(agent="codex-acp", prices=SHIPPED).agent == "codex"  # a name it goes by
        assert registry.usage(cwd="/work/api", by="agent", prices=SHIPPED).total.total_tokens == 40
        assert registry.usage(since="2030-01-01", prices=SHIPPED).lines == []
        for wrong, said in [
            ({"by": "year"}, "usage is totalled by day, week, month, agent, cwd, model"),
            ({"since": "2025-13-01"}, "since is not a day"),
            ({"until": "yesterday"}, "until is not a day"),
            ({"since": "2025-11-30", "until": "2025-11-28"}, "since .2025-11-30. is after until"),
            ({"cwd": "relative/dir"}, "absolute"),
        ]:
            with pytest.raises(InvalidParams, match=said):
                registry.usage(**wrong)  # type: ignore[arg-type]


def test_the_figures_are_the_same_from_tables_and_memory_and_verify_holds_them(story: str) -> None:
    with SessionRegistry.open(story) as tables, SessionRegistry.open(story, read_model="memory") as memory:
        assert tables.read_model.kind == "tables" and memory.read_model.kind == "memory"
        for by in ("day", "week", "month", "agent", "cwd", "model"):
            assert tables.usage(by=by, prices=SHIPPED) == memory.usage(by=by, prices=SHIPPED), by
        assert check_read_model(tables.backend, tables.read_model).mismatches == []


def test_many_hosts_add_up_in_one_report(postgres_schemas: Callable[[], str]) -> None:
    url = postgres_schemas()
    with SessionRegistry.open(url) as one, SessionRegistry.open(url) as other:
        _story(one, "host1-")
        _story(other, "host2-")
        for registry in (one, other):
            report = registry.usage(by="agent", prices=SHIPPED)
            assert [(line.key, line.turns) for line in report.lines] == [
                ("claude-code", 4),
                ("codex", 2),
                ("gemini", 4),
            ]
        assert check_read_model(one.backend, one.read_model).mismatches == []


def test_prices_find_models_as_agents_name_them() -> None:
    for named, found in [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-opus-4-1", "claude-opus-4-1"),
        ("claude-sonnet-4@20250514", "claude-sonnet-4"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("GPT-5-Codex", "gpt-5-codex"),
        ("gpt-5-codex-mini", "gpt-5-codex"),  # the longest name it starts with
        ("claude-opus-4-5", "claude-opus-4-5"),  # not Opus 4's price
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
    ]:
        assert (SHIPPED.find(named) or ("",))[0] == found, named
    for unknown in ("mystery-1", "", "gpt", "o3x", "<synthetic>"):
        assert SHIPPED.find(unknown) is None
        assert SHIPPED.estimate(unknown, 10, 10, 10, 10, 10) is None


def test_an_estimate_is_exact_arithmetic_rounded_once() -> None:
    table = PriceTable({"m": Price(1, 3, 0, 2)}, as_of="2026-12-01")  # billionths of a billionth per token
    assert table.estimate("m", 10**9, 0, 0, 0, 0) == 1
    assert table.estimate("m", 0, 1, 0, 0, 1) == 0  # 6e-18 rounds to nothing
    assert table.estimate("m", 499_999_999, 0, 0, 0, 0) == 0 and table.estimate("m", 500_000_000, 0, 0, 0, 0) == 1
    assert SHIPPED.estimate("gpt-5", 1_000_000, 1_000_000, 1_000_000, 0, 1_000_000) == 21_375_000_000  # 1.25+10+.125+10


def test_a_turns_usage_in_words() -> None:
    assert turn_usage_text(None) == ""
    assert turn_usage_text(SONNET, SHIPPED) == (
        "6,200 tokens (1,000 in, 200 out, 5,000 cache read), $0.0075 estimated, claude-sonnet-4-5-20250929"
    )
    assert turn_usage_text(EUROS, SHIPPED) == "10 tokens (7 out, 3 thought), 0.0400 EUR, mistral-large"
    assert turn_usage_text(UNKNOWN, SHIPPED) == "55 tokens (50 in, 5 out), mystery-1"


def test_the_turns_kept_in_the_log_carry_their_usage(tmp_path: Path) -> None:
    with SessionRegistry.open(f"sqlite://{tmp_path}/log.db") as registry:
        registry.create("/w", session_id="s", at=T0)
        registry.record_turn("s", messages=2, at=T0 + 1, usage=SONNET)
        (turn,) = [e for e in registry.activity("s") if isinstance(e, SessionUpdated)]
        assert turn.usage == SONNET
