"""The proxy's change stream is ``serve``'s: a proxied client hears what a ``serve`` client hears of the changes
made to its agent's sessions - here, in another process - by the agent's own ids (``registry.proxy.surface``)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from registry.model import META_AGENT, META_ARCHIVED, META_MESSAGES, META_TITLE_SOURCE
from tests.acp_wire import serve_command
from tests.proxy_wire import ProxyProcess, prompt, started

_ELSEWHERE = """
import sys
from registry import SessionRegistry
url, session, change = sys.argv[1:4]
with SessionRegistry.open(url, create=False) as registry:
    if change == "archive":
        registry.archive(session)
    elif change == "unarchive":
        registry.unarchive(session)
    elif change == "title":
        registry.set_title(session, "Named in another window")
    else:
        registry.record_activity(session, messages=2)
"""


def _info_updates(client: ProxyProcess, session: str) -> list[dict[str, Any]]:
    return [
        n["params"]["update"]
        for n in client.notifications
        if n["params"].get("sessionId") == session
        and n["params"]["update"].get("sessionUpdate") == "session_info_update"
    ]


def _after(client: ProxyProcess, session: str, seen: int) -> list[dict[str, Any]]:
    """A session's ``session_info_update``s after the first ``seen``, as both surfaces can be compared:
    ``updatedAt``'s presence (not its value: the clock moved), ``_meta`` without the agent (the proxied session
    has one)."""
    shown = []
    for update in _info_updates(client, session)[seen:]:
        meta = {k: v for k, v in update.get("_meta", {}).items() if k != META_AGENT}
        shown.append({**update, "updatedAt": "updatedAt" in update, "_meta": meta})
    return shown


def test_a_proxied_client_hears_changes_made_in_another_process_as_a_serve_client_does(
    url: str, tmp_path: Path
) -> None:
    proxy, proxied = started(url, cwd=str(tmp_path))
    with proxy, ProxyProcess(serve_command(url)) as serve:
        serve.result(0, "initialize", {"protocolVersion": 1})
        served = serve.result(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        proxy.result(2, "session/prompt", prompt(proxied, "Fix the login bug"))
        serve.result(2, "session/prompt", prompt(served, "Fix the login bug"))
        sessions = {proxy: (f"scripted-agent:{proxied}", proxied), serve: (served, served)}
        seen = {client: 0 for client in sessions}
        n = 3
        deadline = time.monotonic() + 30  # the proxy records the turn and its title after the answer
        while not any(u.get("_meta", {}).get(META_TITLE_SOURCE) == "prompt" for u in _info_updates(proxy, proxied)):
            assert time.monotonic() < deadline, proxy.notifications
            proxy.result(n, "session/list", {})
            n += 1
        for change in ("archive", "unarchive", "title", "activity"):
            for client, (stored, wire) in sessions.items():
                seen[client] = len(_info_updates(client, wire))
                subprocess.run([sys.executable, "-c", _ELSEWHERE, url, stored, change], check=True, timeout=60)
                deadline = time.monotonic() + 30  # a generous bound: another process's write, then the follower
                while not _after(client, wire, seen[client]):
                    assert time.monotonic() < deadline, (change, client.notifications)
                    client.result(n, "session/list", {"archived": "include"})  # reads what arrived meanwhile
                    n += 1
            assert {n["params"].get("sessionId") for n in proxy.notifications} == {proxied}  # its agent's, its ids
            heard = {client: _after(client, sessions[client][1], seen[client]) for client in sessions}
            assert heard[proxy] == heard[serve], change
            (update,) = heard[proxy]
            if change == "archive":
                assert update["_meta"][META_ARCHIVED] is True
            elif change == "unarchive":
                assert META_ARCHIVED not in update["_meta"]
            elif change == "title":
                assert update["title"] == "Named in another window"
            else:
                assert update["updatedAt"] is True and update["_meta"][META_MESSAGES] == 4
        assert proxy.close() == 0
