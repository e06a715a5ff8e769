"""`largest_meeting` finds the batch a plain bisection finds, on any monotone step law."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_plan.common.search import largest_meeting

pytestmark = pytest.mark.unit


def _bisection(step, target, lo, hi):
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if step(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo


LAWS = {
    "linear": lambda b: 0.02 + 1e-5 * b,
    "convex": lambda b: 0.01 + 1e-9 * b**2,
    "concave": lambda b: math.sqrt(b),
    "plateaus": lambda b: float(b // 97),  # equal steps over runs of batches
    "kinked": lambda b: 0.03 if b < 3000 else 0.03 + 1e-4 * (b - 3000),
}


@pytest.mark.parametrize("law", sorted(LAWS))
@given(lo=st.integers(1, 5000), width=st.integers(2, 60000), frac=st.floats(0.0, 1.0))
@settings(max_examples=60, deadline=None)
def test_the_bisections_batch_on_monotone_laws(law, lo, width, frac):
    step = LAWS[law]
    hi = lo + width
    if not step(lo) < step(hi):
        return
    target = step(lo) + frac * (step(hi) - step(lo))
    if target >= step(hi):
        return
    assert largest_meeting(step, target, lo, hi) == _bisection(step, target, lo, hi)


def test_a_linear_law_takes_a_few_steps_not_a_bisections_many():
    calls: list[int] = []

    def step(b: int) -> float:
        calls.append(b)
        return 0.02 + 1e-5 * b

    # 6,899 batches (the default's decode cap): a bisection times 13; on a straight line the
    # chord lands on the answer, so two rounds of two steps (and the ends) at most
    got = largest_meeting(step, step(4321) + 1e-9, 1, 6899)
    assert got == 4321
    assert len(calls) - 1 <= 6, calls


def test_a_law_that_defeats_the_chord_still_ends_within_twice_the_bisections():
    calls: list[int] = []

    def step(b: int) -> float:  # all the rise in the last batch: the chord points at lo
        calls.append(b)
        return 0.0 if b < 60000 else 1.0

    assert largest_meeting(step, 0.5, 1, 60000) == 59999
    assert len(calls) <= 2 * 2 * math.ceil(math.log2(60000)) + 4
