"""The public surface, listed: adding or removing a name is a decision this test makes visible (as httpx does).

Each package's ``__all__`` is sorted, every name in it exists, every module is importable on its own (no import
circle kept alive by import order), ``import registry`` loads neither reactivex nor psycopg nor a store, and the
library works without the packages only the CLI and the importers use.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import events
import registry

PROMISED = Path(__file__).with_name("public_api.txt")
"""The names ``registry.__all__`` promises, one a line (``#`` starts a comment)."""


def _promised() -> list[str]:
    return [line for line in PROMISED.read_text().splitlines() if line and not line.startswith("#")]


def test_the_registry_exports_exactly_its_public_api() -> None:
    assert registry.__all__ == _promised()
    assert all(hasattr(registry, name) for name in registry.__all__)


@pytest.mark.parametrize("package", ["events", "registry"])
def test_all_is_checked_both_ways(package: str) -> None:
    """As httpx checks its ``__all__``: every name in it imports from the package, and every public name the
    package holds once each was read is in it (nothing public but what its declaration exports). A fresh process:
    the package as a user first meets it."""
    code = f"""
import types, {package} as package
for name in package.__all__:
    exec(f"from {package} import {{name}}", {{}})
held = sorted(
    name for name, value in vars(package).items()
    if not name.startswith("_") and not isinstance(value, types.ModuleType)  # its submodules, once imported
)
assert held == sorted(package.__all__), (held, package.__all__)
assert sorted(dir(package)) == sorted({{*vars(package), *package.__all__}})
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_misspelled_public_name_is_a_type_error(tmp_path: Path) -> None:
    """The declarations are what a type checker reads: a name the packages do not export is an error under mypy
    (a package ``__getattr__`` visible to it would make any name ``Any``), and an exported one has its real type."""
    from mypy import api  # noqa: PLC0415 - only this test runs the type checker

    program = tmp_path / "typo.py"
    program.write_text(
        "import events\nimport registry\n"
        "events.SessionCreatd\nregistry.SessionRegistri\n"
        "count: int = events.SessionCreated\n"
    )
    out, _, status = api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(program)])
    assert status == 1
    assert 'Module has no attribute "SessionCreatd"' in out and 'Module has no attribute "SessionRegistri"' in out
    assert 'expression has type "type[SessionCreated]"' in out, out


def test_every_all_is_sorted_and_true() -> None:
    for name in _modules():
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None)
        if names is None:
            continue
        assert list(names) == sorted(names, key=_isort), f"{name}.__all__ is not sorted"
        missing = [each for each in names if not hasattr(module, each)]
        assert not missing, f"{name}.__all__ names what it lacks: {missing}"


def _isort(name: str) -> tuple[int, str]:
    """The order ruff keeps ``__all__`` in: constants, then classes, then functions and the rest."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _modules() -> list[str]:
    found = []
    for package in (events, registry):
        found += [info.name for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    return sorted(name for name in found if not name.endswith(".__main__"))  # those run a program


_ON_ITS_OWN = """
import importlib, os, sys, traceback
modules = sys.argv[1:]
mine = ("events", "registry")

def ours(name):
    return name.partition(".")[0] in mine

# Every module once, in a child: which other packages (the standard library's, msgspec, psycopg, the ACP SDK ...)
# they load between them.
reader, writer = os.pipe()
if os.fork() == 0:
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException:
                pass  # said by its own child below
        os.write(writer, " ".join(sorted({m.partition(".")[0] for m in sys.modules if not ours(m)})).encode())
    finally:
        os._exit(0)
os.close(writer)
with os.fdopen(reader) as pipe:
    others = pipe.read().split()
os.wait()
for name in others:  # those loaded here, once: what each child below finds loaded (none of the packages' own)
    try:
        importlib.import_module(name)
    except Exception:
        pass
assert not [m for m in sys.modules if ours(m)]
failed = []
for name in modules:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    if os.waitpid(pid, 0)[1] != 0:
        failed.append(name)
print(" ".join(failed))
"""


def test_each_module_imports_on_its_own() -> None:
    """Each module of the packages imported in a process that has none of their other modules loaded: no import
    circle kept alive by import order. The other packages they use are loaded once in a parent that forks a child
    for each module (a module that uses a package without importing it fails all the same: a name is bound per
    module), instead of a new interpreter for each of the ~180 modules (20 s of CPU -> ~5 s)."""
    modules = _modules()
    done = subprocess.run(
        [sys.executable, "-c", _ON_ITS_OWN, *modules], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    failed = done.stdout.split()
    assert failed == [], f"these modules do not import on their own: {', '.join(failed)}\n{done.stderr}"
    assert len(modules) > 150


def test_import_registry_stays_light() -> None:
    heavy = "('reactivex', 'psycopg', 'rich', 'asyncio', 'msgspec', 'hashlib', 'sqlite3', 'events.memory')"
    code = f"import sys, registry; print(sorted(m for m in {heavy} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


CLI_ONLY = ("rich", "watchfiles", "zstandard", "platformdirs")
"""Packages only the CLI and the importers use: the library must run without them installed."""

WITHOUT_THEM = f"""
import sys, threading
for name in {CLI_ONLY!r}:
    sys.modules[name] = None  # as if not installed: importing it raises ImportError
from registry import SessionRegistry
for url in sys.argv[1:]:
    with SessionRegistry.open(url) as registry:
        registry.create("/w", session_id="a")
        heard = threading.Event()
        registry.list_changes().subscribe(lambda _item: heard.set())
        registry.change_info("a", title="t")
        registry.fork("a", "/w", session_id="b")
        assert [info.session_id for info in registry.list().sessions] == ["b", "a"]
        assert registry.handle("session/list", {{"cwd": "/w"}})["sessions"]
        assert heard.wait(60)
"""


def test_the_library_runs_without_the_cli_s_packages(tmp_path: Path) -> None:
    urls = ["memory://", f"sqlite://{tmp_path / 'store.db'}"]
    subprocess.run([sys.executable, "-c", WITHOUT_THEM, *urls], check=True, timeout=120)


def test_another_top_level_events_package_is_named_in_one_line(tmp_path: Path) -> None:
    """The PyPI package ``Events`` installs a top-level ``events`` too: ``import registry`` says so, once."""
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "__init__.py").write_text("class Events:\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-c", "import registry"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        cwd=tmp_path,  # not the checkout, whose own events/ would come first
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: acp-session-registry needs its own top-level package 'events'")
    assert str(tmp_path / "events" / "__init__.py") in last and "pip uninstall Events" in last
