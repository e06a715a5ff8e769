"""The exact GI/G/1 wait (pdd_plan/latency/prefill/gig1.py) against closed forms: M/M/1's law, P-K's mean
for M/D/1 and M/G/1, GI/M/1's sigma root; monotone in the arrivals' burstiness; and the prefill
pool's single-server branch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from pdd_plan.latency import ttft
from pdd_plan.latency.prefill import gig1, wait
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.latency.prefill.gigc import ExpansionWait

pytestmark = pytest.mark.unit


def _exponential(mu: float, n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Exponential(mu) service as n equal-weight strata at its quantile midpoints."""
    q = (np.arange(n) + 0.5) / n
    return -np.log1p(-q) / mu, np.full(n, 1.0 / n)


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.9])
def test_mm1_is_the_exact_exponential_law(rho):
    # M/M/1, mu 1: P(W > t) = rho e^-(1 - rho) t, E[W] = rho / (1 - rho)
    s, w = _exponential(1.0)
    law = gig1.gi_g1_wait(s, w, rho, 1.0)
    # tolerance: the law is computed on 4,000 equal-weight strata of the exponential service
    # (_exponential): the tolerances are that discretization's error
    assert law.wait_probability == pytest.approx(rho, abs=2e-3)
    assert law.mean == pytest.approx(rho / (1 - rho), rel=3e-3)
    for t in (0.5, 2.0, 5.0):
        assert float(law.survival(t)) == pytest.approx(rho * math.exp(-(1 - rho) * t), abs=3e-3)
    q90 = math.log(rho / 0.1) / (1 - rho) if rho > 0.1 else 0.0
    assert law.quantile(0.9) == pytest.approx(q90, rel=5e-3)


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.9, 0.97])
def test_md1_mean_is_pollaczek_khinchine(rho):
    # M/D/1, S = 1 s: E[W] = rho / (2 (1 - rho)); P(W > 0) = rho for every M/G/1
    law = gig1.gi_g1_wait(np.array([1.0]), np.array([1.0]), rho, 1.0)
    assert law.mean == pytest.approx(rho / (2 * (1 - rho)), rel=2e-3)
    assert law.wait_probability == pytest.approx(rho, abs=2e-3)


def test_mg1_mixture_mean_is_pollaczek_khinchine():
    # two service times 0.1 s (90%) and 1 s (10%) at 1 req/s: E[S] 0.19, E[S^2] 0.109
    law = gig1.gi_g1_wait(np.array([0.1, 1.0]), np.array([0.9, 0.1]), 1.0, 1.0)
    assert law.mean == pytest.approx(0.109 / (2 * (1 - 0.19)), rel=2e-3)


@pytest.mark.parametrize("rho,ca2", [(0.2, 0.25), (0.2, 4.0), (0.7, 4.0), (0.9, 9.0)])
def test_gim1_waits_with_the_sigma_root(rho, ca2):
    # GI/M/1, Gamma gaps of mean 1/rho and SCV ca2, mu 1: P(W > 0) = sigma, the root of
    # sigma = A*(mu (1 - sigma)) = (1 + (1 - sigma) ca2 / rho)^(-1 / ca2); E[W] = sigma/(1-sigma)
    sigma = brentq(lambda x: x - (1 + (1 - x) * ca2 / rho) ** (-1 / ca2), 1e-12, 1 - 1e-12)
    s, w = _exponential(1.0)
    law = gig1.gi_g1_wait(s, w, rho, ca2)
    # tolerance: 2e-3: the 4,000-strata service law's discretization error, as above
    assert law.wait_probability == pytest.approx(sigma, abs=2e-3)
    assert law.mean == pytest.approx(sigma / (1 - sigma), rel=6e-3)  # lattice: O(h)


def test_hand_figures_of_one_gim1():
    # rho 0.2, ca2 4: sigma 0.56732 (solved by hand above), so E[W] = 1.3112 s, twice Kingman's
    # rho/(1-rho) (ca2+cs2)/2 E[S] = 0.625 s: the two-moment law misses bursts at light load
    s, w = _exponential(1.0)
    law = gig1.gi_g1_wait(s, w, 0.2, 4.0)
    # tolerance: the 4,000-strata service law's discretization error; sigma solved by hand to 5
    # digits
    assert law.wait_probability == pytest.approx(0.56732, abs=2e-3)
    assert law.mean == pytest.approx(1.3112, rel=3e-3)


