"""The G/G/c (c > 1) waiting-time distribution (pdd_plan.latency.prefill.gigc): exact M/M/c, published
mean formulas by hand, and wait percentiles against a long FIFO replay written here."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from pdd_plan.inputs import profiles
from pdd_plan.latency import closed_forms
from pdd_plan.latency.prefill import gig1, gigc
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.perf.instance import parallelism_candidates

pytestmark = pytest.mark.unit


def _exp_log_mgf(mu: float):
    return lambda x: -math.log1p(-x / mu) if x < mu else math.inf


@pytest.mark.parametrize(
    "c,lam,mu", [(2, 1.6, 1.0), (6, 5.04, 1.0), (16, 14.0, 1.0), (4, 1.0, 0.5)]
)
def test_mmc_is_exact(c, lam, mu):
    # M/M/c: P(W > t) = C(c, a) e^(-(c mu - lambda) t), exactly
    law = gigc.wait_law(c, lam, 1 / mu, 2 / mu**2, _exp_log_mgf(mu))
    pw = closed_forms.erlang_c(c, lam / mu)
    assert law.p_wait == pytest.approx(pw, rel=1e-12)
    assert law.delta == pytest.approx(c * mu - lam, rel=1e-9)
    assert law.gamma == pytest.approx(pw, rel=1e-9)
    assert law.t0 == 0.0
    for q in (0.5, 0.9, 0.99):
        want = max(math.log(pw / (1 - q)) / (c * mu - lam), 0.0)
        assert law.quantile(q) == pytest.approx(want, rel=1e-8, abs=1e-12)
    assert law.mean == pytest.approx(pw / (c * mu - lam), rel=1e-8)


def test_decay_rate_is_tijms_equation_for_md_c():
    # M/D/c: lambda (e^(delta D / c) - 1) = delta, by hand for c = 6, D = 1, lambda = 5.04
    d = gigc.tail_decay_rate(6, 5.04, 1.0, gigc.discrete_log_mgf(np.ones(1), np.ones(1)))
    assert 5.04 * (math.exp(d / 6) - 1) == pytest.approx(d, rel=1e-9)
    assert d > 6 - 5.04  # deterministic service drains faster than exponential


def test_kimura_mean_by_hand():
    # c = 6, a = 5.04 (rho 0.84), E[S] = 1, cs2 = 2.5
    mm = closed_forms.erlang_c(6, 5.04) / (6 - 5.04)
    md = 0.5 * mm * (1 + 0.16 * 5 * (math.sqrt(34) - 2) / (16 * 0.84 * 6))  # Cosmetatos
    want = 3.5 / (5.0 / mm - 1.5 / md)
    assert gigc.kimura_mgc_mean_wait(6, 5.04, 1.0, 2.5) == pytest.approx(want, rel=1e-12)
    # exact at cs2 = 1 (M/M/c) and P-K at c = 1 (E[W_D] = E[W_M] / 2 there)
    assert gigc.kimura_mgc_mean_wait(6, 5.04, 1.0, 1.0) == pytest.approx(mm, rel=1e-12)
    assert gigc.kimura_mgc_mean_wait(1, 0.8, 1.0, 2.5) == pytest.approx(
        0.8 * 3.5 / (2 * 0.2)
    )  # rho E[S^2] / (2 (1 - rho) E[S])


def _two_point(cs2: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean 1: a short value 0.3 and a long one with the weight that gives squared CV cs2."""
    a = 0.3
    gap = (1 - a) + cs2 / (1 - a)
    q = (1 - a) / gap
    return np.array([a, a + gap]), np.array([1 - q, q])


