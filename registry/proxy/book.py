"""The proxy's book of the agent's sessions: which ids the client may open through it, decided from what is known.

Each id the client names is in one state (DESIGN.md, "The agent's truth"):

- ``LIVE``: made or opened on this connection - forwarded, listed;
- ``KEPT``: the registry holds it (a turn was seen, or the agent's own list or files showed it) - forwarded, listed;
- ``UNKNOWN``: the registry has no record - forwarded (the agent decides);
- ``UNKEPT``: it never had a turn and the agent did not keep it (retired by a proxy) - forwarded if asked, not
  listed;
- ``DELETED``: deleted in the registry - answered -32002 by the proxy, never forwarded, in this process and the
  next (the tombstone is in the log);
- ``GONE``: the registry keeps it, but the agent no longer has it (its files are gone: ``META_SOURCE_GONE``) -
  not listed, answered -32002 (the agent could not open it), readable in the registry (``transcript``, ``search``);
- ``OTHER``: the id names another agent's session (``codex:<id>`` in front of claude) - -32002.

An id is one id in every spelling the agent accepts: a UUID is looked up by its canonical form
(``registry.agents.spellings``: upper case, braces, ``urn:uuid:``, hyphens or not), so a deletion holds whatever
spelling the client writes, and the agent gets the spelling the registry holds; a stored form under a name the
agent had before (``fast-agent-acp:<id>``, ``Identity.others``) is the agent's own too.

A session the agent replaced (it answered ``session/new`` with an id held for an older conversation) or did not
keep is *retired*: its record is deleted with ``META_RETIRED`` saying why, so that the book tells it from a
user's deletion, and a later conversation under the same id is stored as the next generation
(``registry.agents.stored_id``). What the book holds is a cache of the read model's records (looked up once per
id, without catching up: a read never waits on a writer) kept current by this proxy's own observations and by
the registry's change stream (deletions made elsewhere); it holds at most ``MAX_ENTRIES`` ids.
"""

from __future__ import annotations

import collections
import enum
import threading
from typing import TYPE_CHECKING, Final, NamedTuple

from registry.agents import (
    KNOWN,
    Retired,
    canonical_id,
    generation,
    retired,
    source_gone,
    spellings,
    split_id,
    stored_id,
)
from registry.errors import SessionNotFound
from registry.model import SessionState

if TYPE_CHECKING:
    from registry.proxy.identity import Identity
    from registry.readmodel import ReadModel

__all__ = ["MAX_ENTRIES", "Book", "Entry", "Status"]

MAX_ENTRIES: Final = 100_000
_KNOWN_NAMES: Final = frozenset(known.name for known in KNOWN)


class Status(enum.Enum):
    LIVE = "live"
    KEPT = "kept"
    UNKNOWN = "unknown"
    UNKEPT = "unkept"
    DELETED = "deleted"
    GONE = "gone"
    OTHER = "other"


class Entry(NamedTuple):
    """What the book knows of one id: the stored id a new record for it gets or has, its state, and the agent's own
    id in the spelling the registry holds (as the client wrote it when it holds none)."""

    stored: str
    status: Status
    owner: str | None = None  # for OTHER: the agent it belongs to
    native: str = ""


