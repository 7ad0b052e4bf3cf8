"""What the fuzz suites share: how many examples to run, and hostile JSON values.

``make test`` runs each fuzz test with a small budget (under a minute for them all); the seed sweep
(``python -m benchmarks.fuzz_sweep``) sets ``ACP_REGISTRY_FUZZ_EXAMPLES`` high and runs them under many seeds.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES_ENV = "ACP_REGISTRY_FUZZ_EXAMPLES"


def fuzz_settings(examples: int) -> settings:
    """``examples`` in ``make test``; the sweep's count when it runs (it scales every suite alike)."""
    scale = os.environ.get(EXAMPLES_ENV)
    return settings(
        max_examples=int(scale) * examples // 100 if scale else examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )


# Text as clients really send it, and the edges: NUL, controls, astral characters, a BOM, RTL marks.
texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "\x00", "a\x00b", "\n", "\u202e", "\ufeff", "\U0001f600", "/", "//", "/..", "\\"]),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 1e308, 5e-324]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=10,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    """``depth`` arrays around ``leaf``, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value
