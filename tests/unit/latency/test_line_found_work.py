"""The work a transfer finds on the line by its own prefill's silence (issue 13,
pdd_plan/latency/line/found_work.py): hand arithmetic, the M/M/1-PS conditional mean it rests on, and its
exact limits. The replay check is tests/unit/latency/test_kv_transfer_law.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.latency.line import found_work, input_stream


class _Pool:
    def __init__(self, rate: float, count: int, service_s: np.ndarray, weight: np.ndarray):
        self.rate_rps, self.count = rate, count
        self.service_s, self.weight = service_s, weight


S = np.array([0.05, 0.70])  # short (high-hit) and long (low-hit) prefills, seconds
W = np.array([0.9, 0.1])


@pytest.mark.unit
def test_found_shift_hand_arithmetic():
    # rho 0.75, 6 instances, t* 0.5 s: -(0.75 / 6) 0.5 (1 - e^(-0.75 S / 0.5)), centred
    raw = [-(0.75 / 6) * 0.5 * (1 - math.exp(-1.5 * s)) for s in S]
    mean = 0.9 * raw[0] + 0.1 * raw[1]
    got = found_work.found_shift(S, W, 0.75, 6, 0.5)
    assert got == pytest.approx([raw[0] - mean, raw[1] - mean], rel=1e-12)
    # the long prefill finds less, the short more; the average transfer is unmoved
    assert got[1] < 0 < got[0] and float(np.dot(W, got)) == pytest.approx(0.0, abs=1e-15)
    # a short silence removes about its instance's input over it: (rho / c) rho S
    tiny = found_work.found_shift(np.array([1e-4, 0.0]), np.array([1.0, 1e9]), 0.75, 6, 0.5)
    assert tiny[0] == pytest.approx(-(0.75 / 6) * 0.75 * 1e-4, rel=1e-3)
    # a silence far beyond the line's memory: the instance's whole share of the work, rho t* / c
    long = found_work.found_shift(np.array([1e3, 0.0]), np.array([1.0, 1e12]), 0.75, 6, 0.5)
    assert long[0] == pytest.approx(-(0.75 / 6) * 0.5, rel=1e-9)


@pytest.mark.unit
def test_found_shift_limits():
    zeros = np.zeros(2)
    # one silent source among very many: nothing
    assert np.abs(found_work.found_shift(S, W, 0.75, 10**9, 0.5)).max() < 1e-9
    # equal prefills: nothing singles out a class
    assert found_work.found_shift(np.full(2, 0.3), W, 0.75, 6, 0.5) == pytest.approx(zeros)
    # idle, saturated or memoryless line: nothing
    for rho, t in ((0.0, 0.5), (1.0, 0.5), (0.75, 0.0), (0.75, math.inf)):
        assert np.array_equal(found_work.found_shift(S, W, rho, 6, t), zeros)
    # fewer instances: each one's silence weighs more
    six = found_work.found_shift(S, W, 0.75, 6, 0.5)
    one = found_work.found_shift(S, W, 0.75, 1, 0.5)
    assert one == pytest.approx(6 * six)


@pytest.mark.unit
def test_delay_response_limits_and_hand_value():
    tau, w = np.array([0.01, 0.1]), np.array([0.8, 0.2])
    m = (0.8 * 1e-4 + 0.2 * 1e-2) / (2 * (0.8 * 0.01 + 0.2 * 0.1))  # E[tau^2] / (2 E[tau])
    got = found_work.delay_response(tau, w, 0.6)
    want = [(1 - math.exp(-0.4 * t / m)) / 0.4 for t in tau]
    assert got == pytest.approx(want, rel=1e-12)
    # small: each extra transfer found (dV / m of them) shares a short stay, tau / m
    small = found_work.delay_response(np.array([1e-7, 0.01, 0.1]), np.array([0.0, 0.8, 0.2]), 0.6)
    assert small[0] == pytest.approx(1e-7 / m, rel=1e-5)
    # large: all the extra work is served, and what arrives meanwhile, 1 / (1 - rho)
    big = found_work.delay_response(np.array([1e3, 0.01, 0.1]), np.array([0.0, 0.8, 0.2]), 0.6)
    assert big[0] == pytest.approx(1 / 0.4)
    assert np.array_equal(found_work.delay_response(tau, w, 0.0), np.zeros(2))


@pytest.mark.unit
def test_delay_response_is_the_mm1_ps_conditional_mean():
    # M/M/1-PS, mean job m, load rho, a tagged job of tau found with n others: in its own
    # served seconds b, dE[N]/db = lambda (1 + N) - N / m and T = integral (1 + N) db.
    # Integrate that ODE and check E[T | n] - E[T | N*] = (n - N*) m x response.
    m, rho = 0.02, 0.7
    lam = rho / m
    n_star = rho / (1 - rho)
    tau = np.array([0.002, 0.05, 0.3])
    # exponential sizes of mean m: E[tau^2] / (2 E[tau]) = m, as the response reads it
    sizes, w = np.array([0.0, 0.04]), np.array([0.5, 0.5])  # E[x] 0.02, E[x^2] / 2 E[x] 0.02
    resp = found_work.delay_response(np.r_[tau, sizes], np.r_[np.zeros(3), w], rho)[:3]
    for n in (0.0, 5.0):
        for k, t in enumerate(tau):
            # explicit Euler of the ODE, fine enough for 0.2%
            big_n, total, dt = n, 0.0, t / 4000
            for _ in range(4000):
                total += (1.0 + big_n) * dt
                big_n += (lam * (1.0 + big_n) - big_n / m) * dt
            extra = total - t * (1 + n_star)  # beyond the stationary start's mean
            # tolerance: rel 2e-3: explicit Euler of the ODE over 4,000 steps (first order)
            assert extra == pytest.approx((n - n_star) * m * resp[k], rel=2e-3, abs=1e-6)


@pytest.mark.unit
def test_class_delay_composes_with_the_pool_ratio():
    sizes = np.array([0.005, 0.12])  # seconds of the line: affine in the prefill
    d = np.array([0.006, 0.35])  # the Poisson-fed law's mean delays
    pool = _Pool(40.0, 6, S, W)
    r = input_stream.queueing_ratio(sizes, W, 0.75, 1.0, pool)
    got = found_work.class_delay(d, sizes, W, 0.75, 1.0, pool, S)
    _, t_star = input_stream.ratio_and_scale(sizes, W, 0.75, 1.0, pool)
    dv = found_work.found_shift(S, W, 0.75, 6, t_star)
    want = d * r + dv * found_work.delay_response(sizes, W, 0.75)
    assert got == pytest.approx(want) and got[1] < d[1] * r and got[0] > d[0] * r
    # no pool: the ratio alone (independent input, no silence to condition on)
    assert found_work.class_delay(d, sizes, W, 0.75, 1.0, None, S) == pytest.approx(d)
    # an ample pool: its output is nearly Poisson, the shift falls as 1 / c (0.1% at 1000)
    ample = _Pool(4000.0, 1000, S, W)
    assert found_work.class_delay(d, sizes, W, 0.75, 1.0, ample, S) == pytest.approx(d, rel=2e-3)
    # never below zero (a huge silence on a near-empty delay)
    low = found_work.class_delay(np.array([1e-6, 0.35]), sizes, W, 0.75, 1.0, _Pool(4, 1, S, W), S)
    assert low.min() >= 0.0


@pytest.mark.unit
def test_time_scale_hand_value():
    tau, w = np.array([0.01, 0.1]), np.array([0.8, 0.2])
    e1, e2 = 0.8 * 0.01 + 0.2 * 0.1, 0.8 * 1e-4 + 0.2 * 1e-2
    assert input_stream.time_scale(tau, w, 0.6) == pytest.approx(0.6 * e2 / (2 * e1 * 0.16))
    assert input_stream.time_scale(tau, w, 0.6, 2.0) == pytest.approx(
        2 * input_stream.time_scale(tau, w, 0.6)
    )
    assert input_stream.time_scale(tau, w, 0.0) == 0.0
