"""Which session a user means: the id as they pasted it, resolved the way git resolves a commit.

Sessions that came from another agent are stored as ``<agent>:<the agent's own id>`` (``claude-code:6b1d…``), but
a user has the agent's own id - from its folder, its UI, its ``--resume`` list - or the start of one.
``resolve_session`` accepts, in this order:

1. the stored id itself (``claude-code:6b1d2c3e-…``, or a session ``serve`` made);
2. an agent's own id: the one stored session ``<agent>:<text>`` of a known agent (``6b1d2c3e-…``);
3. a unique prefix of at least ``MIN_PREFIX`` characters, of the stored id or of the agent's own id
   (``6b1d2c3e``, ``claude-code:6b1d``).

A UUID is one id in every spelling (upper case, braces, ``urn:uuid:``, hyphens or not) in 1 and 2. More than one
match is an ``InputError`` listing a few of them; none is an ``InputError`` that suggests the
nearest ids. Deleted sessions count (``history`` shows them). The exact lookups cost one read-model lookup each;
only a prefix or a miss walks the read model's ids.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
from collections.abc import Iterable, Iterator
from typing import Final

from registry.agents import KNOWN, spellings, split_id, stored_id
from registry.cli.errors import InputError
from registry.cli.stores import open_registry
from registry.cli.where import locate
from registry.errors import InvalidParams
from registry.service import SessionRegistry

__all__ = ["MIN_PREFIX", "SESSION_HELP", "add_session", "resolve_session", "the_session"]

SESSION_HELP: Final = "the session id, the agent's own id, or a unique prefix of either"

_AGENTS: Final = tuple(known.name for known in KNOWN)
MIN_PREFIX: Final = 4
"""The shortest prefix taken for an id (as ``git`` takes abbreviated commits)."""
_SHOWN: Final = 5


def add_session(parser: argparse.ArgumentParser, help: str = SESSION_HELP) -> None:
    """The ``SESSION`` argument of a command that works on one session."""
    parser.add_argument("session", metavar="SESSION", help=help)


@contextlib.contextmanager
def the_session(args: argparse.Namespace) -> Iterator[tuple[SessionRegistry, str]]:
    """The registry on the command's store (read, never created) and the stored id of the session ``SESSION`` names."""
    with open_registry(locate(args.store), SessionRegistry, create=False, follow=False) as registry:
        yield registry, resolve_session(registry, args.session)


def resolve_session(registry: SessionRegistry, text: str) -> str:
    """The stored id of the session ``text`` names (see the module docstring); ``InputError`` when none or several."""
    exact = _spelled(registry, text)
    if exact is not None:
        return exact
    qualified = [found for agent in _AGENTS if (found := _spelled(registry, text, agent)) is not None]
    if len(qualified) == 1:
        return qualified[0]
    ids = [state.session_id for state in registry.read_model.states()]
    matches = qualified or (_prefixed(ids, text) if len(text) >= MIN_PREFIX else [])
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(sorted(matches)[:_SHOWN]) + (", …" if len(matches) > _SHOWN else "")
        raise InputError(f"{text!r} is ambiguous: {len(matches)} sessions match ({shown}); give more of the id")
    if len(text) < MIN_PREFIX:
        starting = len(_prefixed(ids, text))
        raise InputError(
            f"no session {text!r} in this store, and a prefix needs at least {MIN_PREFIX} characters of the id"
            + (f" ({starting} start with {text!r})" if starting else f"{_suggestion(ids, text, short=True)}")
        )
    raise InputError(f"no session {text!r} in this store{_suggestion(ids, text)}")


def _spelled(registry: SessionRegistry, text: str, agent: str | None = None) -> str | None:
    """The stored id ``text`` names in one of its spellings (a UUID in any form: ``registry.agents.spellings``),
    or None; with ``agent``, ``text`` is that agent's own id."""
    if agent is not None:
        candidates = [stored_id(agent, spelling) for spelling in spellings(text)]
    else:
        candidates = [text]
        parts = split_id(text)
        if parts is not None:
            candidates += [text[: -len(parts[2])] + spelling for spelling in spellings(parts[2])]
        candidates += spellings(text)  # a UUID made by serve, in another spelling
    return next((found for found in dict.fromkeys(candidates) if _exists(registry, found)), None)


def _exists(registry: SessionRegistry, session_id: str) -> bool:
    try:
        return registry.state(session_id) is not None
    except InvalidParams:  # not an id at all (too long, a control character): nothing is stored under it
        return False


def _prefixed(ids: Iterable[str], prefix: str) -> list[str]:
    """Ids that start with ``prefix``, or whose agent's own id (after ``<agent>:``) does."""
    return [i for i in ids if i.startswith(prefix) or i.partition(":")[2].startswith(prefix)]


def _suggestion(ids: list[str], text: str, *, short: bool = False) -> str:
    """``; did you mean …?`` with the nearest stored ids (by their whole id or the agent's own id), or where to see
    them (``short``: after a sentence of its own)."""
    by_name: dict[str, str] = {}
    for session_id in ids:
        by_name.setdefault(session_id, session_id)
        native = session_id.partition(":")[2]
        if native:
            by_name.setdefault(native, session_id)
    nearest = difflib.get_close_matches(text, list(by_name), n=3, cutoff=0.6)
    found = list(dict.fromkeys(by_name[name] for name in nearest))
    if not found:
        return "; acp-registry list shows the sessions" if short else " (acp-registry list shows the sessions)"
    return "; did you mean " + " or ".join(found) + "?"
