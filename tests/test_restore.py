"""A session a proxy retired because its agent had not kept it is restored - the same record, with everything it
held - when the agent turns out to have it (``SessionRegistry.restore``: a ``SessionCreated`` on its stream); a
user's deletion never is. Held in every read model (the in-memory fold and the tables of SQLite and PostgreSQL),
in the change stream, in ``verify`` and in ``history``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from events.model import TitleSource
from registry import SessionDeletedError, SessionNotFound
from registry.agents import META_RETIRED
from registry.service import SessionRegistry
from tests.cli_runner import Cli

SID = "scripted-agent:s-1"


def _retired(registry: SessionRegistry, why: str = "unkept") -> None:
    registry.create("/work/app", session_id=SID, agent="scripted-agent", meta={"kept": "mine"})
    registry.set_title(SID, "Named by the user")
    registry.archive(SID)
    registry.record_activity(SID, messages=2)
    registry.change_info(SID, meta={"kept": "mine", META_RETIRED: why})
    registry.delete(SID, reason=f"retired by the proxy: {why}")


def _check_restored(registry: SessionRegistry) -> None:
    info = registry.restore(SID)
    assert info.session_id == SID and info.title == "Named by the user"
    state = registry.state(SID)
    assert state is not None and not state.deleted
    assert (state.title_source, state.archived, state.messages) == (TitleSource.USER, True, 2)
    assert state.meta == {"kept": "mine"}
    assert [s.session_id for s in registry.list(archived="only").sessions] == [SID]
    assert registry.restore(SID).session_id == SID  # live already: nothing to do


def test_a_retired_session_is_restored_as_the_same_record_in_memory() -> None:
    with SessionRegistry.open("memory://") as registry:
        _retired(registry)
        assert registry.list(archived="include").sessions == []
        _check_restored(registry)


def test_a_retired_session_is_restored_in_the_tables_and_verify_agrees(store_urls: Callable[[], str], run: Cli) -> None:
    url = store_urls()
    with SessionRegistry.open(url) as registry:
        _retired(registry)
        _check_restored(registry)
    with SessionRegistry.open(url, read_model="memory") as folded:
        state = folded.state(SID)
        assert state is not None and not state.deleted and state.title == "Named by the user"
    verified = run("verify", store=url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    history = run("history", SID, store=url)
    assert "restored: its agent has it after all" in history.stdout


@pytest.mark.parametrize("why", [None, "superseded", "moved"])
def test_a_users_deletion_and_other_retirements_are_never_undone(why: str | None) -> None:
    with SessionRegistry.open("memory://") as registry:
        if why is None:
            registry.create("/work/app", session_id=SID)
            registry.delete(SID)
        else:
            _retired(registry, why)
        with pytest.raises(SessionDeletedError):
            registry.restore(SID)
        state = registry.state(SID)
        assert state is not None and state.deleted
        with pytest.raises(SessionNotFound):
            registry.restore("scripted-agent:never")


def test_the_change_stream_shows_a_restored_session_as_added(tmp_path: Path) -> None:
    with SessionRegistry.open(f"sqlite://{tmp_path}/s.db", follow=False) as registry:
        _retired(registry)
        changes: list[object] = []
        following = registry.follow(changes.extend)
        registry.restore(SID)
        registry.sync()
        following.stop()
        (change,) = changes
        assert change.before is not None and change.before.deleted  # type: ignore[attr-defined]
        assert not change.after.deleted  # type: ignore[attr-defined]
