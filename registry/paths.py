"""cwd normalisation: the same rule on write and on read, so a path names one set of sessions.

A cwd must be absolute, valid Unicode and at most ``MAX_PATH_BYTES`` (4095) UTF-8 bytes long. Duplicate
slashes, ``.`` and ``..`` segments and a trailing slash are folded lexically (``/work//app/./src/../`` is
``/work/app``), which never touches the file system. With ``resolve_symlinks`` the path is also resolved
through the file system (``os.path.realpath``), so a symlinked project and its target list the same sessions.
Case is kept: POSIX paths are case-sensitive.
"""

from __future__ import annotations

import os
import posixpath

from registry.errors import InvalidParams
from registry.limits import MAX_PATH_BYTES

__all__ = ["normalise_cwd"]


def normalise_cwd(path: object, *, field: str = "cwd", resolve_symlinks: bool = False) -> str:
    """The canonical form of an absolute directory path; ``InvalidParams`` says what is wrong."""
    if not isinstance(path, str):
        raise InvalidParams(f"{field} must be a string path, not {_kind(path)}", field=field)
    if not path:
        raise InvalidParams(f"{field} must be an absolute path, got an empty string", field=field)
    if "\x00" in path:
        raise InvalidParams(f"{field} must not contain a NUL character", field=field)
    try:
        size = len(path.encode())
    except UnicodeEncodeError:
        raise InvalidParams(f"{field} is not valid Unicode (it holds a lone surrogate)", field=field) from None
    if size > MAX_PATH_BYTES:
        raise InvalidParams(
            f"{field} is {size} bytes long; at most {MAX_PATH_BYTES} are allowed (PATH_MAX)", field=field
        )
    if not path.startswith("/"):
        raise InvalidParams(f"{field} must be an absolute path (starting with '/'), got {path!r}", field=field)
    canonical = posixpath.normpath(path)
    if canonical.startswith("//"):  # normpath keeps a leading '//' (POSIX allows it); we do not
        canonical = "/" + canonical.lstrip("/")
    if resolve_symlinks:
        canonical = os.path.realpath(canonical)
    return canonical


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__
