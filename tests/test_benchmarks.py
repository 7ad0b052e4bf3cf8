"""The benchmark harness works at a tiny size: the generator, every baseline and one whole run, in seconds.

Only the smoke test lives here; the long runs are ``make bench`` and ``make bench-full``.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import uuid
from pathlib import Path

import msgspec
import pytest

# benchmarks/ is not an installed package (only events and registry are): import it from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import baselines, keys
from benchmarks.event_log import EventLogBench
from benchmarks.figures import Latency, Quantity, Throughput, interleave, latency
from benchmarks.generate import (
    CWD_COUNT,
    iter_histories,
    last_activity,
    rfc3339,
    working_directories,
    write_jsonl,
)
from benchmarks.machine import describe_machine
from benchmarks.output import write_results
from benchmarks.postgres_registry import PostgresSettings, measure, write_part
from benchmarks.report import POSTGRES_HEADING, Run, Stage, ratios, read_bounds
from benchmarks.run import Settings, run
from benchmarks.targets import POSTGRES_SPECS, SPECS
from events import SessionArchived, SessionCreated, SessionDeleted, SessionInfoChanged, SessionUpdated, TitleSource


def test_the_generator_is_deterministic_and_realistic() -> None:
    histories = list(iter_histories(2000, seed=3))
    assert histories == list(iter_histories(2000, seed=3))
    assert histories != list(iter_histories(2000, seed=4))

    ids = [sid for sid, _ in histories]
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(sid).version == 4 for sid in ids)
    events = [event for _, history in histories for event in history]
    assert 4.5 <= len(events) / len(histories) <= 5.5
    created = [history[0] for _, history in histories]
    assert all(isinstance(event, SessionCreated) for event in created)
    assert {event.cwd for event in created if isinstance(event, SessionCreated)} <= set(working_directories(3))
    assert len(working_directories(3)) == CWD_COUNT
    starts = [event.at for event in created if isinstance(event, SessionCreated)]
    assert starts == sorted(starts)
    assert (starts[-1] - starts[0]) / 1e9 / 86_400 > 700  # spread over ~2 years

    deleted = sum(isinstance(history[-1], SessionDeleted) for _, history in histories)
    assert 0.02 < deleted / len(histories) < 0.09
    titles = [e.title for e in events if isinstance(e, SessionInfoChanged) and isinstance(e.title, str)]
    assert titles
    assert all(20 <= len(title) <= 80 for title in titles)
    assert any(isinstance(e, SessionInfoChanged) and e.title is None for e in events)  # explicit clears
    assert any(isinstance(e, SessionInfoChanged) and isinstance(e.meta, dict) for e in events)
    assert any(isinstance(e, SessionInfoChanged) and e.title_source is TitleSource.USER for e in events)
    for _, history in histories:
        times = [e.at for e in history if isinstance(e, SessionCreated | SessionUpdated)]
        assert times == sorted(times) and len(set(times)) == len(times)
        live = [e for e in history if not isinstance(e, SessionDeleted | SessionArchived)]
        assert isinstance(live[-1], SessionUpdated)  # an agent's file ends on an activity line
    archived = [n for n, (_, history) in enumerate(histories) if any(isinstance(e, SessionArchived) for e in history)]
    assert archived == list(range(9, len(histories), 10))  # every tenth session, whatever the seed


def test_the_jsonl_listing_returns_the_newest_page_in_modification_order(tmp_path: Path) -> None:
    histories = iter_histories(400, seed=5)
    # Written in two steps from one iterator, as the harness grows the directory: nothing may be skipped.
    assert write_jsonl(tmp_path, histories, 120) == 120
    assert write_jsonl(tmp_path, histories, 180) == 180

    expected = [
        (sid, last_activity(events))
        for sid, events in itertools.islice(iter_histories(400, seed=5), 400)
        if not isinstance(events[-1], SessionDeleted)
    ][:300]
    assert sorted(p.stem for p in tmp_path.glob("*.jsonl")) == sorted(sid for sid, _ in expected)

    page = baselines.list_jsonl(tmp_path)
    newest = sorted(expected, key=lambda item: item[1], reverse=True)[: baselines.PAGE_SIZE]
    assert [info.session_id for info in page] == [sid for sid, _ in newest]
    assert [info.updated_at for info in page] == [rfc3339(at) for _, at in newest]
    assert all(info.cwd.startswith("/home/dev/") for info in page)
    answer = msgspec.json.decode(baselines.encode_page(page))
    assert len(answer["sessions"]) == baselines.PAGE_SIZE and answer["nextCursor"]

    listing = baselines.time_jsonl_listing(tmp_path, min_runs=2, max_runs=2)
    assert listing.n == 2 and 0 < listing.p50_us <= listing.p99_us


def test_the_limit_baselines_give_positive_figures(tmp_path: Path) -> None:
    histories = list(iter_histories(300))
    raw = baselines.raw_sqlite_baseline(tmp_path, histories, chunk=100)
    assert raw["insert"].count == sum(len(events) for _, events in histories)
    assert raw["insert"].per_s > 0 and raw["scan"].per_s > 0
    assert raw["scan"].count % raw["insert"].count == 0  # every repeat read every event

    assert baselines.disk_fsync(tmp_path, count=5).per_s > 0
    page = [info for sid, events in histories if (info := baselines.session_info(sid, events))][:50]
    floor = baselines.page_encode_latency(page, calls=50)
    assert floor.n == 50 and 0 < floor.p50_us <= floor.p99_us

    log = baselines.RawSqliteLog(tmp_path / "raw-durable.db")
    with log.durable_inserts() as insert, baselines.fsync_timer(tmp_path) as fsync:
        timers = {"raw": insert, "fsync": fsync}
        samples = interleave(timers, [(sid, SessionUpdated(at=1)) for sid, _ in histories[:5]])
    assert {name: len(times) for name, times in samples.items()} == {"raw": 5, "fsync": 5}
    assert log.scan() == 5
    log.close()


def test_our_event_log_measurements(tmp_path: Path) -> None:
    histories = list(iter_histories(60))
    with contextlib.closing(EventLogBench(tmp_path / "ours.db")) as bench:
        bench.load(histories[:40])
        assert bench.loaded.rate().per_s > 0
        with bench.durable_batches() as append_batch:
            assert all(append_batch(history) > 0 for history in histories[40:])
        with bench.durable_appends() as append:
            assert append((histories[0][0], SessionUpdated(at=10**19))) > 0
        assert bench.read_all() == sum(len(events) for _, events in histories) + 1


def test_the_eventsourcing_baseline(tmp_path: Path) -> None:
    # The dev extra installs eventsourcing: this runs under `make test` and fails loudly if it is missing.
    from benchmarks.eventsourcing_baseline import EventsourcingLog  # noqa: PLC0415  (imported where it is used)

    histories = list(iter_histories(60))
    with contextlib.closing(EventsourcingLog(tmp_path / "es.db")) as library:
        library.load(histories[:40])
        with library.saves() as save, library.commands() as command:
            assert all(save(history) > 0 for history in histories[40:])
            assert command((histories[0][0], SessionUpdated(at=10**19))) > 0
        total = sum(len(events) for _, events in histories) + 1
        assert library.read_notifications(batch=25) == total
        assert library.reconstruct([histories[0][0]]) == len(histories[0][1]) + 1


def test_a_whole_run_at_a_tiny_size(tmp_path: Path) -> None:
    settings = Settings(
        sizes=[150, 300],
        jsonl_sizes=[40, 200],
        durable_sessions=5,
        durable_events=5,
        reconstruct=20,
        subscription_events=3,
        rounds=2,  # both orders of the writer figure's alternating rounds; 5 processes per figure add nothing here
        chunk=50,
        plot=False,
        postgres=PostgresSettings(sizes=[100], url="postgresql://postgres@127.0.0.1:1/test?connect_timeout=2"),
    )
    work = tmp_path / "work"
    work.mkdir()
    result = run("tiny", settings, work)
    assert [stage.sessions for stage in result.stages] == [150, 300]
    assert result.stages[-1].events > result.stages[0].events > 150
    for stage in result.stages:
        assert isinstance(read := stage.figures[keys.OURS_READ], Throughput) and read.per_s > 0
        assert isinstance(scan := stage.figures[keys.RAW_SCAN], Throughput) and scan.per_s > 0
        for key in (keys.OURS_SCAN, keys.OURS_IMPORT, keys.OURS_THREADS_1, keys.OURS_THREADS_8):
            assert isinstance(figure := stage.figures[key], Throughput) and figure.per_s > 0, key
        assert isinstance(single := stage.figures[keys.rate_key("ours.single_durable")], Throughput)
        assert single.count == 5
        assert stage.pending == []
        assert isinstance(first := stage.figures["registry.list_first"], Latency) and first.p50_us > 0
        assert isinstance(rss := stage.figures["registry.serve_rss"], Quantity) and rss.value > 0
        assert isinstance(stage.figures["registry.serve_first_snapshot"], Latency)
        assert isinstance(stage.figures["registry.replay_half"], Latency)
        for key in (*keys.STDIO_PAGE.values(), *keys.RAW_STDIO.values()):  # a warm serve beside the raw server
            assert isinstance(figure := stage.figures[key], Latency) and figure.n == 500, key
    assert [point.files for point in result.jsonl] == [40, 200]
    assert any(row.ratio is not None for row in result.ratios)

    paths = write_results(result, tmp_path / "results", plot=True)  # matplotlib is in the dev extra
    assert msgspec.json.decode(paths[0].read_bytes(), type=Run).stages[0].sessions == 150
    table = paths[1].read_text(encoding="utf-8")
    assert "## Ratios against baselines" in table and "session/list first page" in table
    assert paths[2].read_bytes().startswith(b"\x89PNG")
    for subscribers in ("1 subscriber", "10 subscribers"):  # the README promises both
        assert f"| registry: change stream, {subscribers}" in table
    assert "registry.serve_rss" not in table  # figures and their notes by name, not by internal key
    assert "150 sessions: " in table and "300 sessions: " in table  # a note that differs by size says which
    unmet = {row.measure for row in result.ratios if row.met is False}
    if unmet:
        assert "## Unmet targets and what bounds them" in table
    assert "not explained yet" not in table  # every target the run missed has its bound in bounds.toml
    # No server at the PostgreSQL part's URL: the run still ends, and its report says the part skipped, and why.
    assert result.postgres is not None and result.postgres.stages == []
    section = table.split(f"\n{POSTGRES_HEADING}\n", 1)[1]
    assert section.strip().startswith("Skipped: this benchmark needs PostgreSQL and none answers at postgresql://")


def test_the_postgresql_part_at_a_tiny_size(postgres_server: str, tmp_path: Path) -> None:
    settings = PostgresSettings(
        sizes=[300, 150],
        url=postgres_server,
        samples=5,
        writers=(1, 2),
        writer_seconds=0.3,
        notifications=3,
        load=1,
        serve_runs=1,
        chunk=100,
    )
    part = measure(settings)
    assert part.skipped == "" and part.server
    assert [stage.sessions for stage in part.stages] == [150, 300]  # grown in order, whatever order was asked
    small, large = part.stages
    assert large.events > small.events > 150 and large.live_sessions <= 300
    for stage in part.stages:
        writes = (keys.PG_APPEND, keys.PG_CREATE, keys.PG_RECORD, keys.PG_RAW_INSERT)
        pages = [keys.PG_LIST["first"], keys.PG_LIST["deep"], keys.PG_LIST["first_cwd"], keys.PG_RAW_LIST["deep"]]
        for key in (*writes, *pages):
            assert isinstance(figure := stage.figures[key], Latency) and figure.n == 5, key
        assert keys.PG_LIST["deep_cwd"] not in stage.figures  # no cwd has a second page yet: no deep page to time
        for key in writes:
            assert isinstance(rate := stage.figures[keys.rate_key(key)], Throughput) and rate.count == 5, key
        assert isinstance(rate := stage.figures[keys.PG_IMPORT], Throughput) and rate.per_s > 0
        assert isinstance(rss := stage.figures[keys.PG_SERVE_RSS], Quantity) and rss.value > 10e6
        sizes = [stage.figures[key] for key in (keys.PG_LOG_BYTES, keys.PG_READ_MODEL_BYTES, keys.PG_RAW_BYTES)]
        assert all(isinstance(size, Quantity) and size.value > 8192 for size in sizes)
    # The write figures' 20 + 5 sessions count towards the next size: it imports that many fewer.
    imported = [
        figure.count for stage in part.stages if isinstance(figure := stage.figures[keys.PG_IMPORT], Throughput)
    ]
    assert imported == [150, 125]
    # Writer processes and the notification at the largest size only; each count's ops beside as many raw ones.
    assert keys.PG_NOTIFY not in small.figures and keys.rate_key(keys.PG_WRITERS.format(count=2)) not in small.figures
    for count in (1, 2):
        for key in (keys.PG_WRITERS, keys.PG_STORE_WRITERS, keys.PG_RAW_WRITERS):
            assert isinstance(ops := large.figures[keys.rate_key(key.format(count=count))], Throughput)
            assert ops.count > 0 and ops.seconds == 0.3
    # Pages from a warm serve beside the raw stdio server's, at every size, taking turns.
    for stage in part.stages:
        for page in keys.STDIO_PAGES:
            for key in (keys.PG_STDIO[page], keys.PG_RAW_STDIO[page]):
                timed = stage.figures[key]
                assert isinstance(timed, Latency) and timed.n == 500, key
    assert isinstance(notified := large.figures[keys.PG_NOTIFY], Latency) and notified.n == 3
    assert isinstance(raw_notified := large.figures[keys.PG_RAW_NOTIFY], Latency) and raw_notified.n == 3
    # Every ratio row is a PostgreSQL spec's; each write divides ours by the raw INSERT + COMMIT of the same stage.
    assert {row.measure for row in part.ratios} <= {spec.measure for spec in POSTGRES_SPECS}
    create = [row for row in part.ratios if row.measure.startswith("postgres: SessionRegistry.create ÷")]
    assert [(row.sessions, row.target) for row in create] == [(150, "≥ 0.5x"), (300, "≥ 0.5x")]
    ours, raw = (large.figures[keys.rate_key(key)] for key in (keys.PG_CREATE, keys.PG_RAW_INSERT))
    assert isinstance(ours, Throughput) and isinstance(raw, Throughput)
    assert create[1].ratio == pytest.approx(ours.per_s / raw.per_s) and create[1].met == (ours.per_s >= raw.per_s / 2)
    scaling = [row for row in part.ratios if row.measure == "postgres: 2 writer processes ÷ 1 (ops/s)"]
    assert [row.sessions for row in scaling] == [300]  # measured once: one row

    # Alone it is a page of its own; put into another run's results, it replaces that page's PostgreSQL section
    # and leaves the rest as it was.
    out = tmp_path / "results"
    out.mkdir()
    before = "# Benchmarks: earlier\n\nthe SQLite part, as published\n"
    (out / "earlier.md").write_text(before + f"\n{POSTGRES_HEADING}\n\nSkipped: no server then.\n")
    earlier = Run(name="earlier", seed=7, machine=describe_machine(), settings={}, stages=[], jsonl=[])
    (out / "earlier.json").write_bytes(msgspec.json.encode(earlier))
    paths = write_part(part, out, "pg", into="earlier")
    assert [path.name for path in paths] == ["pg.json", "pg.md", "earlier.json", "earlier.md"]
    page = (out / "pg.md").read_text()
    assert "| pg append | postgres: SessionRegistry.record_activity ÷ raw INSERT + COMMIT | 300 |" in page
    assert "| postgres: 2 writer processes, backends waiting for a lock (mean) | — |" in page
    merged = (out / "earlier.md").read_text()
    assert merged.startswith(before + "\n" + POSTGRES_HEADING + "\n") and "no server then" not in merged
    assert "Measured on its own (`python -m benchmarks.postgres_registry --into earlier`)" in merged
    assert merged.split(POSTGRES_HEADING)[1].count("| pg append |") == page.split(POSTGRES_HEADING)[1].count(
        "| pg append |"
    )
    again = msgspec.json.decode((out / "earlier.json").read_bytes(), type=Run)
    assert again.postgres is not None and [stage.sessions for stage in again.postgres.stages] == [150, 300]


def test_every_bound_names_a_measure_the_report_has() -> None:
    bounds = read_bounds()
    stages = [Stage(sessions=1, live_sessions=1, events=1)]
    measures = {row.measure for specs in (SPECS, POSTGRES_SPECS) for row in ratios(stages, specs)}
    assert bounds and set(bounds) <= measures, set(bounds) - measures
    assert all(len(text) > 40 for text in bounds.values())


def test_latencies_use_nearest_rank_percentiles_and_extrapolation_is_marked() -> None:
    figure = latency([n / 1e6 for n in range(100, 0, -1)])  # 1..100 µs, out of order
    assert figure.n == 100
    assert figure.p50_us == pytest.approx(50.5)
    assert figure.p99_us == pytest.approx(99.0)
    scaled = baselines.extrapolate(figure, measured_files=1000, files=10_000)
    assert scaled.extrapolated and scaled.n == 0 and scaled.p50_us == pytest.approx(505.0)


def test_a_benchmark_that_needs_postgresql_says_so_and_skips_where_none_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks.args import postgres_or_skip  # noqa: PLC0415

    assert postgres_or_skip("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2") is None
    assert "skipped: this benchmark needs PostgreSQL and none answers at" in capsys.readouterr().out


def test_the_lock_ceiling_measures_every_way_of_appending(postgres_server: str) -> None:
    from benchmarks.postgres_lock_ceiling import WAYS, measure  # noqa: PLC0415

    figures = measure(postgres_server, [1, 2], rounds=1, seconds=0.2)
    assert list(figures) == list(WAYS)
    for by_count in figures.values():
        assert sorted(by_count) == [1, 2]
        assert by_count[1]["vs_one"] == 1.0
        assert all(f["ops_per_s"] > 0 and f["cpu_us_per_op"] > 0 for f in by_count.values())


def test_the_usage_benchmark_twins_differ_by_usage_alone_and_its_store_totals_them(tmp_path: Path) -> None:
    from benchmarks.usage import build, with_agents  # noqa: PLC0415
    from registry import SessionRegistry  # noqa: PLC0415

    with_usage = list(with_agents(iter_histories(200, seed=5), 5, usage=True))
    without = list(with_agents(iter_histories(200, seed=5), 5, usage=False))
    stripped = [
        (sid, [msgspec.structs.replace(e, usage=None) if isinstance(e, SessionUpdated) else e for e in events])
        for sid, events in with_usage
    ]
    assert stripped == without
    turns = [e.usage for _, events in with_usage for e in events if isinstance(e, SessionUpdated)]
    assert all(usage is not None for usage in turns)
    live_turns = sum(
        isinstance(e, SessionUpdated) for _, events in with_usage for e in events
    )  # a turn after a deletion would not count: the generator deletes last
    path = build(tmp_path / "usage.db", 200, usage=True, seed=5)
    with SessionRegistry.open(f"sqlite://{path}") as registry:
        report = registry.usage(by="agent")
    assert report.total.turns == live_turns
    assert report.total.input_tokens == sum(usage.input_tokens for usage in turns if usage is not None)
    assert {line.key for line in report.lines} == {"claude-code", "codex", "gemini", "opencode"}
