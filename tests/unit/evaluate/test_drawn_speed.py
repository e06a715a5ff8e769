"""A perf-speed draw's fleet model from the nominal one (issue 26's timing): an engine k times
as fast (`fleet.deployed`) runs every pass in exactly 1/k of the time, so its prefill service
times are the nominal ones over k and its batch at the TPOT target the nominal one's at k times
the target; and the line's input-stream modes depend on the pool's offered load alone (time
scaling of the M/M/c chain). Each derived figure is checked against the direct computation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.linalg import eigh

from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs import profiles
from pdd_plan.inputs.pieces import Profiles
from pdd_plan.latency.line import input_stream
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import parallelism_candidates
from pdd_plan.workload.requests import RequestClasses

pytestmark = pytest.mark.unit

MODEL = "deepseek-v4-pro"


def _scaled(k: float):
    model, gpu = profiles.model(MODEL), profiles.gpu("h200")
    inst = parallelism_candidates(model, gpu)[0]
    prof = fleet.deployed(Profiles(model, {"h200": gpu}, []), k)
    return inst, dataclasses.replace(inst, gpu=prof.gpus["h200"])


def test_speed_of_names_the_nominal_profile_and_the_product_of_factors():
    model, gpu = profiles.model(MODEL), profiles.gpu("h200")
    once = fleet.deployed(Profiles(model, {"h200": gpu}, []), 1.25)
    twice = fleet.deployed(once, 0.8)
    assert fleet.speed_of(once.gpus["h200"]) == (gpu, 1.25)
    base, k = fleet.speed_of(twice.gpus["h200"])
    assert base is gpu and k == pytest.approx(1.0)
    assert fleet.speed_of(gpu) == (gpu, 1.0)  # not made by deployed


@pytest.mark.parametrize("k", [0.83, 1.0, 1.17, 1.31])
def test_drawn_decode_batch_is_the_direct_one(k):
    _, fast = _scaled(k)
    tpot = 0.060
    for ctx in (8_000.0, 40_000.0):
        for _ in range(2):  # the second from the memoized nominal steps
            b, step = analytic.max_batch_for_tpot(fast, ctx, tpot)
            want_b, want_step = roofline.max_batch_for_tpot(fast, ctx, tpot)
            assert b == want_b
            assert step == pytest.approx(want_step, rel=1e-12)


def test_drawn_prefill_service_is_the_direct_one_over_k():
    n = 4
    classes = RequestClasses(
        input_tokens=np.array([2_000.0, 16_000.0, 60_000.0, 120_000.0]),
        output_tokens=np.full(n, 500.0),
        hit_p=np.array([0.0, 0.5, 0.8, 0.9]),
        hit_d=np.zeros(n),
        weight=np.full(n, 1.0 / n),
    )
    nominal, fast = _scaled(1.2)
    derived = prefill_pool.prefill_strata_service_s(fast, classes, 8192, (nominal, 1.2))
    direct = prefill_pool._service_s(fast, classes, 8192)
    np.testing.assert_allclose(derived, direct, rtol=1e-12)
    # hand check of the premise: 1/1.2 of the nominal instance's time
    np.testing.assert_allclose(derived * 1.2, prefill_pool._service_s(nominal, classes, 8192))


def _direct_modes(lam: float, mu: float, c: int) -> tuple[np.ndarray, np.ndarray]:
    """The M/M/c chain's covariance modes by a dense eigen-decomposition at (lam, mu) itself,
    truncated where the stationary mass left is 1e-15 (the code's law is the infinite chain's)."""
    rho = lam / (c * mu)
    k_max = int(c + np.log(1e-15) / np.log(rho) + 10)
    n = np.arange(k_max + 1)
    death = mu * np.minimum(n, c).astype(float)
    logp = np.r_[0.0, np.cumsum(np.log(lam / death[1:]))]
    p = np.exp(logp - logp.max())
    p /= p.sum()
    b = np.minimum(n, c).astype(float)
    off = np.sqrt(lam * death[1:])
    sym = np.diag(-(np.where(n < k_max, lam, 0.0) + death)) + np.diag(off, 1) + np.diag(off, -1)
    ev, vec = eigh(sym)
    w = (vec.T @ (np.sqrt(p) * (b - p @ b))) ** 2
    keep = ev < -1e-9 * float(np.abs(ev).max())
    return -ev[keep], w[keep]


@pytest.mark.parametrize(
    "lam,mean_s,c", [(40.0, 0.15, 7), (5.0, 0.9, 8), (3.0, 0.2, 1), (38.8, 0.15, 6)]
)
def test_busy_variance_by_offered_load_is_the_direct_chains(lam, mean_s, c):
    t = np.array([0.01, 0.3, 3.0, 100.0])
    rates, w = _direct_modes(lam, 1.0 / mean_s, c)
    want = np.sum(2.0 * w * (t[:, None] / rates + np.expm1(-rates * t[:, None]) / rates**2), -1)
    got = input_stream.busy_variance(lam, mean_s, c, t)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # a draw that scales the rate and the speed alike (same load): time scaled by s, the
    # busy-time integral's variance by 1 / s^2
    s = 1.23
    scaled = input_stream.busy_variance(lam * s, mean_s / s, c, t / s)
    np.testing.assert_allclose(scaled, got / s**2, rtol=1e-9)


def test_busy_variance_with_servers_to_spare_is_the_infinite_server_closed_form():
    # with far more servers than the load ever occupies, B = N of an M/M/inf queue: N is
    # Poisson(a), Cov(N(0), N(u)) = a e^(-mu u), so Var[int_0^t B] = 2a (t/mu - (1 - e^(-mu t))/mu^2)
    lam, mean_s, c = 5.0, 0.8, 80
    mu, a = 1.0 / mean_s, lam * mean_s
    t = np.array([0.05, 1.0, 10.0, 500.0])
    want = 2.0 * a * (t / mu - (1.0 - np.exp(-mu * t)) / mu**2)
    np.testing.assert_allclose(input_stream.busy_variance(lam, mean_s, c, t), want, rtol=1e-7)
