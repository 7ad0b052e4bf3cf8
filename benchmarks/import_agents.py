"""Importing a Claude Code history: first import, re-imports, and listing - next to the scans agents do today.

A synthetic ``~/.claude/projects`` tree (``--sessions`` files of ``--turns`` turns, ~100 KB each by default, as
in the issue's 10k sessions / 1 GB) is listed by reading it the ways agents do on every ``session/list``:

- *full scan*: read and parse every line of every file (what claude-code-acp does);
- *head+tail scan*: read 64 KiB from each end of every file and parse those lines (the Agent SDK's lite read);

and imported into a SQLite store: the first import, a re-import with nothing changed, a re-import after two lines
were appended to one file; then ``session/list``'s first page from a registry opened on that store (cold: from
its snapshot) and from an open one (warm). Ratios compare each scan with those in the same run.

    python benchmarks/import_agents.py [--sessions 2000] [--turns 20] [--json results.json]
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.args import bench_parser
from events import open_store
from registry import SessionRegistry
from registry.importers import Importer, sources

_HEAD_TAIL = 65536
_WORDS = [
    "order",
    "invoice",
    "refund",
    "cursor",
    "page",
    "header",
    "router",
    "test",
    "build",
    "cache",
    "retry",
    "query",
    "index",
    "schema",
]


def generate(root: Path, sessions: int, turns: int, seed: int = 7) -> int:
    """Write the tree; returns its size in bytes. Lines look like Claude Code's (see the shared spec)."""
    rng = random.Random(seed)
    total = 0
    start = 1_767_225_600  # 2026-01-01T00:00:00Z
    for n in range(sessions):
        project = f"-home-dev-p{n % 50}"
        cwd = f"/home/dev/p{n % 50}"
        sid = f"{n:08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
        folder = root / "projects" / project
        folder.mkdir(parents=True, exist_ok=True)
        at = start + n * 600
        lines: list[dict[str, Any]] = [{"type": "permission-mode", "permissionMode": "default", "sessionId": sid}]
        for turn in range(turns):
            words = " ".join(rng.choice(_WORDS) for _ in range(12))
            base: dict[str, Any] = {
                "isSidechain": False,
                "userType": "external",
                "cwd": cwd,
                "sessionId": sid,
                "gitBranch": "main",
            }
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at + turn * 20))
            lines.append(
                {
                    **base,
                    "type": "user",
                    "uuid": f"u{turn}",
                    "timestamp": stamp,
                    "message": {"role": "user", "content": f"Please {words}"},
                }
            )
            text = " ".join(rng.choice(_WORDS) for _ in range(300))  # ~2 KB of answer
            lines.append(
                {
                    **base,
                    "type": "assistant",
                    "uuid": f"a{turn}",
                    "timestamp": stamp,
                    "message": {
                        "id": f"msg_{n}_{turn}",
                        "role": "assistant",
                        "content": [{"type": "text", "text": text}],
                    },
                }
            )
            result = "x" * rng.randint(1000, 3000)  # a tool result
            lines.append(
                {
                    **base,
                    "type": "user",
                    "uuid": f"t{turn}",
                    "timestamp": stamp,
                    "message": {"role": "user", "content": [{"type": "tool_result", "content": result}]},
                }
            )
        lines.append({"type": "ai-title", "aiTitle": f"Session {n}: {words[:40]}", "sessionId": sid})
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
        (folder / f"{sid}.jsonl").write_bytes(data)
        total += len(data)
    return total


def _summarise(lines: list[bytes]) -> dict[str, Any]:
    """What a lister derives from a file's lines (cwd, title, last activity), as agents do with a JSON parser."""
    info: dict[str, Any] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        info.setdefault("cwd", record.get("cwd"))
        if record.get("type") == "ai-title":
            info["title"] = record.get("aiTitle")
        if record.get("type") in ("user", "assistant"):
            info["updated"] = record.get("timestamp")
    return info


