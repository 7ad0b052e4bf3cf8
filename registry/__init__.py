"""What is derived from the log, and how it is served: the ``SessionRegistry`` facade, its read model, the ACP
shapes it answers with, the change stream's items, and the errors.

The public surface is ``__all__`` below (a test lists it, so a change to it is a visible decision). Modules not
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

from typing import TYPE_CHECKING

from events.exports import lazy_names

if TYPE_CHECKING:
    from events.errors import RegistryError
    from registry.diffs import Added, ListChange, Removed, SessionInfoUpdate, SessionNotification, Updated
    from registry.errors import (
        InvalidCursor,
        InvalidParams,
        MethodNotFound,
        RpcError,
        SessionDeletedError,
        SessionExists,
        SessionNotFound,
        SubscriberTooSlow,
        rpc_error,
    )
    from registry.fold import Change
    from registry.follow import Following
    from registry.model import ListSessionsResult, SessionInfo, SessionState
    from registry.paths import normalise_cwd
    from registry.search.hits import SearchHit, SearchPage, Snippet
    from registry.service import SessionRegistry
    from registry.transcripts import Transcript

__all__ = [
    "Added",
    "Change",
    "Following",
    "InvalidCursor",
    "InvalidParams",
    "ListChange",
    "ListSessionsResult",
    "MethodNotFound",
    "RegistryError",
    "Removed",
    "RpcError",
    "SearchHit",
    "SearchPage",
    "SessionDeletedError",
    "SessionExists",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionNotFound",
    "SessionNotification",
    "SessionRegistry",
    "SessionState",
    "Snippet",
    "SubscriberTooSlow",
    "Transcript",
    "Updated",
    "normalise_cwd",
    "rpc_error",
]

_HOMES = {
    "Added": "registry.diffs",
    "Change": "registry.projection",
    "Following": "registry.follow",
    "InvalidCursor": "registry.errors",
    "InvalidParams": "registry.errors",
    "ListChange": "registry.diffs",
    "ListSessionsResult": "registry.model",
    "MethodNotFound": "registry.errors",
    "RegistryError": "events.errors",
    "Removed": "registry.diffs",
    "RpcError": "registry.errors",
    "SearchHit": "registry.search.hits",
    "SearchPage": "registry.search.hits",
    "SessionDeletedError": "registry.errors",
    "SessionExists": "registry.errors",
    "SessionInfo": "registry.model",
    "SessionInfoUpdate": "registry.diffs",
    "SessionNotFound": "registry.errors",
    "SessionNotification": "registry.diffs",
    "SessionRegistry": "registry.service",
    "SessionState": "registry.model",
    "Snippet": "registry.search.hits",
    "SubscriberTooSlow": "registry.errors",
    "Transcript": "registry.transcripts",
    "Updated": "registry.diffs",
    "normalise_cwd": "registry.paths",
    "rpc_error": "registry.errors",
}
"""Each public name -> the module it lives in, imported when the name is first read (PEP 562): ``import
registry.cli`` (every ``acp-registry`` command) or ``import registry.errors`` does not pay for the whole facade,
and ``acp-registry proxy`` starts its agent before it loads what only the relay needs."""


__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals(), __all__)
