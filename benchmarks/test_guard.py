"""CI's hold on the speed figures: each ratio ``benchmarks.guard`` counts, against its bound (``make guard``, the
last step of ``make test`` but the idle-marked tests).

The figures are ratios of instructions counted by valgrind, not of times: the same within 0.3% from run to run
whatever else the machine does (measured beside eight busy loops on the 2 cores too). So each bound sits at
``MARGIN`` times the figure measured when it was set - room for a changed path or a dependency's patch release, no
room for noise there is not - and a 1.5x regression of any figure goes over it, on an idle or a busy machine,
which ``test_a_figure_made_slower_fails_its_bound`` shows each run: it adds half as much work again to each
figure's own (the reference loop, as many instructions) and sees each go over.

The bounds are a ratchet: when the code makes a figure lower for good, the slowdown test fails (its 1.5x would pass
under the bound) and the bound comes down to ``MARGIN`` times the new figure, with the figures that made it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from benchmarks.guard import FIGURES, Guard, Measured

MARGIN: Final = 1.2
"""A bound over the figure it was set from."""

MEASURED: Final = {
    # python -m benchmarks.guard, 2026-12-07 17:59 UTC, idle (the same to 0.03% in runs at a load of 6, two at once);
    # list again at 21:10 UTC after the third start-up pass (264.2M instructions / python -c pass's 89.7M).
    "stream_1": 6.76,
    "stream_10": 16.49,
    "list": 2.95,
    "show": 1.01,
    "search": 2.50,
}
"""The figures the bounds were set from."""

BOUNDS: Final = {name: round(figure * MARGIN, 2) for name, figure in MEASURED.items()}
"""Each figure's highest allowed ratio."""

SLOWED: Final = 1.5
"""The regression every bound is to catch."""


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Measured, dict[str, float]]:
    """The figures, and the figures with every figure's own work made ``SLOWED`` times larger (each in its own
    child: ``show --json``, ``show``'s reference, is not slowed, nor the reference loop, nor ``python -c pass``)."""
    return Guard(Path(tmp_path_factory.mktemp("guard"))).run(dict.fromkeys(FIGURES, SLOWED))


@pytest.fixture(scope="module")
def measured(counted: tuple[Measured, dict[str, float]]) -> Measured:
    return counted[0]


@pytest.fixture(scope="module")
def slowed(counted: tuple[Measured, dict[str, float]]) -> dict[str, float]:
    return counted[1]


def test_every_figure_has_a_bound() -> None:
    assert set(BOUNDS) == set(FIGURES)


@pytest.mark.parametrize("name", FIGURES)
def test_the_figure_keeps_within_its_bound(measured: Measured, name: str) -> None:
    figure = measured.figures()[name]
    assert figure <= BOUNDS[name], f"{name}: {figure:.2f}x its reference, bound {BOUNDS[name]}x"


@pytest.mark.parametrize("name", FIGURES)
def test_a_figure_made_slower_fails_its_bound(measured: Measured, slowed: dict[str, float], name: str) -> None:
    """The slowed figure went up by the work added, and over its bound."""
    figure, bound = measured.figures()[name], BOUNDS[name]
    assert slowed[name] == pytest.approx(figure * SLOWED, rel=0.02), f"{name}: {figure:.2f} slowed to {slowed[name]}"
    assert slowed[name] > bound, f"{name} made {SLOWED}x slower: {slowed[name]:.2f}x, within its bound {bound}x"