def test_burstier_arrivals_wait_longer():
    s, w = np.array([0.04, 0.1, 0.9]), np.array([0.6, 0.35, 0.05])
    last = None
    for ca2 in (0.25, 0.5, 1.0, 2.0, 4.0, 9.0):
        law = gig1.gi_g1_wait(s, w, 2.0, ca2)
        if last is not None:
            assert law.mean > last.mean and law.wait_probability > last.wait_probability
            assert law.quantile(0.99) > last.quantile(0.99)
        last = law


def test_unstable_or_idle():
    assert gig1.gi_g1_wait(np.array([1.0]), np.array([1.0]), 1.0, 1.0) is None
    assert gig1.gi_g1_wait(np.array([1.0]), np.array([1.0]), 2.0, 4.0) is None
    idle = gig1.gi_g1_wait(np.array([1.0]), np.array([1.0]), 0.0, 1.0)
    assert idle.wait_probability == 0.0 and idle.mean == 0.0


def test_memoized():
    s, w = np.array([0.1, 0.3]), np.array([0.5, 0.5])
    assert gig1.gi_g1_wait(s, w, 2.0, 4.0) is gig1.gi_g1_wait(s.copy(), w.copy(), 2.0, 4.0)


def test_plus_exponential_is_the_convolution():
    # M/M/1 wait (rho 0.5, mu 1: atom 0.5, Exp(0.5) beyond) plus Exp(mean 1): by hand
    # P(W + E > t) = 0.5 e^-t + 0.5 (b e^-a t - a e^-b t) / (b - a), a = 0.5, b = 1
    s, w = _exponential(1.0)
    law = gig1.gi_g1_wait(s, w, 0.5, 1.0)
    t = np.array([0.5, 1.0, 3.0, 6.0])
    want = 0.5 * np.exp(-t) + 0.5 * (np.exp(-0.5 * t) - 0.5 * np.exp(-t)) / 0.5
    got = wait.wait_plus_exponential_survival(law, t, np.ones(4))
    # tolerance: 3e-3: the 4,000-strata service law's discretization error
    assert np.allclose(got, want, atol=3e-3)
    # no line delay: the law's survival read on its 256 bins, a step per bin (within a bin's mass)
    no_line = wait.wait_plus_exponential_survival(law, t)
    assert np.allclose(no_line, 0.5 * np.exp(-0.5 * t), atol=1e-2)


def test_workload_ratio_of_gim1():
    # GI/M/1 rho 0.5, ca2 4, mu 1: E[W] = sigma/(1 - sigma); E[V] = rho E[W] + rho (E[S^2] = 2)/2
    # over P-K's rho / (1 - rho) = 1
    rho, ca2 = 0.5, 4.0
    sigma = brentq(lambda x: x - (1 + (1 - x) * ca2 / rho) ** (-1 / ca2), 1e-12, 1 - 1e-12)
    s, w = _exponential(1.0)
    want = rho * sigma / (1 - sigma) + rho
    # tolerance: rel 5e-3: the 4,000-strata service law's discretization error
    assert gig1.workload_ratio(s, w, rho, ca2) == pytest.approx(want, rel=5e-3)
    assert gig1.workload_ratio(s, w, rho, 1.0) == 1.0
    assert gig1.workload_ratio(s, w, 1.0, 4.0) == float("inf")


def test_departure_ca2_is_qna():
    # c 1: rho^2 cs2 + (1 - rho^2) ca2 = 0.25 x 3 + 0.75 x 4 = 3.75
    assert gig1.departure_ca2(1, 0.5, 4.0, 3.0) == pytest.approx(3.75)
    # c 4: 1 + 0.75 x 3 + 0.25 x 2 / 2 = 3.5
    assert gig1.departure_ca2(4, 0.5, 4.0, 3.0) == pytest.approx(3.5)


def test_single_instance_pool_uses_the_exact_law():
    svc, wt = np.array([0.1, 1.0]), np.array([0.9, 0.1])
    pool = prefill_pool.PrefillPool(None, 1, svc, 1.0, wt, 4.0)
    law = gig1.gi_g1_wait(svc, wt, 1.0, 4.0)
    assert pool.wait_law is law and pool.wait_law is pool.wait_law  # chosen once
    fixed = np.array([0.3, 0.5])
    got = ttft.ttft_survival(np.array([1.0, -0.1]) - fixed, pool, np.array([0.2, 0.2]))
    assert got[1] == 1.0 and 0 < got[0] < 1
    # more than one instance keeps the pooled law; an unstable one is unbounded as before
    assert isinstance(prefill_pool.PrefillPool(None, 2, svc, 1.0, wt, 4.0).wait_law, ExpansionWait)
    over = prefill_pool.PrefillPool(None, 1, svc, 6.0, wt, 4.0).wait_law
    assert not over.stable and over.mean == float("inf") and over.wait_probability == 1.0
