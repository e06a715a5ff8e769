"""The line delay's shape (issue 13): Coffman-Muntz-Trotter's conditional sojourn variance of
M/M/1-PS by hand and in its limits, the two-moment law with its no-delay atom, and the TTFT law
that uses it (exactly the old exponential one at squared CV 1 and no atom)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency import ttft
from pdd_plan.latency.line import delay_shape, transfer
from pdd_plan.latency.line.law import transfer_law
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.perf.instance import parallelism_candidates

pytestmark = pytest.mark.unit


def test_cmt_variance_by_hand():
    # rho 0.5, 1/mu = 1 s, x = 1 s: 2 rho x / ((1 - rho)^3 mu) = 8, minus
    # 2 rho (1 - e^-0.5) / ((1 - rho)^4 mu^2) = 16 x 0.39346934 = 6.29550944
    got = delay_shape.ps_sojourn_variance(np.array([1.0]), 1.0, 0.5)[0]
    assert got == pytest.approx(8.0 - 16.0 * (1.0 - math.exp(-0.5)), rel=1e-12)
    assert got == pytest.approx(1.70449056, rel=1e-8)
    # 1/mu = 2 s, rho 0.8, x = 3 s: a = 0.3; 2 0.8 4 / 0.2^4 (0.3 - 1 + e^-0.3)
    got = delay_shape.ps_sojourn_variance(np.array([3.0]), 2.0, 0.8)[0]
    assert got == pytest.approx(6.4 / 0.0016 * (0.3 - 1.0 + math.exp(-0.3)), rel=1e-10)


@pytest.mark.parametrize("rho", [0.2, 0.677, 0.95])
def test_cmt_limits(rho):
    mean = 0.8
    # x -> 0: x^2 Var[N], N geometric: rho / (1 - rho)^2 (the series branch, no cancellation)
    for x in (1e-9, 1e-6, 1e-4):
        v = delay_shape.ps_sojourn_variance(np.array([x]), mean, rho)[0]
        assert v / x**2 == pytest.approx(rho / (1 - rho) ** 2, rel=1e-3)
    # large x: linear, 2 rho x / ((1 - rho)^3 mu), less the constant 2 rho / ((1 - rho)^4 mu^2)
    x = 1e6
    v = delay_shape.ps_sojourn_variance(np.array([x]), mean, rho)[0]
    lin = 2 * rho * x * mean / (1 - rho) ** 3 - 2 * rho * mean**2 / (1 - rho) ** 4
    assert v == pytest.approx(lin, rel=1e-9)
    # both branches meet at the switch
    a = np.array([0.999e-3, 1.001e-3]) * mean / (1 - rho)
    lo, hi = delay_shape.ps_sojourn_variance(a, mean, rho)
    assert hi / lo == pytest.approx((a[1] / a[0]) ** 2, rel=1e-3)


def test_cmt_no_load_and_overload():
    x = np.array([0.1, 1.0])
    assert np.all(delay_shape.ps_sojourn_variance(x, 1.0, 0.0) == 0.0)
    assert np.all(delay_shape.ps_sojourn_variance(x, 1.0, 1e-9) < 1e-8)
    assert np.all(np.isinf(delay_shape.ps_sojourn_variance(x, 1.0, 1.0)))


@pytest.mark.parametrize("rho", [0.3, 0.7])
def test_cmt_unconditional_second_moment_is_the_published_one(rho):
    # over exponential sizes (mu = 1), E[T^2] of M/M/1-PS is 4 / ((1 - rho)^2 (2 - rho))
    # (Var[T] = (2 + rho) / ((2 - rho) (1 - rho)^2); FCFS would give 2 / (1 - rho)^2)
    def second(x: float) -> float:
        v = delay_shape.ps_sojourn_variance(np.array([x]), 1.0, rho)[0]
        return math.exp(-x) * (v + (x / (1 - rho)) ** 2)

    got, _ = quad(second, 0, np.inf, limit=200)
    assert got == pytest.approx(4.0 / ((1 - rho) ** 2 * (2 - rho)), rel=1e-7)


def _moments(law: delay_shape.TwoMoment) -> tuple[np.ndarray, np.ndarray]:
    m1 = law.q * (law.shift + law.scale)
    m2 = law.q * ((law.shift + law.scale) ** 2 + law.scale**2)
    return m1, m2 - m1**2


def test_two_moment_law_keeps_mean_variance_and_atom():
    m = np.array([1.0, 1.0, 1.0, 2.0, 0.5])
    v = np.array([0.25, 1.0, 3.0, 1.0, 0.1])
    atom = np.array([0.1, 0.0, 0.3, 0.0, 0.5])
    law = delay_shape.two_moment(m, v, atom)
    got_m, got_v = _moments(law)
    np.testing.assert_allclose(got_m, m, rtol=1e-12)
    np.testing.assert_allclose(got_v, v, rtol=1e-12)
    assert np.all(law.shift >= 0) and np.all(law.q <= 1)
    # the atom where the moments allow it (shifted tail), else the larger one they need
    np.testing.assert_allclose(1 - law.q[[0, 1, 3]], atom[[0, 1, 3]], atol=1e-12)
    assert 1 - law.q[2] == pytest.approx(1 - 2.0 / 4.0)  # q = 2 m^2 / (v + m^2)
    # an atom the variance cannot hold (0.5 > v / (v + m^2) = 0.1 / 0.35): cut, the rest a point
    assert 1 - law.q[4] == pytest.approx(0.1 / 0.35) and law.scale[4] == pytest.approx(0.0)
    # no atom, squared CV 1: the exponential of that mean
    e = delay_shape.two_moment(np.array([0.7]), np.array([0.49]))
    assert (e.shift[0], e.q[0], e.scale[0]) == pytest.approx((0.0, 1.0, 0.7))
    # no mean, or no finite one: an exponential of it (zero: no delay)
    z = delay_shape.two_moment(np.array([0.0, np.inf]), np.array([0.0, np.inf]))
    assert z.q.tolist() == [1.0, 1.0] and z.scale[0] == 0.0 and np.isinf(z.scale[1])


@pytest.fixture(scope="module", params=[1, 2])
def pool(request):
    inst = parallelism_candidates(profiles.model("llama-3.1-8b"), profiles.gpu("h100"))[0]
    w = np.array([0.5, 0.5])
    service = np.array([0.2, 0.6])
    rate = 2.0 * request.param  # rho 0.8 in both pools
    return prefill_pool.PrefillPool(inst, request.param, service, rate_rps=rate, weight=w)


def test_ttft_law_is_the_exponential_one_at_cv_1(pool):
    t = np.linspace(-0.1, 4.0, 9)
    m = np.full_like(t, 0.4)
    old = ttft.ttft_survival(t, pool, m)
    new = ttft.ttft_survival(t, pool, m, m**2, np.zeros_like(t))
    np.testing.assert_allclose(new, old, rtol=1e-12, atol=1e-15)


def test_ttft_law_against_monte_carlo(pool):
    # W from the pool's own law, E = B (shift + X) drawn directly
    rng = np.random.default_rng(1)
    n = 400_000
    m, v, a = 0.5, 0.1, 0.2
    law = delay_shape.two_moment(np.array([m]), np.array([v]), np.array([a]))
    b = rng.random(n) < law.q[0]
    e = np.where(b, law.shift[0] + rng.exponential(law.scale[0], n), 0.0)
    u = rng.random(n)
    # either law as its points (inverse CDF over them) and its exponential tail
    wl = pool.wait_law
    c = np.cumsum(np.r_[wl.weights, wl.tail.mass])
    i = np.minimum(np.searchsorted(c, u), len(c) - 1)
    tail = wl.tail.shift + rng.exponential(1 / min(wl.tail.rate, 1e300), n)
    w = np.where(i < len(wl.points), wl.points[np.minimum(i, len(wl.points) - 1)], tail)
    t = np.array([0.2, 0.6, 1.0, 2.0])
    mc = np.array([(w + e > x).mean() for x in t])
    got = ttft.ttft_survival(t, pool, np.full(4, m), np.full(4, v), np.full(4, a))
    # tolerance: 0.01: a probability from 400,000 seeded Monte Carlo draws (binomial SE <= 8e-4)
    np.testing.assert_allclose(got, mc, atol=0.01)


def test_line_shape_is_cmt_where_one_transfer_fills_the_line():
    # 1 Gb/s line, connections far faster and a big pool: M/G/1-PS, rho_e = rho
    sku = LineSKU(
        name="t",
        gbps=1,
        cost_per_month=1,
        rtt_ms=10,
        loss_rate=0.0,
        per_connection_gbps=10,
        connections=256,
        streams_per_transfer=1,
    )
    line = transfer.LineConfig(sku, 1)
    x = np.array([1e6, 1e7, 1e8])
    w = np.array([0.5, 0.3, 0.2])
    rho = 0.6
    law = transfer_law(x, w, line, rho)
    c = line.capacity_bytes_s
    tau = x / c
    e1 = float(np.dot(w, tau))
    resid = float(np.dot(w, tau**2)) / (2 * e1)
    extra = law.total - transfer.bare_transfer_s(x, line)
    assert np.array_equal(law.line_wait, extra)
    cv2, atom = law.line_wait_var / extra**2, law.atom
    np.testing.assert_allclose(extra, tau * rho / (1 - rho), rtol=1e-6)
    var = delay_shape.ps_sojourn_variance(tau, resid, rho)
    np.testing.assert_allclose(cv2, var / extra**2, rtol=1e-5)
    # P(no delay) = P(line idle) x P(no arrival while it runs), lambda = rho / E[tau]
    np.testing.assert_allclose(atom, (1 - rho) * np.exp(-rho / e1 * tau), rtol=1e-4)
    # small transfers: squared CV -> 1 / rho (x N, N geometric); big ones concentrate
    assert cv2[0] == pytest.approx(1 / rho, rel=0.05)
    assert cv2[2] < cv2[1] < cv2[0]
