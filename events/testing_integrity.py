"""The store contract's tests of damaged logs: a corrupt record reported at its position, the integrity chain
linking every record, ``verify`` finding a changed, a removed and a moved record. A backend whose stored tables
can be edited from outside overrides ``tamper``; without it these tests skip."""

from __future__ import annotations

import msgspec
import pytest

from events.chain import GENESIS, LINK_SIZE
from events.codec import encode_event
from events.errors import CorruptEventError
from events.model import SessionCreated
from events.store import EventStore
from events.testing_processes import _activity
from events.verify import verify_log

__all__ = ["IntegrityContract"]


class IntegrityContract:
    """What a store promises about damaged records (mixed into ``events.testing.StoreContract``)."""

    def tamper(self, store: EventStore, statement: str, params: tuple[object, ...] = ()) -> None:
        """Run ``statement`` (SQL on the tables ``events``, ``streams``..., ``?`` parameters) on the stored log
        from outside the store (backends that can be edited so override this)."""
        pytest.skip(f"{type(store).__name__} cannot be edited from outside")

    def corrupt(self, store: EventStore, position: int) -> None:
        """Damage the stored bytes of one record."""
        self.tamper(store, "UPDATE events SET data = ? WHERE position = ?", (b"\xc1\xff\x00", position))

    # -- damaged records ------------------------------------------------------------------------------

    def test_a_corrupt_record_is_reported_with_its_position(self, store: EventStore) -> None:
        positions = [p for n in range(4) for p in store.append("s", [_activity(n)])]
        self.corrupt(store, positions[2])
        with pytest.raises(CorruptEventError) as caught:
            store.read()
        assert caught.value.position == positions[2]
        assert str(positions[2]) in str(caught.value)
        assert [r.position for r in store.read(limit=2)] == positions[:2]
        for read in (store.scan, store.iter_events):
            seen: list[int] = []
            with pytest.raises(CorruptEventError) as caught:
                seen.extend(e.position for e in read(0, batch=2))
            assert caught.value.position == positions[2] and seen == positions[:2]
        report = verify_log(store)
        assert [p.position for p in report.problems] == [positions[2]]
        assert report.events == 3

    # -- the integrity chain ---------------------------------------------------------------------------

    def test_each_record_carries_a_link_of_the_chain(self, store: EventStore) -> None:
        positions = [p for n in range(6) for p in store.append(f"s{n % 2}", [_activity(n), _activity(n + 1)])]
        assert store.chain_at(0) == GENESIS
        chain = [store.chain_at(p) for p in positions]
        assert all(isinstance(value, bytes) and len(value) == LINK_SIZE for value in chain)
        assert len(set(chain)) == len(chain)
        assert store.chain_at(positions[-1] + 1) is None
        stored = store.stored_records()
        assert [r.position for r in stored] == positions and [r.chain for r in stored] == chain
        previous, rule = GENESIS, store.chain_rule
        for r in stored:  # a function of the stored records alone: the same log gives the same chain anywhere
            previous = rule.link(previous, r.position, r.session_id, r.version, r.event_id, r.recorded_at, r.data)
            assert r.chain == previous
        report = verify_log(store, batch=5)
        assert report.healthy and report.chained and report.events == len(positions)

    def test_verify_finds_a_changed_a_removed_and_a_moved_record(self, store: EventStore) -> None:
        created = SessionCreated(cwd="/work/a", at=1, title="hello")
        first = store.append("a", [created, _activity(1), _activity(2)])
        middle = [p for n in range(3) for p in store.append(f"b{n}", [_activity(n)])]
        last = [p for n in range(4) for p in store.append(f"c{n}", [_activity(n)])]
        # One byte of a stored title: the record still decodes, as another valid event.
        self.tamper(
            store,
            "UPDATE events SET data = ? WHERE position = ?",
            (encode_event(msgspec.structs.replace(created, title="hellp")), first[0]),
        )
        self.tamper(store, "DELETE FROM events WHERE position = ?", (middle[1],))
        for old, new in ((last[1], -1), (last[2], last[1]), (-1, last[2])):  # two records trade places
            self.tamper(store, "UPDATE events SET position = ? WHERE position = ?", (new, old))
        edited = store.read(limit=1)[0].event
        assert isinstance(edited, SessionCreated) and edited.title == "hellp"
        report = verify_log(store, batch=3)
        # A moved record breaks three links: its own two places' and that of the record after them.
        moved = [last[1], last[2], last[3]]
        assert [p.position for p in report.problems] == [first[0], middle[2], *moved], report.problems
        assert all("integrity link does not match" in p.problem for p in report.problems)
