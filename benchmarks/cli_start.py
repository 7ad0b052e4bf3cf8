"""``acp-registry list`` as a whole process, beside ``python -c pass`` and the floor, on the CPU clock.

The floor is the least a Python process can do to answer the same page: msgspec and sqlite3 imported as the CLI
imports them, the cyclic collector paused while it starts (as the CLI's start pauses it), the store's file opened
read-only, one page of the read model's rows read, each row's seal checked and its state decoded, one line a
session printed. What ``list`` costs above it is the package itself: its modules, ``argparse``, the open's checks,
the table.

The three run in turn (who goes first rotating), ``--rounds`` times, each as a process of its own with its output
piped away; each figure is its CPU (user + system) divided by the ``python -c pass`` of the same round. Time an
installed package (``--python`` of a venv where it was installed with pip: bytecode compiled as a wheel has it).

    python -m benchmarks.cli_start --store sqlite:///abs/path.db [--python VENV/bin/python] [--rounds 21]
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Final

from benchmarks.args import bench_parser
from benchmarks.figures import interleave
from benchmarks.store_throughput import print_results

__all__ = ["FLOOR", "floor_program", "measure"]

FLOOR: Final = """\
import gc
import sys
gc.disable()  # the start as the CLI's: the collector paused until the store is open
sys.modules["typing_extensions"] = None  # msgspec imported as the CLI imports it
import msgspec
del sys.modules["typing_extensions"]
import hashlib
import sqlite3


class State(msgspec.Struct, array_like=True, frozen=True, gc=False):
{fields}


path, size = sys.argv[1], int(sys.argv[2])
with open(path + ".seal-key", "rb") as file:
    mac = hashlib.blake2b(key=file.read(), digest_size={seal}, person=b"acp-rm-seal")
decode = msgspec.msgpack.Decoder(State).decode
db = sqlite3.connect(f"file:{{path}}?mode=ro", uri=True)
gc.freeze()
gc.enable()
rows = db.execute(
    "SELECT state FROM rm_sessions INDEXED BY rm_sessions_order WHERE live AND archived = 0"
    " ORDER BY rank, session_id LIMIT ?",
    (size + 1,),
).fetchall()
lines = []
for (blob,) in rows[:size]:
    view = memoryview(blob)
    check = mac.copy()
    check.update(view[{seal}:-{outside}])  # the seal first; it covers all but the position's mark and value
    if check.digest() != blob[:{seal}]:
        raise SystemExit("a row's seal does not match")
    state = decode(view[{seal}:])
    lines.append(f"{{state.updated_at}} {{state.messages}} {{state.title}} {{state.cwd}} {{state.session_id}}")
sys.stdout.write("\\n".join(lines) + "\\n")
"""
"""The floor's program (``floor_program`` fills in the state's fields and the blob's layout from the package)."""


def floor_program() -> str:
    from registry.model import SessionState  # noqa: PLC0415
    from registry.readmodel.keys import PLACE, SEAL  # noqa: PLC0415

    fields = "\n".join(f"    {name}: object" for name in SessionState.__struct_fields__)
    return FLOOR.format(fields=fields, seal=SEAL, outside=1 + PLACE)


def _cpu(argv: Sequence[str], _round: int) -> float:
    """User plus system CPU seconds of one process (its output dropped); a failure is an error, not a figure."""
    with open(os.devnull, "wb") as null:
        child = subprocess.Popen(argv, stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        assert child.stderr is not None
        said = child.stderr.read().decode(errors="replace")
        child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[:3]} failed: {said.strip()}")
    return usage.ru_utime + usage.ru_stime


def measure(url: str, python: str = sys.executable, rounds: int = 21, page_size: int = 50) -> dict[str, float]:
    """Each process's CPU over ``python -c pass``'s, per round: the median and the 10th and 90th percentiles."""
    from events.factory import sqlite_file  # noqa: PLC0415

    path = sqlite_file(url)
    if path is None:
        raise ValueError(f"{url}: the floor reads a SQLite store's file (sqlite:///abs/path.db)")
    commands = {
        "pass": [python, "-c", "pass"],
        "floor": [python, "-c", floor_program(), path, str(page_size)],
        "list": [python, "-m", "registry.cli", "--store", url, "list", "--page-size", str(page_size)],
    }
    script = os.path.join(os.path.dirname(python), "acp-registry")
    if os.path.exists(script):  # as a user runs it (the package's own entry point)
        commands["list"] = [script, *commands["list"][3:]]
    for argv in commands.values():  # warms the file's pages and the bytecode
        _cpu(argv, 0)
    samples = interleave({name: functools.partial(_cpu, argv) for name, argv in commands.items()}, range(rounds))
    figures: dict[str, float] = {"pass_ms": statistics.median(samples["pass"]) * 1000}
    for name in ("floor", "list"):
        ratios = sorted(a / b for a, b in zip(samples[name], samples["pass"], strict=True))
        figures[f"{name}_x"] = statistics.median(ratios)
        figures[f"{name}_x_p10"] = ratios[len(ratios) // 10]
        figures[f"{name}_x_p90"] = ratios[(len(ratios) - 1) * 9 // 10]
    return figures


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--store", required=True, help="a SQLite store (sqlite:///abs/path.db) with its read model")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of a venv where it is installed")
    parser.add_argument("--rounds", type=int, default=21, help="processes of each kind (21)")
    args = parser.parse_args()
    print_results(measure(args.store, args.python, args.rounds), args.json)


if __name__ == "__main__":
    main()
