"""The tagged transfer's exact law on a flow-capped PS line (pdd_plan/latency/line/tagged.py, issue
13): its limits (an idle line, a line one transfer fills: Coffman-Muntz-Trotter), the
limited-PS mean, and a Monte Carlo of the tagged chain."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.common.scipy_direct import linalg_extension
from pdd_plan.latency.closed_forms import limited_ps_numbers
from pdd_plan.latency.line import tagged as tt
from pdd_plan.latency.line.delay_shape import ps_sojourn_variance


def _moments(c, rho, cap, f, mean, x):
    law = tt.tagged_law(c, rho, cap, f, mean)
    return tt.tagged_moments(law, np.asarray(x, dtype=float))


@pytest.mark.unit
def test_an_idle_line_runs_every_transfer_at_its_cap():
    # rho -> 0: no one to share with, T = x / f exactly, no spread, no delay
    x = np.array([1e3, 1e6, 1e8])
    m, m2, atom = _moments(8, 1e-9, 10.0, 3.0, 1e6, x)
    assert m == pytest.approx(x / 3.0, rel=1e-8)
    assert m2 - m * m == pytest.approx(np.zeros(3), abs=1e-6 * float(np.max(m * m)))
    assert atom == pytest.approx(np.ones(3), abs=1e-6)


@pytest.mark.unit
@pytest.mark.parametrize("rho", [0.3, 0.75, 0.9])
def test_a_line_one_transfer_fills_is_mm1_ps(rho):
    # f = C and a pool that never binds: M/M/1-PS. Mean x / (C (1 - rho)) (Kleinrock),
    # variance Coffman-Muntz-Trotter, P(no one ever shares) = (1 - rho) e^(-lambda x / C)
    cap, mean = 2.0, 5.0
    x = np.array([0.05, 1.0, 5.0, 40.0])
    m, m2, atom = _moments(4000, rho, cap, cap, mean, x)
    assert m == pytest.approx(x / (cap * (1 - rho)), rel=1e-9)
    cmt = ps_sojourn_variance(x / cap, mean / cap, rho)
    assert m2 - m * m == pytest.approx(cmt, rel=1e-6)
    assert atom == pytest.approx((1 - rho) * np.exp(-rho * x / mean), rel=1e-9)


@pytest.mark.unit
@pytest.mark.parametrize("c, rho, tol", [(400, 0.75, 1e-9), (32, 0.75, 1e-3), (12, 0.5, 1e-3)])
def test_the_mean_is_the_limited_ps_per_byte(c, rho, tol):
    # PS with a state-dependent total rate is insensitive: E[T | x] is linear in x, the
    # Little's-law figure E[N_s] / lambda per mean size (limited_ps's hold);
    # exactly where the pool never binds, to P(pool full) (~1e-4 here) where it may: the
    # tagged chain starts from the found number as if served at once
    cap, f, mean = 18.0, 13.4, 3.0
    usable = min(cap, c * f)
    n_s, _ = limited_ps_numbers(c, rho, cap, f)
    per_byte = n_s / (rho * usable)
    x = np.array([0.01, 0.3, 3.0, 30.0])
    m, _, _ = _moments(c, rho, cap, f, mean, x)
    assert m == pytest.approx(x * per_byte, rel=tol)


@pytest.mark.unit
def test_a_capped_transfer_varies_less_than_cmt_at_the_same_slowdown():
    # the old law: CMT at rho_e with 1 / (1 - rho_e) = the mean slowdown; on a capped line a
    # transfer with few others runs at its cap, so the spread is narrower
    cap, f, mean, rho = 18.0, 13.4, 3.0, 0.75
    x = np.array([0.3, 3.0, 30.0])
    m, m2, atom = _moments(32, rho, cap, f, mean, x)
    slowdown = m[0] / (x[0] / f)
    rho_e = 1 - 1 / slowdown
    tau = x / f
    old = ps_sojourn_variance(tau, float(np.mean(tau)), rho_e)
    assert np.all(m2 - m * m < old)
    # small x: the state found sets the speed for the whole transfer, Var ~ x^2 Var[1 / s]
    assert np.all(np.diff(atom) < 0) and 0 < atom[0] < 1


def _monte_carlo(c, rho, cap, f, x, paths, seed):
    """The tagged chain simulated in served bytes (mean size 1): (mean T, var T, P(T = x / f))."""
    logpi, birth, death, s = tt._chains(c, rho, cap, f)
    rng = np.random.default_rng(seed)
    pi = np.exp(logpi)
    starts = rng.choice(pi.size, size=paths, p=pi / pi.sum())
    ts = np.empty(paths)
    for i, n in enumerate(starts):
        b, t = 0.0, 0.0
        while True:
            rate = birth[n] + death[n]
            step = rng.exponential(1.0 / rate) if rate > 0 else np.inf
            if b + step >= x:
                t += (x - b) / s[n]
                break
            b += step
            t += step / s[n]
            n = n + 1 if rng.random() < birth[n] / rate else n - 1
        ts[i] = t
    return float(ts.mean()), float(ts.var()), float(np.mean(np.isclose(ts, x / f, rtol=1e-12)))


@pytest.mark.unit
@pytest.mark.parametrize("x", [0.2, 1.5, 6.0])
def test_matches_a_monte_carlo_of_the_tagged_chain(x):
    # a small capped line: 3 slots, each transfer at most 0.45 of the line, 70% busy
    c, rho, cap, f = 3, 0.7, 1.0, 0.45
    m, m2, atom = _moments(c, rho, cap, f, 1.0, np.array([x]))
    paths = 20_000
    mc_m, mc_v, mc_atom = _monte_carlo(c, rho, cap, f, x, paths, seed=7)
    var = float(m2[0] - m[0] ** 2)
    # 4 standard errors: the mean's sqrt(var / n), the variance's ~ var sqrt(2 / n) (wider
    # tails: x 3), the atom's binomial
    assert abs(mc_m - m[0]) <= 4 * np.sqrt(var / paths)
    assert abs(mc_v - var) <= 4 * 3 * var * np.sqrt(2 / paths)
    assert abs(mc_atom - atom[0]) <= 4 * np.sqrt(atom[0] * (1 - atom[0]) / paths) + 1e-9


@pytest.mark.unit
@pytest.mark.parametrize("n", [2, 3, 40, 700])
def test_the_direct_lapack_call_is_scipys_eigh_tridiagonal_bit_for_bit(n):
    # tagged.eigh_tridiagonal calls LAPACK's dstevd without importing scipy.linalg (~0.3 s):
    # the same routine on the same arrays, so the same bits as scipy's public function
    from scipy.linalg import eigh_tridiagonal  # the reference the direct call must equal

    rng = np.random.default_rng(n)
    diag, off = -rng.gamma(2.0, 1.0, n), rng.gamma(2.0, 0.5, n - 1)
    w, v = tt.eigh_tridiagonal(diag, off)
    # on one BLAS thread, as the direct call runs it (dstevd's dgemm merges give last bits
    # that follow the thread count)
    with tt.one_blas_thread(linalg_extension("_flapack")):
        w_ref, v_ref = eigh_tridiagonal(diag, off, lapack_driver="stevd")
    assert np.array_equal(w, w_ref) and np.array_equal(v, v_ref)
    # an independent property: V diag(w) V' rebuilds the matrix
    t = np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)
    assert np.allclose(v @ np.diag(w) @ v.T, t, atol=1e-10 * np.abs(t).max())


@pytest.mark.unit
def test_bad_input_gets_scipys_error():
    with pytest.raises(ValueError):
        tt.eigh_tridiagonal(np.array([1.0, np.nan]), np.array([0.5]))
    with pytest.raises(ValueError):
        tt.eigh_tridiagonal(np.array([1.0, 2.0]), np.array([0.5, 0.1]))


@pytest.mark.unit
def test_one_blas_thread_restores_the_thread_count():
    """Inside, the calling thread's OpenBLAS count is 1; after, the one before (where scipy's
    bundled OpenBLAS is found: elsewhere the limit is a no-op)."""
    flapack = linalg_extension("_flapack")
    setter = tt._thread_setter(str(getattr(flapack, "__file__", "")))
    if setter is None:
        pytest.skip("scipy's bundled OpenBLAS not found: one_blas_thread is a no-op here")
    before = setter(1)
    setter(before)  # the count as it was (the machine's cores, or what the env asked)
    with tt.one_blas_thread(flapack):
        assert setter(1) == 1
    assert setter(before) == before


@pytest.mark.unit
@pytest.mark.parametrize(
    "c,rho,cap,f", [(8, 0.6, 10.0, 3.0), (4, 0.93, 25.0, 2.5), (16, 0.3, 5.0, 1.0)]
)
def test_the_chain_memo_gives_each_mean_size_what_a_fresh_law_gives(c, rho, cap, f):
    """The chain's decomposition is shared across mean sizes (tagged._chain): a law built on a
    memoized chain, after another size's, is the law built from nothing, bit for bit."""
    x = np.array([2e5, 1e6, 3e7])
    means = (1e6, 4.7e6)
    fresh = []
    for mean in means:
        tt._chain.cache_clear()
        tt.tagged_law.cache_clear()
        fresh.append(tt.tagged_moments(tt.tagged_law(c, rho, cap, f, mean), x))
    tt.tagged_law.cache_clear()  # the chain stays: the second size's law is built on it
    for mean, want in zip(means, fresh):
        got = tt.tagged_moments(tt.tagged_law(c, rho, cap, f, mean), x)
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()
    assert tt._chain.cache_info().hits >= 1
