"""The one place every command opens its store (which store: ``registry.cli.where``).

Commands that only read never create or initialise a store: a SQLite file that does not exist, or
one that is empty (0 bytes: a truncated file, or one another program just created), is refused with one line,
and nothing is written. The commands that record (``CREATES_STORE``, and ``demo --store``) create a store that
is not there, and its missing folders (private, 0700), and say so in one line on stderr - naming the folder too
when they made one for a store named by a URL, so that a typo in its path is seen at once.

Every way a store can fail to open - a bad URL, a missing psycopg, a file that is not a registry store, a server
that cannot be reached or refuses - is an ``InputError`` (exit 2) or ``StoreFormatError`` naming the store.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, Any, Final, Unpack, overload

from events.errors import StoreError, StoreFormatError
from events.factory import open_store, sqlite_file
from events.logger import settle as settle_logging
from events.store import EventStore
from registry.backends import backend_for
from registry.cli.errors import InputError
from registry.cli.start import started
from registry.cli.terminal import waiting
from registry.cli.where import CREATES_STORE, ENV_STORE, StoreLocation
from registry.reading import PageOptions, SessionPages
from registry.readmodel.guard import open_read_model

if TYPE_CHECKING:  # a command that opens one imports it; list opens SessionPages alone
    from registry.service import RegistryOptions, SessionRegistry

__all__ = ["catch_up_read_model", "check_url", "open_log", "open_registry"]

_ANNOUNCED: Final = ("--store", f"${ENV_STORE}", "default")
"""The origins of stores that are kept, hence worth a line when a command creates one (not the demo's own)."""


def _make_private_dirs(folder: str) -> list[str]:
    """Create ``folder`` and its missing parents 0700 (``os.makedirs`` gives the mode to the last one only);
    returns the folders created, outermost first."""
    missing: list[str] = []
    while not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if not os.path.isdir(path):
                raise InputError(f"cannot create the store's folder {path}: a file of that name exists") from None
        except OSError as exc:
            raise InputError(f"cannot create the store's folder {path}: {exc.strerror}") from exc
    return missing[::-1]


def _prepare(location: StoreLocation, *, create: bool) -> list[str]:
    """The checks made before opening: a SQLite file is there and not empty, or ``create`` makes its folder when it
    is missing (the folders created are returned, to be named and removed again if the store then fails to
    open)."""
    path = sqlite_file(location.url)
    if path is None:
        return []
    if create:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder) and location.origin != "default":
            check_url(location)  # a bad URL is said as such, before a folder is made for it
        return _make_private_dirs(folder)
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        if location.origin == "default":
            makers = ", ".join(CREATES_STORE[:-1]) + f" and {CREATES_STORE[-1]}"
            raise InputError(f"no store yet at {path}: nothing has been recorded ({makers} create it)") from None
        raise InputError(f"{path}: no such store (the file does not exist; {location.origin} names it)") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror}") from exc
    if size == 0 and os.path.isfile(path):
        raise InputError(f"{path} is empty (0 bytes): not a registry store, and left as it is (a truncated file?)")
    return []


def check_url(location: StoreLocation) -> None:
    """``InputError`` when the URL itself is bad (its scheme, path form or options), whether or not its store is
    there; creates and opens nothing."""

    if sqlite_file(location.url) is None:
        return  # the other kinds are checked by opening them
    try:
        open_store(location.url, create=False).close()
    except ValueError as exc:
        raise InputError(f"bad store URL: {exc}") from exc
    except StoreError:
        pass  # the URL is good; what is (or is not) at its path is the opener's to say


def open_log(location: StoreLocation, *, create: bool) -> EventStore:
    """Open the store; ``create=False`` (a command that only reads) never creates or initialises one, and
    ``create=True`` says on stderr when it did create one."""

    try:
        created = _prepare(location, create=create)
    except ValueError as exc:  # urllib's own refusals (an unmatched '[' in the host, a NUL in the path)
        raise InputError(f"bad store URL {location.url!r}: {exc}") from None
    try:
        store, new = _open(location, create=create)  # a read never creates a store (nor a PostgreSQL schema)
        settle_logging()  # a driver loaded for the store (psycopg) logs through logging by itself: set up now
        started()
        if new and location.origin in _ANNOUNCED:
            folder = f" and its folder {created[0]}" if created and location.origin != "default" else ""
            print(f"acp-registry: created a new store at {new}{folder}", file=sys.stderr, flush=True)
        return store
    except ModuleNotFoundError as exc:
        raise InputError(str(exc)) from exc
    except ValueError as exc:
        raise InputError(f"bad store URL: {exc}") from exc
    except StoreFormatError:
        raise
    except StoreError as exc:
        raise InputError(f"cannot open the store: {exc}") from exc
    except OSError as exc:
        raise InputError(f"cannot open the store {location.url}: {exc}") from exc
    finally:
        if created and not os.path.exists(sqlite_file(location.url) or ""):
            for folder in reversed(created):  # the store did not open: leave no empty folder behind
                with contextlib.suppress(OSError):
                    os.rmdir(folder)


def _open(location: StoreLocation, *, create: bool) -> tuple[EventStore, str | None]:
    """The store, and where it was created when this open created it (None: it was there)."""

    path = sqlite_file(location.url)
    if not create or location.url.lower().startswith("memory:"):
        return open_store(location.url, create=create), None
    if path is not None:
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        return open_store(location.url, create=True), path if new else None
    try:  # PostgreSQL: whether the schema holds a store is known only by asking the server
        return open_store(location.url, create=False), None
    except StoreError as exc:
        if "no store in schema" not in str(exc):  # not a missing store (no server, refused): said once, as met
            raise
    store = open_store(location.url, create=True)
    return store, backend_for(store).location


@overload
def open_registry(
    location: StoreLocation, facade: type[SessionRegistry], *, create: bool, **options: Unpack[RegistryOptions]
) -> SessionRegistry: ...
@overload
def open_registry(
    location: StoreLocation, facade: type[SessionPages], *, create: bool, **options: Unpack[PageOptions]
) -> SessionPages: ...
def open_registry(location: StoreLocation, facade: type[SessionPages], *, create: bool, **options: Any) -> SessionPages:
    """The ``facade`` on the store, made with ``options`` (it closes the store when it closes): a
    ``SessionRegistry``, or ``SessionPages`` for a command that only reads pages (the facade's writing, following and
    searching are then never loaded: a command imports the facade it uses). The overloads check ``options`` against
    the facade's keywords."""
    store = open_log(location, create=create)
    try:
        with _building(store):
            return facade(store, owns_store=True, **options)
    except BaseException:
        store.close()
        raise


def _building(store: EventStore) -> contextlib.AbstractContextManager[None]:
    """What a terminal shows while an open folds the log into the read model (a first open, after an import or an
    upgrade: seconds on a large store); nothing when the open is quick."""
    return waiting(lambda: f"bringing the read model up to the log ({store.head():,} events; the first open builds it)")


def catch_up_read_model(store: EventStore) -> None:
    """Fold what a command appended straight to the log (``import``, ``import-agents``) into the store's read model
    now, so that the next ``session/list`` of any process does not pay for it."""

    if store.read_only:
        return
    open_read_model(backend_for(store)).close()
