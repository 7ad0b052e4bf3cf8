"""The search benchmark's "nothing else gets slower": twin stores of the same sessions, one keeping their messages
and one not, side by side (``benchmarks.search`` builds them and runs this)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.figures import interleave
from benchmarks.search_children import cli, quantiles, run_child, store_url
from events import SqliteStore
from events.content import content_ref
from events.model import Message, Role, SessionUpdated
from events.store import AppendRequest

__all__ = ["twin_figures"]


def twin_figures(with_content: Path, without: Path, sessions: int, rounds: int, turns: int) -> dict[str, Any]:
    """The twins side by side: the first list page in process, ``rebuild`` and ``replay --at`` as processes, and
    a durable recorded turn, with content / without, taking turns."""
    from registry import SessionRegistry  # noqa: PLC0415

    figures: dict[str, Any] = {}
    stores = {"content": with_content, "plain": without}
    registries = {name: SessionRegistry(SqliteStore(str(path)), follow=False) for name, path in stores.items()}
    try:
        for registry in registries.values():
            registry.list()

        def page(name: str) -> Callable[[int], float]:
            def run(_: int) -> float:
                started = time.perf_counter()
                registries[name].list()
                return time.perf_counter() - started

            return run

        samples = interleave({name: page(name) for name in stores}, range(rounds * 10))
        figures["list_page"] = _pair(samples)
    finally:
        for registry in registries.values():
            registry.close()
    with SqliteStore(str(without)) as store:
        middle = store.head() // 2
    for figure, argv in {
        "rebuild": ["rebuild"],
        "replay_at": ["replay", "--at", str(middle), "--json"],
    }.items():
        timers = {
            name: (lambda _, path=path, argv=argv: run_child([*cli(), *argv, "--store", store_url(path)]))
            for name, path in stores.items()
        }
        figures[figure] = _pair(interleave(timers, range(max(3, rounds // 6))))
    figures["recorded_turn"] = _turns(stores, turns)
    figures["change_stream"] = _stream(stores, changes=2_000, rounds=max(3, rounds // 2))
    return figures


def _stream(stores: dict[str, Path], changes: int, rounds: int) -> dict[str, Any]:
    """The change stream to one subscriber (``benchmarks.change_stream``'s path: the turns in the log and the read
    model already, timed from ``sync()`` until the subscriber has every change) - turns keeping a prompt and an
    answer on one twin, the same turns without them on the other - seconds per change, rounds taking turns."""
    from registry import SessionRegistry  # noqa: PLC0415

    said = [Message(role=Role.USER, text="why does the parser time out"), Message(role=Role.AGENT, text="a lock")]
    ref = content_ref(said)
    samples: dict[str, list[float]] = {name: [] for name in stores}
    opened = {name: SqliteStore(str(path), synchronous="off") for name, path in stores.items()}
    registries = {name: SessionRegistry(store, follow=False) for name, store in opened.items()}
    try:
        done = {name: threading.Event() for name in stores}
        seen = dict.fromkeys(stores, 0)
        target = dict.fromkeys(stores, 0)
        for name, registry in registries.items():
            registry.sync()

            def count(_item: object, name: str = name) -> None:
                seen[name] += 1
                if seen[name] >= target[name]:
                    done[name].set()

            registry.list_changes().subscribe(count)
        ids = {name: [s.session_id for s in r.list().sessions] for name, r in registries.items()}
        for n in range(rounds):
            for name in list(stores) if n % 2 == 0 else list(reversed(stores)):
                content = name == "content"
                at = 2_000_000_000_000_000_000 + n * changes
                opened[name].append_batch(
                    [
                        AppendRequest(
                            ids[name][k % len(ids[name])],
                            [SessionUpdated(at=at + k, messages=2, content=ref if content else None)],
                            content=[said] if content else None,
                        )
                        for k in range(changes)
                    ]
                )
                registries[name].read_model.catch_up()
                done[name].clear()
                target[name] = seen[name] + changes
                started = time.perf_counter()
                registries[name].sync()
                if not done[name].wait(300):
                    raise RuntimeError("the change stream did not deliver every change within 300 s")
                samples[name].append((time.perf_counter() - started) / changes)
    finally:
        for registry in registries.values():
            registry.close()
        for store in opened.values():
            store.close()
    return _pair(samples)


def _turns(stores: dict[str, Path], turns: int) -> dict[str, Any]:
    """A durable ``record_turn`` of a user's prompt and the agent's answer (the corpus's sizes), with the
    conversation kept / not, in blocks of 10 taking turns, on scratch copies of the twins."""
    from registry import SessionRegistry  # noqa: PLC0415

    said = [
        Message(role=Role.USER, text="make the parse_config timeout configurable"),
        Message(role=Role.AGENT, text="Done: src/config.py reads CONFIG_TIMEOUT, tests pass"),
    ]
    registries = {name: SessionRegistry(SqliteStore(str(path)), follow=False) for name, path in stores.items()}
    samples: dict[str, list[float]] = {name: [] for name in stores}
    try:
        ids = {name: r.list().sessions[0].session_id for name, r in registries.items()}
        for block in range(turns // 10):
            order = list(stores) if block % 2 == 0 else list(reversed(stores))
            for name in order:
                registry = registries[name]
                conversation = said if name == "content" else ()
                for _ in range(10):
                    started = time.perf_counter()
                    registry.record_turn(ids[name], messages=2, conversation=conversation)
                    samples[name].append(time.perf_counter() - started)
    finally:
        for registry in registries.values():
            registry.close()
    return _pair(samples)


def _pair(samples: dict[str, list[float]]) -> dict[str, Any]:
    figures = {name: quantiles(values) for name, values in samples.items()}
    return {**figures, "content_vs_plain_p50": figures["content"]["p50_ms"] / figures["plain"]["p50_ms"]}
