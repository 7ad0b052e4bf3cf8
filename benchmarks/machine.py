"""Which machine and libraries a run measured, and how busy the rest of the machine was meanwhile.

Figures from a shared 2-core machine mean little without this: a run records what else used the CPU so that a
disturbed run can be told apart (and left uncommitted).
"""

from __future__ import annotations

import compileall
import importlib.metadata
import os
import platform
import resource
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import msgspec

__all__ = ["DISTURBED_CORES", "BusyMeter", "CpuMeter", "Machine", "compile_bytecode", "describe_machine"]

DISTURBED_CORES = 0.5  # CPU that others used, on average, beyond which a run says it was disturbed


def compile_bytecode() -> None:
    """The package's modules compiled to bytecode, as an installed wheel has them, before any command is timed as a
    process: with ``PYTHONDONTWRITEBYTECODE`` set (as it is on the development machine) no run writes it, and every
    child would compile every module again (about 70 ms of an 80 ms ``acp-registry list``)."""
    for package in ("events", "registry"):
        compileall.compile_dir(Path(__file__).parents[1] / package, quiet=2)


class Machine(msgspec.Struct, frozen=True, kw_only=True):
    cpu: str
    cores: int
    ram_bytes: int
    system: str
    python: str
    sqlite: str
    msgspec: str
    eventsourcing: str | None
    matplotlib: str | None
    date: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    others_cpu_cores: float = 0.0  # CPU other processes used during the run, in cores on average


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_seconds() -> tuple[float, float]:
    """CPU time every process on the machine has used since boot, and the time the CPUs have had (both 0 where
    /proc/stat is missing)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


def _busy_cpu_seconds() -> float:
    return _cpu_seconds()[0]


def _own_cpu_seconds() -> float:
    """CPU time this run used, its child processes included."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def describe_machine() -> Machine:
    return Machine(
        cpu=_cpu(),
        cores=os.cpu_count() or 1,
        ram_bytes=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        system=f"{platform.system()} {platform.release()}",
        python=platform.python_version(),
        sqlite=sqlite3.sqlite_version,
        msgspec=msgspec.__version__,
        eventsourcing=_version("eventsourcing"),
        matplotlib=_version("matplotlib"),
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        load_before=os.getloadavg(),
    )


class CpuMeter:
    """CPU that other processes used while this one ran, in cores on average."""

    def __init__(self) -> None:
        self._busy = _busy_cpu_seconds()
        self._own = _own_cpu_seconds()

    def others(self, wall_seconds: float) -> float:
        used = (_busy_cpu_seconds() - self._busy) - (_own_cpu_seconds() - self._own)
        return max(0.0, used) / wall_seconds if wall_seconds > 0 else 0.0


class BusyMeter:
    """How busy the whole machine's CPU has been since this was made, as a fraction (every process's work, a
    server's on the same machine included)."""

    def __init__(self) -> None:
        self._busy, self._total = _cpu_seconds()

    def fraction(self) -> float:
        busy, total = _cpu_seconds()
        return (busy - self._busy) / (total - self._total) if total > self._total else 0.0
