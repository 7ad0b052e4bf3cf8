"""The ``acp-registry`` commands that take the log as a whole: ``verify`` (a corrupt record named by its position,
a read model that disagrees with the log, mended by ``rebuild``), ``export`` and ``import`` (a copy with the same
ids and positions, a second import harmless, a bad line or a refused one named).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from events import open_store
from events.codec import decode_record_json, encode_record_json
from registry import SessionRegistry
from tests.cli_runner import Cli, Populated, one_error_line

# -- verify ----------------------------------------------------------------------------------------------


def test_verify_reports_a_corrupt_record_with_its_position(run: Cli, copy: Path) -> None:
    healthy = run("verify", store=copy)
    assert (
        healthy.returncode == 0 and "healthy" in healthy.stdout and "agrees with the fold of the log" in healthy.stdout
    )
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE events SET data = x'c1ff00' WHERE position = 3")
    as_json, table, exported = run.all(("verify", "--json"), ("verify",), ("export",), store=copy)
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert not report["healthy"]
    assert [(p["position"], p["sessionId"]) for p in report["problems"]] == [(3, "s2")]
    assert "does not decode" in report["problems"][0]["problem"]
    assert table.returncode == 1 and "1 problem" in table.stdout and "does not decode" in table.stdout
    assert exported.returncode == 1 and "position 3" in exported.stderr  # a command that meets it stops
    assert len(exported.stdout.splitlines()) == 2  # with what came before it


def test_verify_reports_a_read_model_that_disagrees_with_the_log(run: Cli, copy: Path) -> None:
    with sqlite3.connect(copy) as db:  # a derived row changed behind the fold's back
        db.execute("DELETE FROM rm_sessions WHERE session_id = 's3'")
    result = run("verify", "--json", store=copy)
    assert result.returncode == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["sessionId"] == "s3" and "rm_sessions lacks the session's row" in problem["problem"]
    assert run("rebuild", store=copy).returncode == 0
    assert run("verify", store=copy).returncode == 0


# -- export and import -----------------------------------------------------------------------------------


def _essence(jsonl: str) -> list[tuple[object, ...]]:
    """What an import keeps of each record (``recorded_at`` is the time of the import)."""
    records = [decode_record_json(line) for line in jsonl.splitlines()]
    return [(r.position, r.session_id, r.version, r.event_id, r.event) for r in records]


def _exported(populated: Populated) -> list[str]:
    with open_store(populated.url) as store:
        return [encode_record_json(record).decode() for record in store.read()]


def test_export_then_import_copies_the_log_and_a_second_import_is_harmless(
    run: Cli, populated: Populated, tmp_path: Path
) -> None:
    exported, tail = run.all(("export",), ("export", "--from", str(populated.middle)), store=populated.path)
    assert exported.returncode == 0 and exported.stdout.splitlines() == _exported(populated)
    assert _essence(tail.stdout) == _essence(exported.stdout)[populated.middle :]
    dump = tmp_path / "log.jsonl"
    dump.write_text(exported.stdout)
    target = tmp_path / "target.db"
    first = run("import", str(dump), store=target)
    assert first.returncode == 0
    assert f"imported {populated.head} events (0 already present)" in first.stdout
    again = run("import", str(dump), "--json", store=target)
    piped = run("import", "-", "--json", store=target, stdin=tail.stdout)
    copied, listing, original = map(
        run.finish,
        [
            run.start("export", store=target),
            run.start("list", "--all", "--json", store=target),
            run.start("list", "--all", "--json", store=populated.path),
        ],
    )
    assert json.loads(again.stdout) == {"records": populated.head, "imported": 0, "alreadyPresent": populated.head}
    assert json.loads(piped.stdout)["alreadyPresent"] == populated.head - populated.middle
    assert _essence(copied.stdout) == _essence(exported.stdout)  # same ids, versions, order and positions
    assert listing.stdout == original.stdout  # and so the same session/list


def test_a_bad_line_imports_nothing_and_names_its_line(run: Cli, populated: Populated, tmp_path: Path) -> None:
    lines = _exported(populated)
    bad, unordered = tmp_path / "bad.jsonl", tmp_path / "unordered.jsonl"
    bad.write_text("\n".join([lines[0], lines[1], '{"position": "three"}', lines[2]]) + "\n")
    unordered.write_text("\n".join([lines[1], lines[0]]) + "\n")
    target = tmp_path / "target.db"
    not_a_record, out_of_order, missing = run.all(
        ("import", str(bad)), ("import", str(unordered)), ("import", str(tmp_path / "nowhere.jsonl")), store=target
    )
    error = one_error_line(not_a_record)
    assert f"{bad}:3: not a record of `acp-registry export`" in error and "nothing was imported" in error
    assert f"{unordered}:2: position 1 does not follow 2" in one_error_line(out_of_order)
    assert "nowhere.jsonl: No such file or directory" in one_error_line(missing)
    assert not target.exists()  # the file is checked before the store is opened


def test_an_import_the_store_refuses_keeps_what_came_before(run: Cli, populated: Populated, tmp_path: Path) -> None:
    lines = _exported(populated)
    dump = tmp_path / "log.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    target = tmp_path / "target.db"
    with SessionRegistry.open(f"sqlite://{target}") as registry:
        registry.create("/elsewhere", session_id="s3")  # another history for s3
    line = next(n for n, text in enumerate(lines, 1) if '"sessionId":"s3"' in text)
    error = one_error_line(run("import", str(dump), store=target))
    assert f"{dump}:{line}: the store refused session 's3' version 1" in error
    assert f"{line - 1} events before it were imported" in error
    before = [decode_record_json(text).session_id for text in lines[: line - 1]]
    with open_store(f"sqlite://{target}") as store:
        assert [r.session_id for r in store.read()] == ["s3", *before]
