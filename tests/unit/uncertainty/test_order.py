"""Dominance between draws (the brackets' premise) and the robust check's bisection order."""

from __future__ import annotations

import pytest

from pdd_plan.uncertainty import paired, robust

pytestmark = pytest.mark.unit


def test_dominance_follows_each_inputs_direction():
    base = {"prefill_speed": 1.0, "decode_speed": 1.0, "kv_bytes": 1.0}
    faster = {**base, "prefill_speed": 1.1, "decode_speed": 1.1}
    more_bytes = {**base, "kv_bytes": 1.2}
    assert paired.dominates(faster, base) and not paired.dominates(base, faster)
    assert paired.dominates(base, more_bytes) and not paired.dominates(more_bytes, base)
    # faster but more bytes: neither is sure to be better
    mixed = {**faster, "kv_bytes": 1.2}
    assert not paired.dominates(mixed, base) and not paired.dominates(base, mixed)
    assert paired.dominates(base, base)


def test_unordered_inputs_must_be_equal_and_missing_ones_are_nominal():
    a = {"prefill_speed": 1.1, "prefix_hit": 0.05}
    b = {"prefill_speed": 1.0, "prefix_hit": 0.0}
    assert not paired.dominates(a, b)  # a prefix shift moves routing, not only speed
    assert paired.dominates({"prefill_speed": 1.1}, {"prefill_speed": 1.0, "prefix_hit": 0.0})
    assert paired.dominates({"line_rate": 1.2}, {})
    assert not paired.dominates({"kv_bytes": 1.2}, {})


def test_less_request_state_dominates_and_a_missing_one_is_not_nominal():
    small = {"prefill_speed": 1.0, "request_state_bytes": 0.0}
    big = {"prefill_speed": 1.0, "request_state_bytes": 2e7}
    assert paired.dominates(small, big) and not paired.dominates(big, small)
    assert "request_state_bytes" in paired.MOVES_GOODPUT  # in the goodput memo's key
    # its nominal is the model profile's value, unknown here: no order against a draw without it
    assert not paired.dominates({"prefill_speed": 1.0}, big)
    assert not paired.dominates(small, {"prefill_speed": 1.0})


@pytest.mark.parametrize("n", [1, 2, 7, 16, 64])
def test_bisection_order_is_a_permutation_middle_first(n):
    o = robust._order(n)
    assert sorted(o) == list(range(n))
    assert o[0] == (n - 1) // 2
