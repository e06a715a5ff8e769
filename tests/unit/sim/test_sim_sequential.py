"""The early-stopping rule of verification replays (sim.sequential) against hand figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.sim import sequential

pytestmark = pytest.mark.unit


def test_t_quantile_matches_tables():
    # Student t tables: t_{0.975, 9} = 2.262, t_{0.995, 19} = 2.861, t_{0.9995, 9} = 4.781
    assert sequential.t_quantile(0.975, 9) == pytest.approx(2.262, abs=2e-3)
    assert sequential.t_quantile(0.995, 19) == pytest.approx(2.861, abs=2e-3)
    assert sequential.t_quantile(0.9995, 9) == pytest.approx(4.781, rel=5e-3)
    # many degrees of freedom: the normal quantile
    assert sequential.t_quantile(0.975, 10_000) == pytest.approx(1.95996, abs=1e-3)


def test_level_is_bonferroni_over_checks_and_looks():
    assert sequential.level(3, 1) == pytest.approx(0.01 / 6)
    assert sequential.level(3, 2) == pytest.approx(0.01 / 12)


def test_wilson_interval_by_hand():
    # 10 batches of 100, independent-looking: 950 of 1000 true, 95 in every batch (VIF 1)
    ind = np.tile(np.r_[np.ones(95, bool), np.zeros(5, bool)], 10)
    lo, hi = sequential.interval(ind, 100, 0.025)
    t = sequential.t_quantile(0.975, 9)
    n, f = 1000.0, 0.95
    centre = (f + t * t / (2 * n)) / (1 + t * t / n)
    half = t / (1 + t * t / n) * math.sqrt(f * (1 - f) / n + t * t / (4 * n * n))
    assert (lo, hi) == pytest.approx((centre - half, centre + half))
    assert lo < 0.95 < hi


def test_autocorrelation_widens_the_interval():
    # the same share (95%) with every miss bunched in one batch: batch means vary, VIF > 1
    spread = np.tile(np.r_[np.ones(95, bool), np.zeros(5, bool)], 10)
    bunched = np.ones(1000, bool)
    bunched[:50] = False
    lo_s, hi_s = sequential.interval(spread, 100, 0.005)
    lo_b, hi_b = sequential.interval(bunched, 100, 0.005)
    assert hi_b - lo_b > 2 * (hi_s - lo_s)


def test_too_few_batches_settle_nothing():
    x = np.zeros(999)  # 9 batches of 100
    c = sequential.Check("ttft_p90", x, 0.9, 1.0)
    assert sequential.settled(c, 100, 0.001) is None
    # a batch longer than the minimum (requests in the system) needs more requests
    c = sequential.Check("ttft_p90", np.zeros(5000), 0.9, 1.0)
    assert sequential.settled(c, 600, 0.001) is None
    assert sequential.settled(c, 500, 0.001) is True


def test_settles_each_side_and_not_at_the_edge():
    rng = np.random.default_rng(1)
    x = rng.exponential(1.0, 20_000)  # P90 = ln 10 = 2.303
    tail = sequential.level(3)
    assert sequential.settled(sequential.Check("a", x, 0.9, 3.0), 100, tail) is True
    assert sequential.settled(sequential.Check("a", x, 0.9, 1.8), 100, tail) is False
    assert sequential.settled(sequential.Check("a", x, 0.9, math.log(10)), 100, tail) is None


def test_nan_tpot_left_out():
    x = np.r_[np.full(1000, np.nan), np.zeros(2000)]
    assert sequential.settled(sequential.Check("tpot", x, 0.9, 1.0), 100, 0.001) is True


def test_exact_prefix_and_little():
    end = np.array([1.0, 5.0, 2.0, 3.0, 9.0])
    assert sequential.exact_prefix(end, 4.0) == 1  # request 1 ends at 5 > 4
    assert sequential.exact_prefix(end, 5.5) == 4
    assert sequential.exact_prefix(np.array([1.0, np.nan]), 9.0) == 1
    # 2 req/s for 10 s, each 3 s in the system: 6 in the system on average
    arr = np.arange(21) / 2.0
    assert sequential.in_system(arr, np.full(21, 3.0)) == pytest.approx(21 * 3 / 10)
