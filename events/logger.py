"""A module's logger that loads ``logging`` when it first writes a record, not when the module is imported.

``logging`` brings ``traceback``, ``tokenize``, ``string`` and ``weakref`` with it: a fifth of what ``acp-registry
list`` would import, for warnings a read almost never writes. ``Logger(name)`` stands for ``logging.getLogger(name)``
and hands each call to it (records name the caller's line, as a logger of its own would). A process that configures
logging (``configure``) before anything is logged has its setup applied at the first record of such a logger, or at
once when ``logging`` is loaded already (``settle`` applies it as soon as a library has loaded ``logging``, and
may log by itself).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

__all__ = ["Logger", "configure", "settle"]

_pending: list[Callable[[], None]] = []


def configure(setup: Callable[[], None]) -> None:
    """Run ``setup`` (e.g. ``logging.basicConfig``) before the first record: now if ``logging`` is loaded."""
    _pending.append(setup)
    settle()


def settle() -> None:
    """Apply the setup ``configure`` deferred if ``logging`` is loaded by now (by a library that may log)."""
    if "logging" in sys.modules:
        _apply()


def _apply() -> None:
    while _pending:
        _pending.pop(0)()


class Logger:
    """``logging.getLogger(name)``, looked up (and ``logging`` imported) at the first record."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _logger(self) -> logging.Logger:
        import logging  # noqa: PLC0415 - the point of this class

        _apply()
        return logging.getLogger(self.name)

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger().debug(msg, *args, stacklevel=2, **kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger().info(msg, *args, stacklevel=2, **kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger().warning(msg, *args, stacklevel=2, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger().error(msg, *args, stacklevel=2, **kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger().exception(msg, *args, stacklevel=2, **kwargs)
