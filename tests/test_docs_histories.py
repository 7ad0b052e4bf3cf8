"""What the docs promise a reader of the importers and of the test suite: a message-count rule for every agent and
where its conversation and usage come from, no reference to files a user does not have, and how long ``make test``
takes."""

from __future__ import annotations

import re
from pathlib import Path

from registry.importers import AGENTS

ROOT = Path(__file__).resolve().parents[1]
HISTORIES = (ROOT / "docs" / "agent-histories.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_message_count_of_every_agent_is_said() -> None:
    start = HISTORIES.index('## What "message count" means, per agent')
    table = HISTORIES[start : HISTORIES.index("\n## ", start + 1)]
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z-]+)` \|", table, re.MULTILINE)}
    assert rows == set(AGENTS)
    assert "compaction" in table  # what counts after one


def test_no_test_or_doc_cites_a_file_users_do_not_have() -> None:
    texts = [*ROOT.glob("tests/*.py"), *ROOT.glob("registry/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]
    shared = "../" + "shared/"  # the session-local spec folder, outside the repository
    assert [str(p.relative_to(ROOT)) for p in texts if shared in p.read_text(encoding="utf-8")] == []


def test_the_readme_says_how_long_make_test_takes() -> None:
    assert re.search(r"`make test`[^.]*takes about \*\*[^*]+ minutes\*\*", README)


def test_where_every_agents_conversation_and_usage_come_from_is_said() -> None:
    start = HISTORIES.index("## Conversations and usage, per agent")
    table = HISTORIES[start : HISTORIES.index("\n## ", start + 1)]
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z-]+)` \|", table, re.MULTILINE)}
    assert rows == set(AGENTS)
    assert "estimate" in table  # which costs are the agent's and which are not
