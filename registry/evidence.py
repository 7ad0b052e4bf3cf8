"""Evidence kept: a log found shorter than what was derived from it is recorded before anything is rebuilt.

Derived data remembers how far the log reached: the read model's checkpoint (with the log's chain link there) and
each kept snapshot's position. When the log holds less - records cut from its end, a file restored from an older
backup - the derived data is rebuilt from the log as it is now, and so would forget what it had seen. Before that
happens the finding is recorded *in the store*, as an ``IntegrityEvent`` (what saw further, the position and chain
link it had seen, the log's head, when), and stated on stderr by the read that found it. Every later ``verify``
reports it (exit 1), and ``stats`` lists it, until someone who looked acknowledges it
(``acp-registry verify --acknowledge``).

Where it lives (the store's backend, ``registry.backend.Backend.record``, keeps and states it): a table
``acp_integrity`` beside the log in the SQLite file or PostgreSQL schema - not an ``rm_*`` table, so no rebuild
ever drops it. A store that cannot be written (read-only) only states it; ``memory://`` keeps it in the
backend object, for as long as the registry that opened it lives.
"""

from __future__ import annotations

import time

import msgspec

__all__ = ["IntegrityEvent", "describe", "log_shorter"]


class IntegrityEvent(msgspec.Struct, frozen=True, rename="camel"):
    found_at: int
    """When it was found (epoch ns)."""
    seen_by: str
    """What had seen the log reach further: ``read model`` or ``kept snapshot``."""
    position: int
    """The position it had seen."""
    chain: str
    """The log's chain link it had recorded at ``position`` (hex; "" when unknown)."""
    head: int
    """The log's head when it was found."""
    acknowledged: bool = False


def log_shorter(seen_by: str, position: int, head: int, chain: str = "") -> IntegrityEvent:
    """The finding that ``seen_by`` had seen the log reach ``position`` (with ``chain`` there) but it holds less."""
    return IntegrityEvent(time.time_ns(), seen_by, position, chain, head)


def describe(event: IntegrityEvent) -> str:
    """One line for people."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(event.found_at / 1e9))
    link = f" (chain link {event.chain[:16]})" if event.chain else ""
    return (
        f"{when}: the {event.seen_by} had seen the log reach position {event.position}{link}; the log then held "
        f"{'up to position ' + str(event.head) if event.head < event.position else 'other records there'}"
    )
