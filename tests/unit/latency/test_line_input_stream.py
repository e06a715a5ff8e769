"""The prefill pool's smoothing of the line's input (issue 13): the index of dispersion for work
of the pool's output (pdd_plan/latency/line/input_stream.py) against closed forms and its exact limits."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.latency.line import input_stream
from pdd_plan.latency.prefill import gig1

T = np.array([1e-5, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 1e4, 1e6])


@pytest.mark.unit
def test_busy_variance_of_a_huge_pool_is_mminf_closed_form():
    # M/M/inf: N Poisson of mean a = lam / mu, Cov(N0, Nu) = a e^(-mu u), so
    # Var[int_0^t N] = 2 a (t / mu - (1 - e^(-mu t)) / mu^2); lam 40, E[S] 0.125 s, t = 1 s:
    # 2 x 5 x (0.125 - 0.125^2 x (1 - e^-8)) = 1.0940...
    want = 2 * 5 * (0.125 - 0.125**2 * (1 - np.exp(-8.0)))
    assert input_stream.busy_variance(40.0, 0.125, None, np.array([1.0]))[0] == pytest.approx(want)
    big = input_stream.busy_variance(40.0, 0.125, 80, np.array([1.0]))[0]  # P(N >= 80) ~ 1e-40
    assert big == pytest.approx(want, rel=1e-6)


@pytest.mark.unit
def test_busy_variance_small_and_long_windows():
    # M/M/1 at rho 0.6: B = 1{N > 0}, Var B = rho (1 - rho) = 0.24, so Var[int B] ~ 0.24 t^2
    # for t far below the chain's time scale; over long windows the busy time is the work
    # arrived (up to what the queue holds): variance rate lam E[S^2] = 2 lam / mu^2
    lam, es = 6.0, 0.1
    v = input_stream.busy_variance(lam, es, 1, np.array([1e-4, 1e6]))
    assert v[0] / 1e-8 == pytest.approx(0.24, rel=1e-3)
    # tolerance: rel 1e-3: the windows are 1e-4 and 1e6 s, where the limits hold to O(t) and O(1/t)
    assert v[1] / 1e6 == pytest.approx(2 * lam * es**2, rel=1e-3)
    for c in (2, 6):
        long = input_stream.busy_variance(40.0 / 6 * c, 0.126, c, np.array([1e6]))[0] / 1e6
        assert long == pytest.approx(2 * 40.0 / 6 * c * 0.126**2, rel=1e-3)


@pytest.mark.unit
def test_work_dispersion_limits():
    # 1 at both ends (one arrival at a time; the work arrived in the long run), below 1 between
    i = input_stream.work_dispersion(40.0, 0.126, 6, 3.6, T)
    assert i[0] == pytest.approx(1.0, abs=1e-3) and i[-1] == pytest.approx(1.0, abs=1e-5)
    assert np.all(i <= 1.0) and i.min() < 0.9
    # an ample pool (c -> inf) and a near-idle one emit a compound Poisson stream: I = 1
    ample = input_stream.work_dispersion(4000.0, 0.126, 1000, 3.6, T)
    assert ample == pytest.approx(np.ones_like(T), abs=1e-6)
    idle = input_stream.work_dispersion(0.01, 0.126, 1, 3.6, T)
    # tolerance: 2e-3: rho 1.3e-3, the near-idle queue's departure from Poisson is O(rho)
    assert idle == pytest.approx(np.ones_like(T), abs=2e-3)
    # fewer servers at the same load smooth more (the cap binds more often)
    six = input_stream.work_dispersion(40.0, 0.126, 6, 3.6, np.array([0.5]))[0]
    two = input_stream.work_dispersion(40.0 / 3, 0.126, 2, 3.6, np.array([0.5]))[0]
    sixty = input_stream.work_dispersion(400.0, 0.126, 60, 3.6, np.array([0.5]))[0]
    assert two < six < sixty < 1.0
    # an unstable pool has no stationary output to describe
    assert input_stream.work_dispersion(60.0, 0.126, 6, 3.6, T) == pytest.approx(np.ones_like(T))


@pytest.mark.unit
def test_dispersion_ratio_time_scale_and_identity_cases():
    sizes, w = np.array([0.01, 0.03]), np.array([0.5, 0.5])
    # t* = rho E[tau^2] / (2 E[tau] (1 - rho)^2) = 0.75 x 0.0005 / (2 x 0.02 x 0.0625) = 0.15 s
    got = input_stream.dispersion_ratio(40.0, 0.126, 6, sizes, w, 0.75)
    scv = 0.0005 / 0.02**2 - 1.0
    want = input_stream.work_dispersion(40.0, 0.126, 6, scv, np.array([0.15]))[0]
    assert got == pytest.approx(want, rel=1e-12) and got < 1.0
    assert input_stream.dispersion_ratio(40.0, 0.126, 6, sizes, w, 0.0) == 1.0
    assert input_stream.dispersion_ratio(40.0, 0.126, 6, sizes, w, 1.0) == 1.0


class _Pool:
    def __init__(self, rate: float, count: int) -> None:
        self.rate_rps, self.count = rate, count
        self.service_s, self.weight = np.array([0.06, 0.19]), np.array([0.5, 0.5])


@pytest.mark.unit
def test_queueing_ratio_composes_with_the_renewal_ratio():
    sizes, w = np.array([0.01, 0.03]), np.array([0.5, 0.5])
    # no pool: the renewal ratio alone; Poisson with a pool: the pool's I(t*)
    assert input_stream.queueing_ratio(sizes, w, 0.7, 4.0, None) == pytest.approx(
        gig1.workload_ratio(sizes, w, 0.7, 4.0)
    )
    pool = _Pool(40.0, 6)
    assert input_stream.queueing_ratio(sizes, w, 0.7, 1.0, pool) == pytest.approx(
        input_stream.dispersion_ratio(40.0, 0.125, 6, sizes, w, 0.7)
    )
    # bursty input: the pool's dip (in units of a Poisson stream's variance) is subtracted,
    # read at the time scale of the renewal-stretched workload (3.1 x longer here)
    r = gig1.workload_ratio(sizes, w, 0.7, 4.0)
    got = input_stream.queueing_ratio(sizes, w, 0.7, 4.0, pool)
    i_r = input_stream.dispersion_ratio(40.0, 0.125, 6, sizes, w, 0.7, r)
    assert r > 3.0 and got == pytest.approx(r - (1 - i_r)) and got < r
    # an ample pool changes nothing
    assert input_stream.queueing_ratio(sizes, w, 0.7, 1.0, _Pool(4000.0, 1000)) == pytest.approx(
        1.0, abs=1e-6
    )
