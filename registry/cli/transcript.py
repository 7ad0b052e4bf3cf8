"""``transcript``: a session's conversation in order - what the user and the agent said, the agent's thoughts, tool
calls and plans - as text on a terminal, ``--markdown`` as a readable document, or ``--json`` as ``{"sessionId",
"messages": [{"role", "text", "at"}, ...]}`` (``sessionId`` as ``search`` names the session: the agent's own id for
an agent's session; ``at``: RFC 3339, or null where the source has no time). A session with no recorded messages
prints an empty list; an unknown id exits 2."""

from __future__ import annotations

import argparse
import sys

from registry.cli.ids import add_session, the_session
from registry.cli.terminal import printable, stdout_console, write_json
from registry.model import SessionState
from registry.search.hits import wire_id
from registry.transcripts import Transcript, TranscriptLine

__all__ = ["add_arguments", "markdown", "run"]

_HEADINGS = {"user": "User", "agent": "Agent", "thought": "Thought", "tool": "Tool", "plan": "Plan"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session(parser)
    parser.add_argument("--markdown", action="store_true", help="a Markdown document of the conversation")


def markdown(state: SessionState, lines: list[TranscriptLine]) -> str:
    """The conversation as a Markdown document: a heading with the session's facts, then each message."""
    title = state.title or state.session_id
    out = [f"# {title}", "", f"- session: `{state.session_id}`", f"- cwd: `{state.cwd}`"]
    if state.agent:
        out.append(f"- agent: {state.agent}")
    out.append(f"- messages: {len(lines)}")
    for line in lines:
        heading = _HEADINGS.get(line.role, line.role)
        out += ["", f"## {heading}" + (f" · {line.at}" if line.at else ""), ""]
        text = line.text.rstrip()
        out.append(f"```text\n{text}\n```" if line.role == "tool" else text)
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.json and args.markdown:
        raise SystemExit(_usage("--json and --markdown cannot be given together"))
    with the_session(args) as (registry, session_id):
        state = registry.state(session_id)
        assert state is not None  # resolved: it exists
        found: Transcript = registry.transcript(session_id)
    lines = found.lines()
    if args.json:
        write_json({"sessionId": wire_id(state), "messages": lines})
        return 0
    if args.markdown:
        sys.stdout.write(markdown(state, lines))
        sys.stdout.flush()
        return 0
    if not lines:
        erased = " (deleted: its conversation was erased)" if state.deleted else ""
        print(f"{session_id}: no recorded messages{erased}", file=sys.stderr)
        return 0
    console = stdout_console()
    for line in lines:
        heading = _HEADINGS.get(line.role, line.role)
        console.print(f"[bold]{heading}[/bold] [dim]{line.at or ''}[/dim]", highlight=False)
        console.print(printable(line.text).replace("\\n", "\n"), markup=False, highlight=False, soft_wrap=True)
        console.print()
    return 0


def _usage(message: str) -> int:
    print(f"acp-registry transcript: {message} (see acp-registry transcript --help)", file=sys.stderr)
    return 2
