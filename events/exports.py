"""A package's public names, declared once and loaded when first read (PEP 562).

The declaration is the package's ``if TYPE_CHECKING:`` block (``typing.TYPE_CHECKING``) of ``from MODULE import NAME as
NAME`` lines: a type checker reads it as plain re-exports (real types; a misspelled name is an error, as the package
defines no ``__getattr__`` it can see), and at run time ``lazy_names`` reads the same lines from the package's source
when a name is first asked for - ``__all__`` (in ruff's order) and each name's module follow from them. ``import
events`` and ``import registry`` stay light: each public name imports its own module the first time it is used.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["declared", "lazy_names"]

_BLOCK: Final = re.compile(r"^if (?:\w+\.)?TYPE_CHECKING:[^\n]*\n((?:[ \t]+[^\n]*\n|[ \t]*\n)+)", re.M)
_FROM: Final = re.compile(r"from\s+([\w.]+)\s+import\s+(\([^)]*\)|[^\n]*)")


def declared(source: str) -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block of a package's ``source`` re-exports -> the module it comes from.
    Every name must be re-exported as itself (``NAME as NAME``): anything else in the block is refused."""
    found: dict[str, str] = {}
    block = _BLOCK.search(source)
    if block is None:
        raise ValueError("no `if TYPE_CHECKING:` block declares the package's names")
    for module, names in _FROM.findall(block.group(1)):
        for part in names.strip("()").split(","):
            words = part.split("#")[0].split()
            if not words:
                continue
            if len(words) != 3 or words[1] != "as" or words[0] != words[2]:
                raise ValueError(f"{module}: {' '.join(words)!r} is not re-exported as itself (NAME as NAME)")
            found[words[0]] = module
    return found


def _ruff_order(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def lazy_names(
    package: str, source_file: str, namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``: a declared name is read from its module and kept in
    ``namespace`` (the package's globals), so the next read is a plain look-up; ``__all__`` is the declared names."""
    homes: dict[str, str] = {}

    def declarations() -> dict[str, str]:
        if not homes:
            with open(source_file, encoding="utf-8") as file:
                homes.update(declared(file.read()))
        return homes

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = sorted(declarations(), key=_ruff_order)
        else:
            home = declarations().get(name)
            if home is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *declarations()})

    return __getattr__, __dir__