def _fifo_replay(c, rate, s, w, ca2, n, seed):
    """Waits of a c-server FIFO queue by the Kiefer-Wolfowitz recursion: the servers' workloads
    (kept as a heap); an arrival takes the least one. The first 10% dropped as warm-up."""
    rng = np.random.default_rng(seed)
    k = 1 / ca2
    gaps = rng.exponential(1 / rate, n) if ca2 == 1 else rng.gamma(k, 1 / (rate * k), n)
    svc = rng.choice(s, size=n, p=w)
    free, t, out = [0.0] * c, 0.0, np.empty(n)
    for i, (g, x) in enumerate(zip(gaps.tolist(), svc.tolist())):
        t += g
        wait = max(free[0] - t, 0.0)
        out[i] = wait
        heapq.heapreplace(free, t + wait + x)
    return out[n // 10 :]


# (c, rho, service, ca2): the default pool's shape (c 6, rho 0.84, cs2 2.5), a burstier one,
# M/D/c, a small pool and a big one
CASES = [
    (6, 0.84, 2.5, 1.0),
    (5, 0.84, 3.5, 4.0),
    (6, 0.84, 0.0, 1.0),
    (2, 0.84, 2.5, 1.0),
    (16, 0.90, 2.5, 1.0),
]


@pytest.mark.parametrize("c,rho,cs2,ca2", CASES)
def test_percentiles_against_a_fifo_replay(c, rho, cs2, ca2):
    s, w = (np.ones(1), np.ones(1)) if cs2 == 0 else _two_point(cs2)
    rate = rho * c  # E[S] = 1
    law = gigc.ggc_wait_law(c, rate, s, w, ca2)
    sim = _fifo_replay(c, rate, s, w, ca2, 600_000 if ca2 == 1 else 1_500_000, seed=11)
    for q in (0.9, 0.99):
        want = float(np.quantile(sim, q))
        # tolerance: 10%: the law is an approximation (Tijms' expansion with Kimura's mean: gigc's
        # docstring) against a seeded FIFO replay of 0.6-1.5 million requests
        assert law.quantile(q) == pytest.approx(want, rel=0.10), (q, law, want)
    # the body: the law's P(W > replay's median) within 0.04 of 1/2 (the median itself sits on
    # the steep part near the atom, where a small shift in probability moves it far)
    med = float(np.quantile(sim, 0.5))
    assert abs(float(law.survival(med)) - 0.5) <= 0.04, (law, med)


def test_body_is_shorter_than_the_exponential_for_variable_service():
    # c = 6, rho 0.84, cs2 2.5: part of the waiting mass ends at the first of 6 residuals, so the
    # law's P(W > t) sits below an exponential of the same tail for small t, and the median drops
    s, w = _two_point(2.5)
    law = gigc.ggc_wait_law(6, 5.04, s, w)
    assert law.gamma < law.p_wait and law.t0 == 0.0
    es2 = float(np.dot(w, s * s))
    pw, ac = closed_forms.ggc_wait(6, 5.04, 1.0, es2, 1.0)
    assert law.quantile(0.5) < closed_forms.mg1_wait_quantile(0.5, pw, ac)


def test_unstable_and_idle_pools():
    s, w = _two_point(2.5)
    bad = gigc.ggc_wait_law(4, 4.0, s, w)
    assert not bad.stable and bad.quantile(0.5) == math.inf and bad.mean == math.inf
    assert float(bad.survival(10.0)) == 1.0
    idle = gigc.ggc_wait_law(50, 0.001, s, w)
    assert idle.quantile(0.99) == 0.0 and float(idle.survival(0.0)) < 1e-12


def test_single_instance_pool_is_not_this_modules():
    # c = 1 is pdd_plan/latency/prefill/gig1.py's exact GI/G/1 law; this module's law only marks it unstable
    inst = parallelism_candidates(profiles.model("llama-3.1-8b"), profiles.gpu("h100"))[0]
    svc, w = np.array([0.1, 0.3]), np.array([0.5, 0.5])
    pool = prefill_pool.PrefillPool(inst, 1, svc, 4.0, w)
    law = gig1.gi_g1_wait(svc, w, 4.0, 1.0)
    assert pool.wait_law is law
    # M/G/1 mean is P-K whatever the law's shape: 0.8 x 0.05 / (2 x 0.2 x 0.2) = 0.5 s
    assert pool.wait_law.mean == pytest.approx(
        closed_forms.ggc_wait(1, 4.0, 0.2, 0.05, 1.0)[1], rel=0.01
    )
    over = prefill_pool.PrefillPool(inst, 1, svc, 6.0, w)  # rho 1.2
    assert isinstance(over.wait_law, gigc.ExpansionWait) and not over.wait_law.stable
