"""The long fuzz run: every fuzz suite (``tests/test_fuzz_*.py``) with many more examples, under many seeds.

    python -m benchmarks.fuzz_sweep                       # x10 examples, seeds 0-4 (about 15 minutes on 2 cores)
    python -m benchmarks.fuzz_sweep --scale 100 --seeds 0-19 -k serve

``make test`` runs the same suites with a budget of under a minute; this sweep multiplies every suite's budget
by ``--scale`` (``ACP_REGISTRY_FUZZ_EXAMPLES`` = 100 x scale percent) and runs it once per seed, so each seed
explores other inputs. A failure prints hypothesis' reproduction line (``@reproduce_failure`` blob and seed);
the exit code is non-zero when any seed failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.args import bench_parser

ROOT = Path(__file__).resolve().parent.parent


def _seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds += range(int(first), int(last or first) + 1)
    return seeds


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.splitlines()[0], json=False, prog="python -m benchmarks.fuzz_sweep")
    parser.add_argument("--scale", type=int, default=10, help="examples: this many times make test's (10)")
    parser.add_argument("--seeds", type=_seeds, default=_seeds("0-4"), help="e.g. 0-4 or 1,5,9 (0-4)")
    parser.add_argument("-k", dest="select", default=None, help="only the fuzz tests matching (pytest -k)")
    args = parser.parse_args(argv)
    env = {**os.environ, "ACP_REGISTRY_FUZZ_EXAMPLES": str(100 * args.scale)}
    failed: list[int] = []
    for seed in args.seeds:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}"]
        command += ["-k", args.select] if args.select else []
        command += sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_fuzz_*.py"))
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        print(f"seed {seed}: {'ok' if done.returncode == 0 else 'FAILED'} in {time.monotonic() - started:.0f} s")
        if done.returncode != 0:
            failed.append(seed)
    print(
        f"{len(args.seeds) - len(failed)} of {len(args.seeds)} seeds passed" + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
