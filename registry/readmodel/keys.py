"""The key a read model's rows are sealed with, as one process holds it (``tables.Seal``; the key is the backend's:
``Backend.seal_key``).

A process reads the key once. Where the store keeps it in a file of its own (SQLite's ``<file>.seal-key``) that
file may be lost while the process serves: the next process to open the store makes a new key and rebuilds the
tables with it. A process that holds the old key then finds tables sealed with another one - and must take the new
key up rather than rebuild the tables back with its own, or two processes would rebuild the whole read model in
turn at each of their writes. So a fold writes rows only into tables sealed with the key it holds (``check``), a
fault of the seal first asks whether the key the store keeps now opens them (``adopt``), and a rebuild seals with
the key the store keeps now (``take_up``), never with one that was lost.
"""

from __future__ import annotations

from events.errors import StoreError
from registry.backend import Backend
from registry.errors import ReadModelFault
from registry.readmodel.tables import Seal

__all__ = ["HeldKey"]


class HeldKey:
    """The ``Seal`` a read model seals and opens rows with, following the key its backend keeps."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.seal = Seal(backend.seal_key())

    def take_up(self) -> None:
        """Seal with the key the store keeps now (the key file read again; a lost one this process holds is put
        back)."""
        key = self._backend.current_seal_key()
        if Seal(key).key_id != self.seal.key_id:
            self.seal = Seal(key)

    def check(self, sealed: object) -> None:
        """Rows are folded only into tables sealed (``sealed``: their key's id, as ``rm_meta`` holds it) with the key
        held: another key is taken up when the store keeps it now, else a ``ReadModelFault`` (they are rebuilt)."""
        if type(sealed) is not int or sealed == self.seal.key_id:
            return
        try:
            self.take_up()
        except StoreError as exc:  # a key file refused now: the append commits, the tables wait
            raise ReadModelFault(str(exc)) from None
        if sealed != self.seal.key_id:
            raise ReadModelFault("its rows are sealed with another key (the store's seal key was replaced or lost)")

    def adopt(self, sealed: object) -> bool:
        """Whether tables sealed with ``sealed``, which is not the key held, are sealed with the key the store keeps
        now (then it is held from now on, and they serve as they are)."""
        if type(sealed) is not int or sealed == self.seal.key_id:
            return False
        try:
            self.take_up()
        except StoreError:
            return False  # a key file refused now: the rebuild says so
        return sealed == self.seal.key_id
