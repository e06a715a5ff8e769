"""TTFT law: prefill wait (M/G/c, atom + shifted exponential) convolved with the line's queueing."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.inputs import profiles
from pdd_plan.latency import ttft
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.perf.instance import parallelism_candidates

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def pool():
    inst = parallelism_candidates(profiles.model("llama-3.1-8b"), profiles.gpu("h100"))[0]
    w = np.array([0.5, 0.5])
    service = np.array([0.2, 0.6])  # seconds
    return prefill_pool.PrefillPool(inst, 2, service, rate_rps=4.0, weight=w)  # rho = 0.8


def _monte_carlo(pool, line_wait_mean: float, t: np.ndarray, n: int = 400_000) -> np.ndarray:
    rng = np.random.default_rng(0)
    law = pool.wait_law  # c = 2, service cs2 0.25: a shifted exponential (t0 > 0)
    assert law.t0 > 0
    waits = np.where(rng.random(n) < law.p_exp, law.t0 + rng.exponential(1 / law.delta, n), 0.0)
    line = rng.exponential(line_wait_mean, n) if line_wait_mean > 0 else np.zeros(n)
    total = waits + line
    return np.array([(total > x).mean() for x in t])


@pytest.mark.parametrize("line_wait", [0.0, 0.3, 1.0])
def test_survival_matches_monte_carlo(pool, line_wait):
    t = np.array([0.0, 0.2, 0.5, 1.0, 2.0, 4.0])
    got = ttft.ttft_survival(t, pool, np.full_like(t, line_wait))
    want = _monte_carlo(pool, line_wait, t)
    # tolerance: 3e-3: a probability from 400,000 seeded Monte Carlo draws (binomial SE <= 8e-4)
    np.testing.assert_allclose(got, want, atol=3e-3)


def test_equal_rates_branch_is_continuous(pool):
    a = pool.wait_law.delta
    t = np.array([0.1, 0.7, 2.0])
    at = ttft.ttft_survival(t, pool, np.full_like(t, 1.0 / a))
    near = ttft.ttft_survival(t, pool, np.full_like(t, 1.0 / a * (1 + 1e-6)))
    # tolerance: rtol 1e-4: the two branches differ by O(1e-6) in the rate, the limit is continuous
    np.testing.assert_allclose(at, near, rtol=1e-4)


def test_negative_slack_is_a_sure_miss(pool):
    assert ttft.ttft_survival(np.array([-0.1]), pool, np.array([0.5]))[0] == 1.0


def test_quantiles_rise_with_line_queueing(pool):
    fixed, share = np.array([0.3, 0.8]), np.array([0.5, 0.5])
    base = ttft.ttft_quantiles(fixed, share, pool, (0.5, 0.9, 0.99))
    more = ttft.ttft_quantiles(fixed, share, pool, (0.5, 0.9, 0.99), np.array([0.5, 0.5]))
    assert all(m > b for m, b in zip(more, base, strict=True))
    assert base == sorted(base)
