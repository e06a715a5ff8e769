"""The vectorized TTFT survivals the planner uses (one pass over targets and paths; the wait's
point masses summed in place) give every entry bit for bit what the plain formula and one call
per entry give; and the point-mass sum against a hand-computed case."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.latency import ttft
from pdd_plan.latency.line import delay_shape
from pdd_plan.latency.prefill import gig1
from pdd_plan.latency.prefill import wait as wait_law
from pdd_plan.latency.prefill.gigc import ExpansionWait

pytestmark = pytest.mark.unit


def _plain_points_part(w, p, t, m):
    """P(w + E > t) summed over the point masses, written as the formula reads."""
    tt, mm = t[..., None], m[..., None]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        e = np.where(mm > 0, np.exp(-np.maximum(tt - w, 0.0) / np.where(mm > 0, mm, 1.0)), 0.0)
    return np.sum(p * np.where(w > tt, 1.0, e), axis=-1)


def test_points_part_by_hand():
    # two masses, 0.5 at 0 s and 0.5 at 1 s, E exponential of mean 2 s, t = 0.5 s:
    # 0.5 e^(-0.5 / 2) + 0.5 (the mass at 1 s is past t)
    got = wait_law._points_part(
        np.array([0.0, 1.0]), np.array([0.5, 0.5]), np.array([0.5]), np.array([2.0])
    )
    assert got[0] == pytest.approx(0.5 * math.exp(-0.25) + 0.5, rel=1e-15)
    # E = 0: only the mass past t counts
    got = wait_law._points_part(
        np.array([0.0, 1.0]), np.array([0.5, 0.5]), np.array([0.5]), np.zeros(1)
    )
    assert got[0] == 0.5


@pytest.mark.parametrize("zero_share", [0.0, 0.5, 1.0])
def test_points_part_is_the_formula_bit_for_bit(zero_share):
    rng = np.random.default_rng(7)
    for _ in range(200):
        n_pts, n = int(rng.integers(1, 260)), int(rng.integers(1, 120))
        w = np.sort(rng.exponential(1.0, n_pts))
        w[0] = 0.0
        p = rng.dirichlet(np.ones(n_pts)) * 0.9
        shape = (n,) if rng.random() < 0.5 else (2, n)
        t = rng.normal(1.0, 2.0, shape) * 10 ** rng.uniform(-3, 2)
        m = rng.exponential(1.0, shape) * 10 ** rng.uniform(-4, 1)
        m[rng.random(shape) < zero_share] = 0.0
        want = _plain_points_part(w, p, t, m)
        got = wait_law._points_part(w, p, t, m)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()


class _Pool:
    """What ttft reads of a prefill pool: its wait law."""

    def __init__(self, law):
        self.wait_law = law


def _lattice_law():
    svc = np.array([0.2, 0.5, 1.4])
    return gig1.gi_g1_wait(svc, np.array([0.5, 0.3, 0.2]), 1.2, 1.0)


@pytest.mark.parametrize("law", [ExpansionWait(0.4, 0.5, 3.0), "lattice"])
def test_miss_probabilities_equal_one_call_per_entry(law):
    pool = _Pool(_lattice_law() if law == "lattice" else law)
    assert pool.wait_law is not None
    rng = np.random.default_rng(3)
    paths = {"a": 5, "b": 9, "c": 1}
    fixed = {k: rng.uniform(0.0, 12.0, n) for k, n in paths.items()}
    mean = {k: rng.exponential(0.3, n) * (k != "c") for k, n in paths.items()}
    var = {k: mean[k] ** 2 * rng.uniform(0.1, 3.0, len(mean[k])) for k in paths}
    atom = {k: rng.uniform(0.0, 0.9, n) for k, n in paths.items()}
    slas = (10.0, 15.0)
    rows = ttft.miss_probabilities(fixed, pool, slas, mean, var, atom)
    for sla, row in zip(slas, rows):
        assert list(row) == list(paths)
        for k in paths:
            one = ttft.miss_probability(fixed[k], pool, sla, mean[k], var[k], atom[k])
            assert row[k].tobytes() == one.tobytes()
            assert np.all((0.0 <= row[k]) & (row[k] <= 1.0))


def _plain_bisect(above, lo, hi, halvings):
    for _ in range(halvings):
        mid = (lo + hi) / 2
        if above(mid):
            lo = mid
        else:
            hi = mid
    return hi


def test_bisect_stops_where_the_plain_loop_ends():
    rng = np.random.default_rng(11)
    for _ in range(500):
        x = float(10 ** rng.uniform(-6, 4))
        lo, hi = float(rng.choice([0.0, -1e-12, x / 3])), x * float(rng.uniform(1.0, 50.0))
        noisy = rng.random() < 0.3  # not monotone near the root: the steps must still agree

        def above(t, x=x, noisy=noisy):
            return t < x or (noisy and math.sin(t * 1e15) > 0.9)

        for n in (5, 60, 80):
            assert delay_shape.bisect(above, lo, hi, n) == _plain_bisect(above, lo, hi, n)
    # the one-ulp stop: 60 halvings of [0, 20] around 7 end within an ulp of 7
    got = delay_shape.bisect(lambda t: t < 7.0, 0.0, 20.0, 60)
    assert got == 7.0 or got == math.nextafter(7.0, 8.0)


def _plain_tail_part(tail, t, m):
    a, t0 = tail.rate, tail.shift
    u = np.maximum(t - t0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        b = np.where(m > 0, 1.0 / np.where(m > 0, m, 1.0), np.inf)
        close = np.abs(b - a) < 1e-9 * np.maximum(a, 1.0)
        conv = np.where(
            close,
            (1 + a * u) * np.exp(-a * u),
            (b * np.exp(-a * u) - a * np.exp(-b * u)) / np.where(close, 1.0, b - a),
        )
    return np.where(m > 0, np.where(t < t0, 1.0, conv), np.exp(-a * u))


@pytest.mark.parametrize("kind", ["some", "none", "half", "rates meet"])
def test_tail_part_is_the_formula_bit_for_bit(kind):
    rng = np.random.default_rng(5)
    for _ in range(200):
        shape = (int(rng.integers(1, 150)),)
        tail = wait_law.ExponentialTail(0.3, float(rng.exponential()), float(rng.exponential(3)))
        t = rng.normal(1.0, 2.0, shape) * 10 ** rng.uniform(-3, 1)
        m = rng.exponential(1.0, shape) * 10 ** rng.uniform(-4, 1)
        if kind == "none":
            m[:] = 0.0
        elif kind == "half":
            m[rng.random(shape) < 0.5] = 0.0
        elif kind == "rates meet":
            m[:] = 1.0 / tail.rate
        want, got = _plain_tail_part(tail, t, m), wait_law._tail_part(tail, t, m)
        assert got.tobytes() == want.tobytes()


def _plain_ttft_quantiles(fixed, share, pool, qs, jit, var, atom, rel_tol=0.0):
    """ttft_quantiles as one search per quantile, 60 halvings each (stopped, with `rel_tol`,
    once the bracket is that narrow relative to its upper end), one survival per point."""
    keep = share > 1e-12
    fixed, jit, var, atom = fixed[keep], jit[keep], var[keep], atom[keep]
    share = share[keep] / share[keep].sum()

    def surv(t):
        return float(np.dot(share, ttft.ttft_survival(t - fixed, pool, jit, var, atom)))

    out = []
    for q in qs:
        lo, hi = 0.0, float(fixed.max() + 10 * jit.max()) + 1.0
        while surv(hi) > 1 - q:
            hi *= 2.0
            if hi > 1e7:
                break
        for _ in range(60):
            if hi - lo <= rel_tol * hi:
                break
            mid = (lo + hi) / 2
            if surv(mid) > 1 - q:
                lo = mid
            else:
                hi = mid
        out.append(hi)
    return out


@pytest.mark.parametrize("law", [ExpansionWait(0.4, 0.5, 3.0), "lattice"])
def test_ttft_quantiles_equal_one_search_per_quantile(law):
    pool = _Pool(_lattice_law() if law == "lattice" else law)
    rng = np.random.default_rng(9)
    for _ in range(5):
        n = int(rng.integers(2, 40))
        fixed = rng.uniform(0.5, 12.0, n)
        share = rng.dirichlet(np.ones(n))
        share[0] = 0.0  # a path no request takes
        jit = rng.exponential(0.3, n)
        var = jit**2 * rng.uniform(0.1, 3.0, n)
        atom = rng.uniform(0.0, 0.9, n)
        qs = (0.5, 0.9, 0.99)
        tol = ttft.QUANTILE_REL_TOL
        want = _plain_ttft_quantiles(fixed, share, pool, qs, jit, var, atom, tol)
        got = ttft.ttft_quantiles(fixed, share, pool, qs, jit, var, atom)
        assert got == want  # the same searches, side by side: the same floats
        assert want == sorted(want)  # quantiles rise with q
        # against the searches run to one ulp: never below, and within the tolerance
        full = _plain_ttft_quantiles(fixed, share, pool, qs, jit, var, atom)
        for g, f in zip(got, full):
            assert f <= g <= f * (1 + 2 * tol)


def test_miss_probabilities_memo_is_by_value_and_safe_to_change():
    """A second pool of an equal wait law (another architecture's) and a path equal to one
    already asked for get the numbers one call per entry gives, bit for bit; a caller's change
    to its rows stays its own."""
    rng = np.random.default_rng(11)
    fixed = {"a": rng.uniform(0.0, 12.0, 6)}
    mean = {"a": rng.exponential(0.3, 6)}
    var = {"a": mean["a"] ** 2 * 1.5}
    atom = {"a": rng.uniform(0.0, 0.5, 6)}
    slas = (10.0, 15.0)
    first = ttft.miss_probabilities(fixed, _Pool(_lattice_law()), slas, mean, var, atom)
    for row in first:
        row["a"][:] = -1.0  # a caller's change
    twice = {
        k: {"a": d["a"], "b": d["a"].copy()}
        for k, d in (("f", fixed), ("m", mean), ("v", var), ("t", atom))
    }
    again = ttft.miss_probabilities(
        twice["f"], _Pool(_lattice_law()), slas, twice["m"], twice["v"], twice["t"]
    )
    for sla, row in zip(slas, again):
        one = ttft.miss_probability(
            fixed["a"], _Pool(_lattice_law()), sla, mean["a"], var["a"], atom["a"]
        )
        assert row["a"].tobytes() == one.tobytes() and row["b"].tobytes() == one.tobytes()


def test_lookahead_midpoints_hold_every_path_the_bisection_can_take():
    """Whichever way each step goes, the midpoints the next `depth` steps visit are among
    delay_shape.midpoints_ahead's (the same floats), and there are at most 2^depth - 1 of them."""
    rng = np.random.default_rng(21)
    for _ in range(300):
        lo = float(rng.choice([0.0, rng.uniform(0, 5)]))
        hi = lo + float(10 ** rng.uniform(-14, 3))
        depth = int(rng.integers(1, 6))
        ahead = delay_shape.midpoints_ahead(lo, hi, depth)
        assert len(ahead) <= 2**depth - 1 and len(set(ahead)) == len(ahead)
        a, b = lo, hi
        for _ in range(depth):
            m = (a + b) / 2
            if m == a or m == b:
                break
            assert m in ahead
            a, b = (m, b) if rng.random() < 0.5 else (a, m)


def _plain_transfer_quantiles(bare, mean, var, atom, weight, qs):
    """delay_shape.transfer_quantiles as it was: one survival per point of each search."""
    w = weight / weight.sum()
    law = delay_shape.two_moment(mean, var, atom)
    lo0 = float(bare.min())
    hi0 = float(np.max(bare + law.shift + 60.0 * law.scale)) + 1e-9

    def above(q):
        return lambda t: float(np.dot(w, delay_shape.delay_survival(t - bare, law))) > 1.0 - q

    return [delay_shape.bisect(above(q), lo0 - 1e-12, hi0, 60) for q in qs]


def test_transfer_quantiles_with_lookahead_equal_one_survival_per_point():
    rng = np.random.default_rng(17)
    for _ in range(20):
        n = int(rng.integers(1, 60))
        bare = rng.uniform(0.01, 3.0, n)
        mean = rng.exponential(0.2, n) * (rng.random(n) < 0.8)
        var = mean**2 * rng.uniform(0.1, 3.0, n)
        atom = rng.uniform(0.0, 0.9, n)
        weight = rng.dirichlet(np.ones(n))
        qs = (0.5, 0.9, 0.99)
        want = _plain_transfer_quantiles(bare, mean, var, atom, weight, qs)
        assert delay_shape.transfer_quantiles(bare, mean, var, atom, weight, qs) == want
