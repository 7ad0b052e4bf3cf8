"""The search benchmark works at a tiny size: its corpus is seeded and shaped as the recordings it was measured from,
and one whole run gives every figure (``make bench`` runs it at 100k sessions)."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpus import QUERIES, ROLE_SIZES, SESSION_MESSAGES, SESSION_SCALE, iter_corpus, measure_fixtures
from benchmarks.search import SearchSettings, measure, write
from events.model import Role


def test_the_corpus_is_the_recordings_distribution_as_measured() -> None:
    sizes, lengths = measure_fixtures()
    assert {role: tuple(values) for role, values in sizes.items()} == ROLE_SIZES
    assert tuple(lengths) == SESSION_MESSAGES


def test_the_corpus_is_seeded_and_shaped_as_the_recordings() -> None:
    first = list(iter_corpus(300, seed=5))
    assert first == list(iter_corpus(300, seed=5))
    assert first != list(iter_corpus(300, seed=6))
    roles: Counter[Role] = Counter()
    for conversation in first:
        messages = [m for turn in conversation.turns for m in turn]
        assert len(messages) in {math.ceil(n * SESSION_SCALE) for n in SESSION_MESSAGES}
        assert messages[0].role is Role.USER and all(turn[0].role is Role.USER for turn in conversation.turns)
        times = [m.at or 0 for m in messages]
        assert times == sorted(times) and all(times)
        for m in messages:
            roles[m.role] += 1
            sizes = ROLE_SIZES[m.role]
            assert 1 <= len(m.text.encode()) <= max(sizes) + max(sizes) // 4, (m.role, m.text)
    total = sum(roles.values())
    measured = sum(len(v) for v in ROLE_SIZES.values())
    for role, values in ROLE_SIZES.items():  # a session's first message is the user's: a little more of those
        assert abs(roles[role] / total - len(values) / measured) < 0.06, (role, roles)
    text = " ".join(m.text for c in first for turn in c.turns for m in turn)
    for kind in ("common word", "prefix", "CamelCase part"):
        assert QUERIES[kind].rstrip("*").lower() in text.lower(), kind


@pytest.mark.slow
def test_a_whole_search_run_at_a_tiny_size(tmp_path: Path) -> None:
    settings = SearchSettings(sessions=300, twin_sessions=60, rounds=2, cli_rounds=1, rg_rounds=1, turns=20)
    result = measure(settings, tmp_path)
    assert result["corpus"]["sessions"] == 300
    assert result["indexing"]["index_messages"] == result["corpus"]["messages"]
    assert result["indexing"]["index_peak_rss_bytes"] > 0
    assert set(result["search"]["per_query"]) == set(QUERIES)
    assert result["search"]["warm"]["ours"]["n"] == 2 * len(QUERIES)
    assert result["bytes"]["stored_vs_text"] > 0
    assert set(result["twins"]) >= {"list_page", "rebuild", "replay_at", "recorded_turn", "change_stream"}
    json_path, md_path = write(result, tmp_path / "out" / "tiny-search")
    assert json_path.exists()
    assert "| search, warm, p50 / p99 |" in md_path.read_text()
