"""``acp-registry usage`` and the usage ``show``, ``history``, ``replay`` and ``verify`` see, run as a user runs them:
totals as a table (bars on a terminal), exact JSON, estimates marked and explained, a price file of the user's, one
error line for bad input."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from pathlib import Path

import pytest

from events.model import Usage
from registry import SessionRegistry
from registry.usage import DAY_NS
from tests.cli_runner import Cli, one_error_line

DAY = 20_420  # 2025-11-28, a Friday
T0 = DAY * DAY_NS + 9 * 3_600_000_000_000
SONNET = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_read_tokens=2_000_000, model="claude-sonnet-4-5")
GEMINI = Usage(input_tokens=500, output_tokens=50, cost_nanos=250_000_000, currency="USD", model="gemini-2.5-pro")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two agents' sessions over two days: Claude Code's costs estimated, Gemini's reported; one turn of a model
    without a price."""
    path = tmp_path_factory.mktemp("usage") / "log.db"
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        registry.create("/work/app", session_id="claude-code:one", at=T0)
        registry.record_turn("claude-code:one", messages=2, at=T0 + 1, usage=SONNET)
        registry.record_turn("claude-code:one", messages=2, at=T0 + DAY_NS, usage=SONNET)
        registry.create("/work/api", session_id="gemini:two", at=T0)
        registry.record_turn("gemini:two", messages=2, at=T0 + 2, usage=GEMINI)
        registry.record_turn("gemini:two", messages=2, at=T0 + 3, usage=Usage(input_tokens=7, model="x-1"))
    return path


def test_usage_by_day_is_a_table_with_the_total_and_what_the_estimates_came_from(run: Cli, store: Path) -> None:
    result = run("usage", store=store, env={"COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "usage by day: 2 days, all days (UTC), every agent and cwd"
    (first,) = [line for line in lines if "2025-11-28" in line]
    # $3 + $1.50 + $0.60 estimated for Claude, $0.25 reported by Gemini: one USD amount, marked as partly estimated
    assert [cell.strip() for cell in first.strip("│").split("│")] == [
        "2025-11-28",
        "3",
        "1.00M",
        "100k",
        "2.00M",
        "3.10M",
        "$5.35 est.",
    ]
    (total,) = [line for line in lines if line.startswith("│ total")]
    assert "$10.45 est." in total and "6.20M" in total
    assert "est.: estimated with the prices of the shipped table as of 2025-11-24; the rest as the agents" in (
        result.stdout.replace("\n", " ")
    )
    assert "7 tokens have no cost (no price for x-1)." in result.stdout
    assert "█" not in result.stdout  # bars are for a terminal


def test_a_terminal_gets_a_bar_per_row(run: Cli, store: Path) -> None:
    result = run("usage", "--by", "agent", store=store, env={"COLUMNS": "150", "TTY_COMPATIBLE": "1"})
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.startswith("│")}
    assert set(rows) == {"claude-code", "gemini", "total"}
    assert "cost (USD)" in result.stdout
    bars = {name: row.split("│")[-2].strip() for name, row in rows.items()}
    assert bars == {"claude-code": "█" * 24, "gemini": "▋", "total": ""}  # $10.20, and $0.25: five eighths of a cell


def test_usage_json_is_exact(run: Cli, store: Path) -> None:
    result = run("usage", "--by", "week", "--json", store=store)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["by"], [line["key"] for line in report["lines"]]) == ("week", ["2025-11-24"])
    (week,) = report["lines"]
    assert week["turns"] == 4 and week["inputTokens"] == 2_000_507
    assert week["costs"] == [
        {
            "currency": "USD",
            "amount": "10.450000000",
            "nanos": 10_450_000_000,
            "estimated": True,
            "estimatedNanos": 10_200_000_000,
        }
    ]
    assert (week["unpricedTokens"], week["unpricedModels"]) == (7, ["x-1"])
    assert report["total"]["costs"] == week["costs"]
    assert report["prices"] == {"asOf": "2025-11-24", "currency": "USD", "source": "the shipped table"}


