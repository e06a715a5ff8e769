"""At the same cost the search keeps the plan with the better TTFT (a relay fleet with a P90 of
2.89 s was kept over one of 1.79 s at the same $/hour); a cheaper plan still wins whatever its
TTFT, and a tie of both keeps the first found (the enumeration's order: deterministic)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pdd_plan.optimize.search import fixed_rate

pytestmark = pytest.mark.unit


def _plan(cost: float, p90: float, p99: float = 10.0):
    return SimpleNamespace(cost_per_hour=cost, p90=p90, p99=p99)


def _key(p, classes, rate, dc):
    return (p.p90, p.p99)


def _better(best, new):
    return fixed_rate.better(best, new, None, 1.0, "dc-a", key=_key)


def test_equal_cost_keeps_the_better_ttft_in_either_order():
    relay, plain = _plan(100.0, 2.89), _plan(100.0, 1.79)
    assert _better(relay, plain) is plain
    assert _better(plain, relay) is plain
    # within the tie tolerance is the same cost
    assert _better(relay, _plan(100.0 * (1 + 1e-12), 1.79)).p90 == 1.79


def test_a_cheaper_plan_wins_whatever_its_ttft():
    fast, cheap = _plan(100.0, 0.5), _plan(99.0, 9.0)
    assert _better(fast, cheap) is cheap
    assert _better(cheap, fast) is cheap
    assert _better(None, fast) is fast


def test_a_tie_of_cost_and_ttft_keeps_the_first():
    a, b = _plan(100.0, 1.0, 2.0), _plan(100.0, 1.0, 2.0)
    assert _better(a, b) is a
    # the P99 breaks a P90 tie
    assert _better(a, _plan(100.0, 1.0, 1.5)).p99 == 1.5
