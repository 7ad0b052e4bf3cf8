"""A package's public names, declared once and loaded when first read (PEP 562).

The declaration is the package's ``if TYPE_CHECKING:`` block (``typing.TYPE_CHECKING``) of ``from MODULE import NAME as
NAME`` lines: a type checker reads it as plain re-exports (real types; a misspelled name is an error, as the package
defines no ``__getattr__`` it can see), and at run time ``lazy_names`` reads the same lines from the package's source
when a name is first asked for - ``__all__`` (in ruff's order) and each name's module follow from them. ``import
events`` and ``import registry`` stay light: each public name imports its own module the first time it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["declared", "lazy_names"]


def declared(source: str) -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block of a package's ``source`` re-exports -> the module it comes from.
    Every name is re-exported as itself, one a line (``from MODULE import NAME as NAME``, as ruff keeps them): any
    other import in the block is refused."""
    found: dict[str, str] = {}
    lines = iter(source.splitlines())
    for line in lines:
        if line.startswith("if") and line.rstrip().endswith("TYPE_CHECKING:"):
            break
    else:
        raise ValueError("no `if TYPE_CHECKING:` block declares the package's names")
    for line in lines:
        if line and not line[0].isspace():
            break  # the block's end
        words = line.split("#")[0].split()
        if not words or words[0] != "from":
            continue  # a blank line, a comment, an annotation of __all__
        if len(words) != 6 or words[2] != "import" or words[4] != "as" or words[3] != words[5]:
            raise ValueError(f"{line.strip()!r}: a name is declared as `from MODULE import NAME as NAME`, one a line")
        found[words[3]] = words[1]
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
