"""``--keep-secrets`` on the commands that record conversations (``proxy``, ``serve``, ``import-agents``): without it a
key said in a turn is masked before it is stored; with it the text is kept as it was said."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from registry import SessionRegistry
from registry.cli import main
from tests.acp_wire import WireServer
from tests.importing import SID, prompt, session_file, write_lines
from tests.proxy_wire import AGENT, ProxyProcess
from tests.proxy_wire import prompt as acp_prompt

KEY = "sk-ant-api03-Abcdefghijklmnopqrstuvwxyz012345"


def _said(url: str) -> str:
    with SessionRegistry.open(url) as registry:
        return "\n".join(m.text for s in registry.list().sessions for m in registry.transcript(s.session_id).lines())


@pytest.mark.parametrize("keep", [False, True])
def test_the_proxy_masks_a_key_said_in_a_turn_unless_asked_to_keep_it(tmp_path: Path, keep: bool) -> None:
    url = f"sqlite://{tmp_path}/s.db"
    flag = ["--keep-secrets"] if keep else []
    with ProxyProcess(
        [sys.executable, "-m", "registry.cli", "proxy", "--store", url, *flag, "--", sys.executable, AGENT]
    ) as proxy:
        proxy.result(0, "initialize", {"protocolVersion": 1})
        session = proxy.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        proxy.result(2, "session/prompt", acp_prompt(session, f"my key is {KEY} keep it safe"))
        assert proxy.close() == 0
    said = _said(url)
    assert "keep it safe" in said
    assert (KEY in said) is keep, said


@pytest.mark.parametrize("keep", [False, True])
def test_import_agents_masks_a_key_in_an_agents_file_unless_asked_to_keep_it(
    claude: Path, tmp_path: Path, keep: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    write_lines(session_file(claude, SID), [prompt("2026-03-03T08:00:00Z", f"deploy with {KEY} please")])
    url = f"sqlite://{tmp_path}/s.db"
    flag = ["--keep-secrets"] if keep else []
    code = main(["--store", url, "import-agents", "--agent", "claude-code", "--root", f"claude-code={claude}", *flag])
    assert code == 0, capsys.readouterr().err
    said = _said(url)
    assert "deploy with" in said
    assert (KEY in said) is keep, said


@pytest.mark.parametrize("keep", [False, True])
def test_serve_masks_a_key_said_in_a_turn_unless_asked_to_keep_it(tmp_path: Path, keep: bool) -> None:
    url = f"sqlite://{tmp_path}/s.db"
    server = WireServer(url, *(["--keep-secrets"] if keep else []))
    try:
        assert "result" in server.call(0, "initialize", {"protocolVersion": 1})
        session = server.call(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        assert "result" in server.call(2, "session/prompt", acp_prompt(session, f"my key is {KEY} keep it safe"))
    finally:
        assert server.close() == 0
    said = _said(url)
    assert "keep it safe" in said
    assert (KEY in said) is keep, said
