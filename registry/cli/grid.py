"""Plain box tables drawn line by line: the sessions tables of ``list`` and ``replay``, at any number of rows, and
``show``'s key/value table.

rich's ``Table`` measures and renders every cell through its whole layout machinery: ``replay --all`` over many
sessions spent far longer drawing than ``--json`` spent encoding (docs/benchmarks.md). Session rows are
simple - short fixed columns and two that fold - so they are laid out here once per table and each row is
formatted with string operations, in the same look (rich's heavy-head box) and by the same rules: no line wider
than the width, folded columns folded where rich's wrap folds them (a word longer than its column is cut),
columns never narrower than their header.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from typing import Final

import msgspec

from registry.cli.terminal import cells as _cells
from registry.cli.terminal import narrow

__all__ = ["Column", "breaks", "fold", "grid_lines"]

_TOP: Final = ("┏", "━", "┳", "┓")
_HEAD: Final = "┃"
_UNDER_HEAD: Final = ("┡", "━", "╇", "┩")
_BODY: Final = "│"
_SECTION: Final = ("├", "─", "┼", "┤")
_BOTTOM: Final = ("└", "─", "┴", "┘")
_LIGHT_TOP: Final = ("┌", "─", "┬", "┐")
_WORD: Final = r"\s*\S+\s*"
"""A word as rich's wrap sees it: the spaces before it (at the start of a line) and after it."""


class Column(msgspec.Struct, frozen=True):
    header: str
    right: bool = False
    """Right-justified (counts)."""
    ratio: int = 0
    """0: as wide as its widest line (never folded); n: shares the room left, n parts of it, folding its text."""


def _rule(widths: Sequence[int], parts: tuple[str, str, str, str]) -> str:
    left, line, cross, right = parts
    return left + cross.join(line * (w + 2) for w in widths) + right


def grid_lines(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    title: str | None = None,
    sections: frozenset[int] = frozenset(),
    headless: bool = False,
) -> Iterator[str]:
    """The table's lines (no newlines): ``title``, the header, each row (a cell's ``\\n`` starts a line of its
    own), a rule after each row index in ``sections``. Cells are plain text, already escaped. ``headless``: no
    header, a light top rule, and the title padded to the table's width (as rich draws a key/value table)."""
    widths = _widths(columns, rows, width)
    if title is not None:
        yield _pad(title, sum(widths) + 3 * len(widths) + 1, False) if headless else title
    if headless:
        yield _rule(widths, _LIGHT_TOP)
    else:
        yield _rule(widths, _TOP)
        yield (
            _HEAD + _HEAD.join(f" {_pad(c.header, w, c.right)} " for c, w in zip(columns, widths, strict=True)) + _HEAD
        )
        yield _rule(widths, _UNDER_HEAD)
    for number, row in enumerate(rows):
        cells = [
            fold(cell, w) if c.ratio else cell.split("\n") for c, cell, w in zip(columns, row, widths, strict=True)
        ]
        for line in range(max(map(len, cells))):
            parts = (
                _pad(cell[line] if line < len(cell) else "", w, c.right)
                for c, cell, w in zip(columns, cells, widths, strict=True)
            )
            yield _BODY + " " + f" {_BODY} ".join(parts) + " " + _BODY
        if number in sections and number < len(rows) - 1:
            yield _rule(widths, _SECTION)
    yield _rule(widths, _BOTTOM)


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    natural = [_cells(c.header) for c in columns]
    for row in rows:
        for i, cell in enumerate(row):
            for line in cell.split("\n"):
                size = _cells(line)
                natural[i] = max(natural[i], size)
    room = width - (3 * len(columns) + 1) - sum(n for c, n in zip(columns, natural, strict=True) if not c.ratio)
    flexible = [i for i, c in enumerate(columns) if c.ratio]
    widths = list(natural)
    if sum(natural[i] for i in flexible) <= room:
        return widths
    # Share the room by ratio; a column that needs less than its share keeps what it needs, the rest re-shared.
    left = list(flexible)
    while left:
        parts = sum(columns[i].ratio for i in left)
        share = {i: max(room * columns[i].ratio // parts, _cells(columns[i].header)) for i in left}
        fits = [i for i in left if natural[i] <= share[i]]
        if not fits:
            for i in left:
                widths[i] = share[i]
            break
        for i in fits:
            widths[i] = natural[i]
            room -= natural[i]
            left.remove(i)
    return widths


def _pad(text: str, width: int, right: bool) -> str:
    gap = width - _cells(text)
    return (" " * gap + text if right else text + " " * gap) if gap > 0 else text


def fold(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` cells, broken where rich's wrap breaks them (``rich._wrap.divide_line``): a word
    with the spaces after it goes whole to the next line when it does not fit, a word longer than a line is cut,
    spaces at the start of a paragraph are kept, spaces at a break are not."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        if _cells(paragraph) <= width:  # no word reaches past the line's end: no break (``breaks`` finds none)
            lines.append(paragraph.rstrip())
            continue
        bounds = [0, *breaks(paragraph, width), len(paragraph)]
        lines += [paragraph[a:b].rstrip() for a, b in itertools.pairwise(bounds)]
    return lines


def breaks(paragraph: str, width: int) -> list[int]:
    """Where ``fold`` breaks a paragraph (no newline in it) into lines of at most ``width`` cells."""
    found: list[int] = []
    used = 0
    for match in re.finditer(_WORD, paragraph):
        start, word = match.start(), match.group()
        size = _cells(word.rstrip())
        if width - used >= size:
            used += _cells(word)
        elif size > width:
            chunks = _chop(word, width)
            for chunk in chunks[:-1]:
                if start:
                    found.append(start)
                start += len(chunk)
            if start:
                found.append(start)
            used = _cells(chunks[-1])
        elif used and start:
            found.append(start)
            used = _cells(word)
    return found


def _chop(word: str, width: int) -> list[str]:
    """``word`` in pieces of at most ``width`` cells (at least one character each)."""
    pieces: list[str] = []
    while _cells(word) > width:
        cut = _cut(word, width)
        pieces.append(word[:cut])
        word = word[cut:]
    return [*pieces, word]


def _cut(word: str, width: int) -> int:
    """How many characters of ``word`` fill ``width`` cells (at least one)."""
    if narrow(word):
        return max(width, 1)
    from rich.cells import cell_len  # noqa: PLC0415 - wide or combining characters

    used = 0
    for index, char in enumerate(word):
        used += cell_len(char)
        if used > width:
            return max(index, 1)
    return len(word)
