"""What is derived from the log, and how it is served: the ``SessionRegistry`` facade, its read model, the ACP
shapes it answers with, the change stream's items, and the errors.

The public surface is the ``from ... import NAME as NAME`` lines of the ``TYPE_CHECKING`` block below, declared
once: a type checker reads them, and at run time ``__all__`` and each name's module follow from them
(``events.exports``); ``tests/public_api.txt`` lists them, so a change to them is a visible decision. Modules not
re-exported here (``registry.readmodel``, ``registry.projection``, ``registry.cursor``, ``registry.snapshot``,
...) are importable on their own and documented, but their insides may change between versions.
``import registry`` stays light: its names load when first read (``from registry import SessionRegistry``
loads the facade), reactivex with the first change stream, psycopg with the first PostgreSQL store.
"""

__version__ = "0.2.0"

import events as _events

if getattr(_events, "__distribution__", None) != "acp-session-registry":  # pragma: no cover - tested in a subprocess
    raise ImportError(
        f"acp-session-registry needs its own top-level package 'events', but 'import events' found "
        f"{getattr(_events, '__file__', None) or _events!r}: another distribution installs a package of that name "
        "(the PyPI package 'Events', which opensearch-py 2.6 to 3.2 depends on). Install acp-session-registry in a "
        "virtual environment of its own, or remove the other one (pip uninstall Events)"
    )

import typing as _typing

from events.exports import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    __all__: list[str]  # the names below, in ruff's order (events.exports)
    from events.errors import RegistryError as RegistryError
    from registry.diffs import Added as Added
    from registry.diffs import ListChange as ListChange
    from registry.diffs import Removed as Removed
    from registry.diffs import SessionInfoUpdate as SessionInfoUpdate
    from registry.diffs import SessionNotification as SessionNotification
    from registry.diffs import Updated as Updated
    from registry.errors import InvalidCursor as InvalidCursor
    from registry.errors import InvalidParams as InvalidParams
    from registry.errors import MethodNotFound as MethodNotFound
    from registry.errors import RpcError as RpcError
    from registry.errors import SessionDeletedError as SessionDeletedError
    from registry.errors import SessionExists as SessionExists
    from registry.errors import SessionNotFound as SessionNotFound
    from registry.errors import SubscriberTooSlow as SubscriberTooSlow
    from registry.errors import rpc_error as rpc_error
    from registry.fold import Change as Change
    from registry.follow import Following as Following
    from registry.model import ListSessionsResult as ListSessionsResult
    from registry.model import SessionInfo as SessionInfo
    from registry.model import SessionState as SessionState
    from registry.paths import normalise_cwd as normalise_cwd
    from registry.search.hits import SearchHit as SearchHit
    from registry.search.hits import SearchPage as SearchPage
    from registry.search.hits import Snippet as Snippet
    from registry.service import SessionRegistry as SessionRegistry
    from registry.transcripts import Transcript as Transcript
else:  # each name loads its module when first read (events.exports): ``import registry.cli`` (every command) or
    # ``import registry.errors`` does not pay for the whole facade, and ``acp-registry proxy`` starts its agent
    # before it loads what only the relay needs
    __getattr__, __dir__ = _lazy_names(__name__, __file__, globals())