class Book:
    """This agent's sessions as the proxy knows them (thread-safe)."""

    def __init__(self, read_model: ReadModel, identity: Identity) -> None:
        self._read_model = read_model
        self._identity = identity
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[str, Entry] = collections.OrderedDict()
        self.made_here: set[str] = set()  # sessions session/new or fork made on this connection
        self.turned: set[str] = set()  # sessions that had a turn on this connection

    @property
    def agent(self) -> str:
        return self._identity.name

    # -- ids --------------------------------------------------------------------------------------------

    def _own_part(self, wire: str) -> str:
        """The agent's own id in an id the client sent: its stored form (``agent:id``, or under a name the agent
        had before) is accepted too."""
        parts = split_id(wire)
        if parts is not None and (parts[0] == self.agent or parts[0] in self._identity.others):
            return parts[2]
        return wire

    def native(self, wire: str) -> str:
        """The agent's own id for an id the client sent, in the spelling the registry holds it under."""
        return self.entry(wire).native

    def entry(self, wire: str) -> Entry:
        """What the book knows of the session the client names ``wire`` (looked up in the read model once)."""
        parts = split_id(wire)
        if (
            parts is not None
            and parts[0] != self.agent
            and parts[0] not in self._identity.others
            and (parts[0] in _KNOWN_NAMES or self._foreign(wire))
        ):
            return Entry(wire, Status.OTHER, parts[0], wire)
        native = self._own_part(wire)
        key = canonical_id(native)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        found = self._look_up(native)
        if found.status is Status.UNKNOWN:
            return found  # nothing held: the spelling the agent answers with is the one recorded
        with self._lock:
            return self._remember(key, self._entries.get(key) or found)

    def stored(self, wire: str) -> str:
        """The stored id of the session ``wire`` names; ``SessionNotFound`` for another agent's."""
        entry = self.entry(wire)
        if entry.status is Status.OTHER:
            raise SessionNotFound(wire, f"session {wire!r} belongs to the agent {entry.owner}, not {self.agent}")
        return entry.stored

    def refusal(self, wire: str) -> SessionNotFound | None:
        """Why the proxy answers a request naming ``wire`` itself (-32002) instead of forwarding it, if it does."""
        entry = self.entry(wire)
        if entry.status is Status.OTHER:
            return SessionNotFound(wire, f"session {wire!r} belongs to the agent {entry.owner}, not {self.agent}")
        if entry.status is Status.DELETED:
            return SessionNotFound(wire, f"session {wire!r} was deleted in the registry")
        if entry.status is Status.GONE:
            return SessionNotFound(
                wire,
                f"session {wire!r} is no longer kept by {self.agent} (its files are gone); the registry keeps its "
                f"conversation: acp-registry transcript {entry.stored}",
            )
        return None

    def _foreign(self, wire: str) -> bool:
        state = self._read_model.get(wire)
        return state is not None and state.agent is not None and state.agent != self.agent

    def _look_up(self, native: str) -> Entry:
        for spelling in spellings(native):
            if self._read_model.get(stored_id(self.agent, spelling)) is not None:
                native = spelling
                break
        generation = 1
        while True:
            sid = stored_id(self.agent, native, generation)
            state = self._read_model.get(sid)
            if state is None:
                elsewhere = self._held_elsewhere(native) if generation == 1 else None
                return elsewhere or Entry(sid, Status.UNKNOWN, native=native)
            if not state.deleted:
                return Entry(sid, Status.GONE if source_gone(state) else Status.KEPT, native=native)
            why = retired(state)
            if why is None:
                return Entry(sid, Status.DELETED, native=native)
            following = stored_id(self.agent, native, generation + 1)
            if self._read_model.get(following) is None:
                if why is Retired.UNKEPT:
                    return Entry(sid, Status.UNKEPT, native=native)
                return Entry(following, Status.UNKNOWN, native=native)
            generation += 1

    def _held_elsewhere(self, native: str) -> Entry | None:
        """DELETED when a user deleted the session under another name of the agent (``Identity.others``): the
        deletion holds under every name."""
        for other in self._identity.others:
            for spelling in spellings(native):
                state = self._read_model.get(stored_id(other, spelling))
                if state is not None and state.deleted and retired(state) is None:
                    return Entry(stored_id(self.agent, native), Status.DELETED, native=native)
        return None

    def _remember(self, key: str, entry: Entry) -> Entry:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)
        return entry

    def renamed(self) -> None:
        """The agent's name was settled after sessions were looked up under another one (a session made before
        ``initialize``): what the book holds is looked up again under the name in use, live sessions kept live."""
        with self._lock:
            held, self._entries = list(self._entries.values()), collections.OrderedDict()
        for entry in held:
            if entry.status is Status.LIVE and entry.native:
                found = self._look_up(entry.native)
                with self._lock:
                    self._remember(canonical_id(entry.native), Entry(found.stored, Status.LIVE, native=found.native))

    # -- what happens -----------------------------------------------------------------------------------

    def set(self, native: str, stored: str, status: Status) -> None:
        with self._lock:
            self._remember(canonical_id(native), Entry(stored, status, native=native))

    def opened(self, native: str, *, made: bool) -> None:
        """The agent made (``made``) or opened ``native`` on this connection."""
        entry = self.entry(native)
        with self._lock:
            self._remember(canonical_id(native), Entry(entry.stored, Status.LIVE, native=entry.native))
            if made:
                self.made_here.add(entry.native)

    def closed(self, native: str) -> None:
        key = canonical_id(native)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.status is Status.LIVE:
                self._remember(key, entry._replace(status=Status.KEPT))

    def deleted(self, native: str) -> None:
        entry = self.entry(native)
        with self._lock:
            self._remember(canonical_id(native), Entry(entry.stored, Status.DELETED, native=entry.native))
            self.made_here.discard(entry.native)

    def changed(self, state: SessionState) -> None:
        """A change to one of the agent's sessions seen in the registry (from any process): a deletion, a later
        conversation under the same id (another proxy recorded it), or a retired session restored."""
        parts = split_id(state.session_id)
        if parts is None or parts[0] != self.agent:
            return
        key = canonical_id(parts[2])
        with self._lock:
            known = self._entries.get(key)
            if known is None:
                return
            known_generation = generation(known.stored)
            if not state.deleted:
                if parts[1] > known_generation or (parts[1] == known_generation and known.status is Status.UNKEPT):
                    status = Status.LIVE if known.status is Status.LIVE else Status.KEPT
                    self._remember(key, Entry(state.session_id, status, native=parts[2]))
                elif parts[1] == known_generation and known.status in (Status.KEPT, Status.GONE):
                    # its files gone from the agent, or back again
                    status = Status.GONE if source_gone(state) else Status.KEPT
                    self._remember(key, Entry(state.session_id, status, native=parts[2]))
                return
            if known.stored != state.session_id:
                return
            why = retired(state)
            if why is None:
                self._remember(key, known._replace(status=Status.DELETED))
            elif why is Retired.UNKEPT and known.status is not Status.LIVE:
                self._remember(key, known._replace(status=Status.UNKEPT))

    def live(self) -> list[str]:
        with self._lock:
            return [entry.native for entry in self._entries.values() if entry.status is Status.LIVE]