def test_narrowed_by_day_agent_and_cwd(run: Cli, store: Path) -> None:
    def turns(*args: str) -> int:
        result = run("usage", "--json", *args, store=store)
        assert result.returncode == 0, result.stderr
        return int(json.loads(result.stdout)["total"]["turns"])

    assert turns("--since", "2025-11-29") == 1
    assert turns("--until", "2025-11-28T23:59:59Z") == 3
    assert turns("--agent", "gemini-cli") == 2  # a name the agent goes by
    assert turns("--cwd", "/work/app", "--by", "model") == 2
    empty = run("usage", "--since", "2030-01-01", store=store)
    assert empty.returncode == 0 and "no usage recorded" in empty.stdout


def test_a_price_file_of_the_users_changes_the_estimates_and_says_so(run: Cli, store: Path, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('as_of = "2026-12-01"\n[models."claude-sonnet-4-5"]\ninput = 1.0\noutput = 2.0\n')
    by_option = run("usage", "--json", "--prices", str(prices), store=store)
    by_env = run("usage", "--json", store=store, env={"ACP_REGISTRY_PRICES": str(prices)})
    config = tmp_path / "config" / "acp-registry"
    config.mkdir(parents=True)
    (config / "prices.toml").write_text(prices.read_text())
    by_default = run("usage", "--json", store=store, env={"XDG_CONFIG_HOME": str(tmp_path / "config")})
    for result, source in [(by_option, str(prices)), (by_env, str(prices)), (by_default, str(config / "prices.toml"))]:
        report = json.loads(result.stdout)
        # 2M input at $1, 200k output at $2, 4M cache reads at the input price (none given): $6.40, and Gemini's $0.25
        assert report["total"]["costs"][0]["nanos"] == 6_650_000_000, source
        assert report["prices"] == {"asOf": "2026-12-01", "currency": "USD", "source": source}
    table = run("usage", "--prices", str(prices), store=store, env={"COLUMNS": "200"})
    assert f"est.: estimated with the prices of {prices} as of 2026-12-01" in table.stdout


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("models = 3", "as_of must say when the prices were read"),
        ('as_of = "x"\n[models.m]\ninput = 1', "models.m needs an output price"),
        ('as_of = "x"\n[models.m]\ninput = -1\noutput = 1', "models.m.input must be a number >= 0"),
        ('as_of = "x"\n[models.m]\ninput = "cheap"\noutput = 1', "models.m.input must be a number"),
        ('as_of = "x"\ncurrency = "EUR"', "cannot be mixed with the shipped USD ones"),
        ('as_of = "x"\nextra = 1', "unknown key 'extra'"),
        ("as_of = ", "is not TOML"),
    ],
)
def test_a_price_file_that_cannot_be_used_is_one_error_line(
    run: Cli, store: Path, tmp_path: Path, text: str, said: str
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(text)
    assert said in one_error_line(run("usage", "--prices", str(prices), store=store))


def test_bad_input_is_one_error_line(run: Cli, store: Path, tmp_path: Path) -> None:
    assert "since is not a day (YYYY-MM-DD) or an RFC 3339 time" in one_error_line(
        run("usage", "--since", "last week", store=store)
    )
    assert "is after until" in one_error_line(
        run("usage", "--since", "2025-12-01", "--until", "2025-11-01", store=store)
    )
    assert "invalid choice: 'year'" in one_error_line(run("usage", "--by", "year", store=store))
    assert "No such file or directory" in one_error_line(
        run("usage", "--prices", str(tmp_path / "missing.toml"), store=store)
    )


def test_show_and_history_show_usage_per_turn(run: Cli, store: Path) -> None:
    shown = run("show", "claude-code:one", store=store, env={"COLUMNS": "160"})
    assert shown.returncode == 0, shown.stderr
    assert "6,200,000 tokens (2,000,000 in, 200,000 out, 4,000,000 cache read), $10.20 estimated, 2 turns" in (
        shown.stdout
    )
    assert "usage by turn (2)" in shown.stdout
    turn = "3,100,000 tokens (1,000,000 in, 100,000 out, 2,000,000 cache read), $5.10 estimated, claude-sonnet-4-5"
    assert [line for line in shown.stdout.splitlines() if turn in line] == [
        f"  #2  2025-11-28 09:00:00  {turn}",
        f"  #3  2025-11-29 09:00:00  {turn}",
    ]
    drawn = run("show", "claude-code:one", store=store, env={"COLUMNS": "160", "TTY_COMPATIBLE": "1"})  # by rich
    assert re.sub("\x1b\\[[0-9;]*m", "", drawn.stdout) == shown.stdout  # piped: the same characters, without rich
    history = run("history", "gemini:two", store=store, env={"COLUMNS": "100"})  # the block layout: no cell to wrap
    assert "used 550 tokens (500 in, 50 out), $0.25, gemini-2.5-pro" in " ".join(history.stdout.split())


def test_replay_shows_what_a_session_had_used_then(run: Cli, store: Path) -> None:
    then = json.loads(run("replay", "--at", "2", "--json", store=store).stdout)
    (session,) = then["pages"][0]["sessions"]
    assert session["_meta"]["acp-session-registry/usage"] == {
        "inputTokens": 1_000_000,
        "outputTokens": 100_000,
        "cachedReadTokens": 2_000_000,
        "costs": [{"amount": 5.1, "currency": "USD", "estimated": True}],
    }


def test_verify_finds_an_edited_total_and_rebuild_mends_it(run: Cli, tmp_path: Path, store: Path) -> None:
    copy = tmp_path / "copy.db"
    with sqlite3.connect(store) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    (tmp_path / "copy.db.seal-key").write_bytes(Path(f"{store}.seal-key").read_bytes())
    with contextlib.closing(sqlite3.connect(copy)) as db, db:
        db.execute("UPDATE rm_usage SET input_tokens = input_tokens + 1 WHERE model = 'gemini-2.5-pro'")
    found = run("verify", store=copy)
    assert found.returncode == 1
    said = " ".join(found.stdout.replace("│", " ").split())
    assert "rm_usage row (cwd /work/api, model gemini-2.5-pro, currency USD, agent gemini, day 2025-11-28):" in said
    assert "input_tokens is 501, the log says 500" in said
    assert "rm_usage_days" not in said  # the other table holds what the log says
    assert run("rebuild", store=copy).returncode == 0
    assert run("verify", store=copy).returncode == 0


def test_the_price_file_in_the_docs_is_one_the_command_reads(run: Cli, store: Path, tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```toml\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    prices = tmp_path / "prices.toml"
    prices.write_text(block)
    result = run("usage", "--json", "--prices", str(prices), store=store)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["prices"] == {"asOf": "2026-12-01", "currency": "USD", "source": str(prices)}
    assert report["total"]["costs"][0]["estimatedNanos"] == 10_200_000_000  # the shipped prices, as written there


def test_a_long_report_is_drawn_as_the_general_table_draws_it() -> None:
    """Hundreds of days are drawn without the general table's cell-by-cell layout, in the very same characters."""
    from registry.cli.grid import Column, grid_lines  # noqa: PLC0415
    from registry.cli.usage import _table  # noqa: PLC0415

    columns = [Column("day (UTC)", ratio=1), Column("turns", right=True), Column("cost", right=True), Column("bar")]
    rows = [
        [f"2025-11-{day:02d}", f"{day * 7:,}", f"${day / 3:.2f} est.", "█" * (day % 5) + "▍"] for day in range(1, 29)
    ]
    rows.append(["total", "2,842", "$135.33 est.", ""])
    for width in (120, 30):  # drawn here, and folded by the general table
        expected = list(grid_lines(columns, rows, width, sections=frozenset({len(rows) - 2})))
        assert list(_table(columns, rows, width)) == expected
