"""Whether the agent folders of tests/agents/install.sh hold whole installs, not only their stamps (stdlib only).

An npm folder (``npm_in``): every package its spec names is in ``node_modules``, each command a package's ``bin``
declares is in ``node_modules/.bin`` and executable, and every dependency of every package reached resolves the
way Node resolves it (the package's own ``node_modules``, then each folder above it). A venv (``pip_in``): its
``bin/python`` leads to a Python, the distribution is installed at the version the spec pins, and each console
script it declares is in ``bin`` and executable.

``python3 check_install.py AGENTS_DIR`` checks every stamped folder in one process (install.sh's quick path: one
Python start for all agents); ``python3 check_install.py AGENTS_DIR NAME SPEC`` checks one fresh install before
its stamp is written. One line per folder on stdout: ``NAME ok`` or ``NAME <what is missing>``; exit 1 when one
is broken.
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from pathlib import Path


def _package_name(spec: str) -> str:
    """``@scope/name@1.2.3`` -> ``@scope/name``; ``name@22`` -> ``name``."""
    at = spec.rfind("@")
    return spec[:at] if at > 0 else spec


def _manifest(folder: Path) -> dict[str, object] | None:
    try:
        loaded = json.loads((folder / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _resolve(root: Path, start: Path, name: str) -> Path | None:
    """Where Node finds ``name`` required from the package in ``start``."""
    folder = start
    while True:
        candidate = folder / "node_modules" / name
        if (candidate / "package.json").is_file():
            return candidate
        if folder == root or root not in folder.parents:
            return None
        folder = folder.parent


def _bins(name: str, manifest: dict[str, object]) -> list[str]:
    declared = manifest.get("bin")
    if isinstance(declared, str):
        return [name.rpartition("/")[2]]
    return list(declared) if isinstance(declared, dict) else []


def check_npm(root: Path, specs: list[str]) -> str | None:
    """What is missing from the npm install in ``root``, or None."""
    seen: set[Path] = set()
    queue: deque[tuple[Path, str, str]] = deque((root, _package_name(spec), spec) for spec in specs)
    while queue:
        start, name, wanted_by = queue.popleft()
        folder = _resolve(root, start, name)
        if folder is None:
            return f"{name} (needed by {wanted_by}) is missing from {root / 'node_modules'}"
        if folder in seen:
            continue
        seen.add(folder)
        manifest = _manifest(folder)
        if manifest is None:
            return f"{folder / 'package.json'} does not read"
        if start == root:  # a package the spec names: its commands must be there to run
            for command in _bins(name, manifest):
                path = root / "node_modules" / ".bin" / command
                if not os.access(path, os.X_OK):
                    return f"the command {path} is missing or not executable"
        dependencies = manifest.get("dependencies")
        if isinstance(dependencies, dict):
            queue.extend((folder, dependency, name) for dependency in dependencies)
    return None


def _console_scripts(dist_info: Path) -> list[str]:
    names, section = [], ""
    try:
        lines = (dist_info / "entry_points.txt").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[console_scripts]" and "=" in line:
            names.append(line.partition("=")[0].strip())
    return names


def check_pip(root: Path, spec: str) -> str | None:
    """What is missing from the venv in ``root``, or None (read from its files: no Python of its own is started)."""
    name, _, version = spec.partition("==")
    python = root / "bin" / "python"
    if not os.access(python, os.X_OK):
        return f"{python} is missing or does not lead to a Python"
    wanted = name.lower().replace("-", "_").replace(".", "_")
    found = [
        info
        for info in root.glob("lib/python3*/site-packages/*.dist-info")
        if info.name.lower().partition("-")[0] == wanted
    ]
    if not found:
        return f"{name} is not installed in {root}"
    versions = [info.name[: -len(".dist-info")].partition("-")[2] for info in found]
    if version and version not in versions:
        return f"{name} is {', '.join(versions)} in {root}, not {version}"
    for command in _console_scripts(found[versions.index(version) if version else 0]):
        path = root / "bin" / command
        if not os.access(path, os.X_OK):
            return f"the command {path} is missing or not executable"
    return None


def check(folder: Path, spec: str) -> str | None:
    """What is missing from the agent folder ``folder``, installed from ``spec``, or None."""
    if (folder / "pyvenv.cfg").is_file():
        return check_pip(folder, spec)
    return check_npm(folder, spec.split())


def main(argv: list[str]) -> int:
    """``DIR``: one line per stamped agent folder in DIR, ``NAME ok`` or ``NAME <what is missing>``;
    ``DIR NAME SPEC``: that folder, against SPEC (before its stamp is written)."""
    if len(argv) not in (1, 3):
        print("usage: check_install.py AGENTS_DIR [NAME SPEC]", file=sys.stderr)
        return 2
    agents = Path(argv[0]).absolute()
    if len(argv) == 3:
        chosen = [(argv[1], argv[2])]
    else:
        stamps = sorted(agents.glob("*/.installed"))
        chosen = [(stamp.parent.name, stamp.read_text(encoding="utf-8").strip()) for stamp in stamps]
    broken = 0
    for name, spec in chosen:
        missing = check(agents / name, spec)
        broken += missing is not None
        print(f"{name} {missing or 'ok'}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