def full_scan(root: Path) -> int:
    listed = []
    for path in sorted((root / "projects").glob("*/*.jsonl")):
        listed.append(_summarise(path.read_bytes().splitlines()))
    listed.sort(key=lambda info: info.get("updated") or "", reverse=True)
    return len(listed)


def head_tail_scan(root: Path) -> int:
    listed = []
    for path in sorted((root / "projects").glob("*/*.jsonl")):
        with open(path, "rb") as f:
            head = f.read(_HEAD_TAIL)
            size = os.fstat(f.fileno()).st_size
            if size <= 2 * _HEAD_TAIL:  # both windows would overlap: read the rest once
                lines = (head + f.read()).splitlines()
            else:
                f.seek(size - _HEAD_TAIL)
                lines = head.splitlines()[:-1] + f.read().splitlines()[1:]
        listed.append(_summarise(lines))
    listed.sort(key=lambda info: info.get("updated") or "", reverse=True)
    return len(listed)


def timed(fn: Callable[[], Any], repeat: int = 1) -> float:
    """The best of ``repeat`` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--sessions", type=int, default=2000, help="session files (the issue's size: 10000)")
    parser.add_argument("--turns", type=int, default=20, help="turns per session (20 is ~100 KB per file)")
    parser.add_argument("--synchronous", choices=("full", "normal"), default="full", help="the store's durability")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="import-bench-") as scratch:
        folder = Path(scratch)
        root = folder / "claude"
        print(f"generating {args.sessions} sessions x {args.turns} turns ...", file=sys.stderr)
        size = generate(root, args.sessions, args.turns)
        url = f"sqlite:///{folder}/registry.db" + ("?synchronous=normal" if args.synchronous == "normal" else "")
        figures: dict[str, float] = {}
        figures["full scan (every line of every file)"] = timed(lambda: full_scan(root), 2)
        figures["head+tail scan (64 KiB each end)"] = timed(lambda: head_tail_scan(root), 2)
        with open_store(url) as store:
            importer = Importer(store, sources(["claude-code"]), roots={"claude-code": root})
            first = importer.run()
            figures["first import"] = first.agents[0].seconds
            assert first.agents[0].added == args.sessions, first
            figures["re-import, nothing changed"] = timed(importer.run, 3)
            target = next((root / "projects").glob("*/*.jsonl"))

            def one_changed() -> None:
                sid = target.stem
                with open(target, "a") as f:
                    for kind in ("user", "assistant"):
                        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time()))
                        line = {
                            "type": kind,
                            "cwd": "/x",
                            "sessionId": sid,
                            "timestamp": stamp,
                            "message": {"role": kind, "content": "again", "id": f"m{time.time_ns()}"},
                        }
                        f.write(json.dumps(line) + "\n")
                summary = importer.run()
                assert summary.agents[0].changed == 1, summary

            figures["re-import, one file changed"] = timed(one_changed, 3)
        cold_start = time.perf_counter()
        registry = SessionRegistry.open(url, follow=False)
        registry.handle("session/list", {})
        figures["session/list page 1, registry opened cold"] = time.perf_counter() - cold_start
        figures["session/list page 1, registry open"] = timed(lambda: registry.handle("session/list", {}), 20)
        registry.close()
    full = figures["full scan (every line of every file)"]
    lite = figures["head+tail scan (64 KiB each end)"]
    print(
        f"\nClaude Code tree: {args.sessions} sessions, {size / 1e6:.0f} MB "
        f"({size / args.sessions / 1e3:.0f} KB each); store sqlite synchronous={args.synchronous}\n"
    )
    print(f"{'':45} {'seconds':>10} {'full scan / this':>18} {'head+tail / this':>18}")
    for name, seconds in figures.items():
        print(f"{name:45} {seconds:10.4f} {full / seconds:17.1f}x {lite / seconds:17.1f}x")
    if args.json:
        payload = {"sessions": args.sessions, "bytes": size, "synchronous": args.synchronous, "seconds": figures}
        args.json.write_bytes(msgspec.json.encode(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
