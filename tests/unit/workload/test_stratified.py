"""The planner's stratified (Latin hypercube) draw of the scenario's distributions: its inverse
CDFs against hand arithmetic, and its means against the distributions' exact ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.inputs.schema.distribution import Distribution
from pdd_plan.workload.distributions import normal_quantile, quantile, sample, stratified

# the default scenario's prefix-hit histogram (pdd-paper.yaml): mean 0.89625 by hand
HIT = Distribution(
    histogram=[(0.0, 0.2, 0.05), (0.2, 0.6, 0.04), (0.6, 0.95, 0.06), (0.95, 1.0, 0.85)]
)
HIT_MEAN = 0.05 * 0.1 + 0.04 * 0.4 + 0.06 * 0.775 + 0.85 * 0.975


@pytest.mark.unit
def test_histogram_quantile_by_hand():
    # u = 0.025: halfway through the first bin's 5% -> 0.1; u = 0.07: half of the second
    # bin's 4% past 0.05 -> 0.4; u = 0.575: (0.575 - 0.15) / 0.85 of [0.95, 1] -> 0.975
    got = quantile(HIT, np.array([0.025, 0.07, 0.575, 0.999999]))
    assert got == pytest.approx([0.1, 0.4, 0.975, 1.0], abs=1e-6)


@pytest.mark.unit
def test_lognormal_quantile_is_the_clipped_lognormal():
    d = Distribution(lognormal={"mu": 6.75, "sigma": 0.5, "min": 64, "max": 4096})
    # the median of a lognormal is e^mu; z(0.975) = 1.959964 (a normal table)
    got = quantile(d, np.array([0.5, 0.975, 1e-12]))
    assert got[0] == pytest.approx(math.exp(6.75), rel=1e-9)
    assert got[1] == pytest.approx(math.exp(6.75 + 0.5 * 1.959964), rel=1e-6)
    assert got[2] == 64.0  # clipped at min
    assert quantile(Distribution(fixed=65536), np.array([0.3])).tolist() == [65536.0]


@pytest.mark.unit
def test_stratified_mean_is_the_distributions_and_beats_independent_draws():
    """One draw in each 1/n stratum: every bin holds exactly its share, and the mean's error
    is far below the independent draw's ~sd/sqrt(n) (sd of this histogram ~0.20)."""
    n = 20_000
    errs_iid, errs_lhs = [], []
    for seed in range(5):
        x = stratified(HIT, n, np.random.default_rng(seed))
        assert np.sum(x < 0.2) == 1000 and np.sum(x >= 0.95) == 17_000  # 5% and 85% exactly
        errs_lhs.append(abs(x.mean() - HIT_MEAN))
        errs_iid.append(abs(sample(HIT, n, np.random.default_rng(seed)).mean() - HIT_MEAN))
    assert max(errs_lhs) < 1e-4 < 0.2 / math.sqrt(n)
    assert np.mean(errs_lhs) < np.mean(errs_iid) / 10
    # a random pairing: the draw is not in CDF order (else the marginals would be comonotone)
    x = stratified(HIT, 1000, np.random.default_rng(0))
    assert not np.all(np.diff(x) >= 0)


@pytest.mark.unit
def test_normal_quantile_against_the_standard_library():
    """Acklam's approximation: relative error below 1.15e-9 (his figure), both tails."""
    from statistics import NormalDist

    u = np.array([1e-10, 1e-4, 0.01, 0.02425, 0.1, 0.3, 0.5, 0.7, 0.97575, 0.999, 1 - 1e-9])
    want = np.array([NormalDist().inv_cdf(x) for x in u])
    got = normal_quantile(u)
    assert np.allclose(got, want, rtol=2e-9, atol=1e-12)
