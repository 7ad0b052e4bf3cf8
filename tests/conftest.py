"""Fixtures shared by test modules: a PostgreSQL schema of one's own, when a server is there; store URLs of
either backend; the command line run as a user runs it, and a store to read with it (``tests/cli_runner.py``);
a Claude Code history to import (``tests/importing.py``)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from registry import SessionRegistry
from tests.cli_runner import Cli, Populated, populate
from tests.importing import session_file, spec_session, write_lines

# Under pytest-xdist (make test) a worker's environment has COLUMNS=80 and LINES=24 that a plain run has not: the
# command line's tables would then be squeezed to 80 columns in some tests and not others. Tests see the same
# environment whichever way they run (the tests about widths set COLUMNS themselves).
if os.environ.get("PYTEST_XDIST_WORKER") and (os.environ.get("COLUMNS"), os.environ.get("LINES")) == ("80", "24"):
    del os.environ["COLUMNS"], os.environ["LINES"]

# A suite started from a script's background job (`make test &` without job control, as some CI steps and
# harnesses do) inherits SIGINT ignored, and so would every command it starts: the tests that stop `tail`, `serve`
# or `import-agents --watch` with Ctrl-C would wait for an exit that never comes. A handler is not inherited across
# exec (an ignored signal is), so this process taking Python's own handler back gives its children the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

POSTGRES = os.environ.get("ACP_REGISTRY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
_START = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"

try:
    import psycopg as _psycopg  # noqa: F401 - only whether it is there
except ModuleNotFoundError as _missing:  # pragma: no cover - the dev extras install psycopg
    if os.environ.get("CI") == "true":
        raise
    _NO_PSYCOPG: str | None = f"psycopg is not installed ({_missing}): pip install -e '.[dev]'"
    collect_ignore_glob = ["test_postgres_*.py"]  # they import psycopg at the top; the other modules skip its cases
else:
    _NO_PSYCOPG = None


def pytest_report_header() -> list[str]:
    return [] if _NO_PSYCOPG is None else [f"{_NO_PSYCOPG}: tests/test_postgres_*.py not collected"]


def _reachable() -> str | None:
    """None when the server answers, else why not."""
    try:
        import psycopg  # noqa: PLC0415 - the dev extra installs it; without it the PostgreSQL cases skip
    except ModuleNotFoundError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        psycopg.connect(POSTGRES, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        return f"no PostgreSQL server at {POSTGRES} ({' '.join(str(exc).split())}): start one with `{_START}`"
    return None


@pytest.fixture(scope="session")
def postgres_server() -> str:
    why = _reachable()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return POSTGRES


@pytest.fixture
def postgres_schemas(postgres_server: str) -> Iterator[Callable[[], str]]:
    """Makes store URLs, each on a fresh schema; every schema made is dropped at the end."""
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    made: list[str] = []

    def new() -> str:
        name = f"t_{uuid.uuid4().hex}"
        made.append(name)
        query = urllib.parse.urlencode({"schema": name})
        return f"{postgres_server}{'&' if '?' in postgres_server else '?'}{query}"

    yield new
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_urls(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Callable[[], str]:
    """Makes URLs of new, empty stores of one backend that keeps read-model tables (SQLite, PostgreSQL)."""
    if request.param == "sqlite":
        folder = tmp_path_factory.mktemp("stores")
        names = iter(range(1_000_000))
        return lambda: f"sqlite://{folder}/s{next(names)}.db?synchronous=off"
    made: Callable[[], str] = request.getfixturevalue("postgres_schemas")
    return made


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionRegistry]:
    """A registry on a new store of each backend: memory, SQLite, PostgreSQL (a module may define its own)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite://{tmp_path}/s.db"
    else:
        made: Callable[[], str] = request.getfixturevalue("postgres_schemas")
        url = made()
    with SessionRegistry.open(url) as opened:
        yield opened


# -- the command line ----------------------------------------------------------------------------------


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A SQLite store in the test's own folder (made by whatever opens it first); a module may name its own."""
    return f"sqlite://{tmp_path}/sessions.db"


@pytest.fixture
def run(tmp_path: Path) -> Cli:
    """``acp-registry`` with its default store under this test's folder (never the user's own)."""
    return Cli(tmp_path / "data")


@pytest.fixture
def kept(tmp_path: Path) -> str:
    """Where the scripted agent (``tests/proxy_agent.py --keep FILE``) keeps its sessions, in this test's folder."""
    return str(tmp_path / "kept.json")


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Populated:
    """The story of ``populate``, written once a module: read it, never change it (``copy`` is for that)."""
    return populate(tmp_path_factory.mktemp("cli") / "log.db")


@pytest.fixture
def copy(populated: Populated, tmp_path: Path) -> Path:
    """A private copy of the populated store (its read model is in the file), for tests that change it."""
    target = tmp_path / "copy.db"
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # private, as the store makes its files
    with sqlite3.connect(populated.path) as source, sqlite3.connect(target) as copied:
        source.backup(copied)  # the log and the read model as one consistent file, WAL included
    key = Path(f"{populated.path}.seal-key")  # the key the read model's rows are sealed with, kept apart
    if key.exists():
        shutil.copy2(key, f"{target}.seal-key")
    return target


# -- importers -----------------------------------------------------------------------------------------


@pytest.fixture
def claude(tmp_path: Path) -> Path:
    """A Claude Code home whose one project holds the spec's session (``spec_session``)."""
    root = tmp_path / "claude"
    write_lines(session_file(root), spec_session())
    return root
