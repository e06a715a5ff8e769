"""sim.tails: a long stage replay's waits composed with the rest of each request's time, against
closed forms (the M/M/1 sojourn time, the M/M/c Erlang C wait) and exact properties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.sim import tails
from pdd_plan.sim.queues import fifo_least_loaded, lindley_wait

pytestmark = pytest.mark.unit


def _mm(c: int, lam: float, mu: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Waits and services of ``n`` M/M/c FCFS requests (the simulator's own queue engine)."""
    rng = np.random.default_rng(seed)
    a = np.cumsum(rng.exponential(1 / lam, n))
    s = rng.exponential(1 / mu, n)
    if c == 1:
        return lindley_wait(a, s), s
    start, _ = fifo_least_loaded(a, [s], [c])
    return start - a, s


def test_mm1_sojourn_is_exponential():
    """M/M/1 FCFS: wait + own service (independent of the wait) is Exp(mu - lambda); the
    composition of a long wait series with a short, separate series of services reads its
    P50/P90/P99 (-ln(1 - q) / (mu - lambda)) within 4%, each inside its interval's reach."""
    lam, mu = 0.8, 1.0
    w, _ = _mm(1, lam, mu, 400_000, 1)
    _, s = _mm(1, lam, mu, 20_000, 2)  # the short replay's rest: a separate draw
    c = tails.composed(w[1000:], s)
    want = -np.log(1 - np.asarray(tails.QS)) / (mu - lam)  # 3.47, 11.51, 23.03 s
    # tolerance: 4 %, the wait series' sampling error: 400,000 waits at 80 % busy relax every
    # ~50 requests (tails.relaxation), ~8,000 independent stretches, ~80 of them past the P99
    assert np.all(np.abs(c.points / want - 1) < 0.04), (c.points, want)
    assert np.all(c.lo <= c.points) and np.all(c.points <= c.hi)
    assert abs(c.mean - 1 / (mu - lam)) < 0.2  # mean sojourn 5 s


def test_mmc_wait_matches_erlang_c():
    """M/M/4 at 90% busy with nothing after the wait: the composed P90/P99 are the Erlang C
    wait's, t_q = ln(C / (1 - q)) / (c mu - lambda) (C the chance of waiting), within 5%."""
    c, mu, rho = 4, 1.0, 0.9
    lam = rho * c * mu
    a = lam / mu
    tail = a**c / math.factorial(c) / (1 - rho)
    erlang_c = tail / (sum(a**k / math.factorial(k) for k in range(c)) + tail)  # 0.7455
    w, _ = _mm(c, lam, mu, 300_000, 3)
    got = tails.composed(w[2000:], np.zeros(5000))
    for q, v in zip(tails.QS, got.points):
        if q > 1 - erlang_c:  # P50 sits in the atom at 0 (no wait for a quarter of requests)
            want = math.log(erlang_c / (1 - q)) / (c * mu - lam)
            # tolerance: 5 %, sampling error: 300,000 waits at 90 % busy relax every ~200
            # requests, ~1,500 independent stretches, ~15 past the P99
            assert abs(v / want - 1) < 0.05, (q, v, want)


def test_constant_rest_shifts_every_percentile():
    """A rest of d seconds for every request moves each percentile by d (to the grid's
    resolution), and a negative one moves the grid with it."""
    w, _ = _mm(2, 1.6, 1.0, 50_000, 4)
    base = tails.composed(w, np.zeros(1000))
    for d in (0.75, -0.25):
        moved = tails.composed(w, np.full(1000, d))
        # tolerance: 2e-3 of the top percentile: the grid (GRID / 2 bins over the range) is
        # laid afresh on the shifted range, so each percentile moves by a few bins of 2.4e-4
        assert np.allclose(moved.points, base.points + d, atol=2e-3 * base.points[-1])
        assert moved.mean == pytest.approx(base.mean + d)


def test_independent_rest_against_direct_sum():
    """Against the sum computed directly: independent lognormal W and R, the composed P90 and
    P99 of 200k x 20k within 2% of the P90 and P99 of 4M direct sums."""
    rng = np.random.default_rng(5)
    w = rng.lognormal(0.0, 0.8, 200_000)
    r = rng.lognormal(1.0, 0.5, 20_000)
    got = tails.composed(w, r)
    direct = rng.lognormal(0.0, 0.8, 4_000_000) + rng.lognormal(1.0, 0.5, 4_000_000)
    want = np.quantile(direct, tails.QS)
    assert np.all(np.abs(got.points / want - 1) < 0.02), (got.points, want)


def test_nothing_to_compose_is_an_error():
    with pytest.raises(ValueError, match="nothing to compose"):
        tails.composed(np.zeros(0), np.ones(10))
    with pytest.raises(ValueError, match="nothing to compose"):
        tails.composed(np.ones(10), np.full(10, np.nan))


def test_relaxation_grows_near_saturation():
    """(ca2 + cs2) / (1 - rho)^2: the default's 96% pool with cs2 2.9 is ~2,400 requests;
    saturation has none (infinite)."""
    assert tails.relaxation(0.96, 2.9) == pytest.approx(3.9 / 0.04**2)
    assert tails.relaxation(0.8, 1.0) < tails.relaxation(0.9, 1.0)
    assert math.isinf(tails.relaxation(1.0, 1.0))


def test_stage_length_spans_relaxation_times():
    """400 relaxation times, at least the replay's length, at most MAX_STAGE."""
    assert tails.stage_length(20_000, 0.5, 1.0) == 20_000  # 3,200 wanted: the replay's own
    assert tails.stage_length(20_000, 0.96, 2.9) == 975_000  # 400 x 3.9 / 0.04^2
    assert tails.stage_length(20_000, 1.0, 1.0) == tails.MAX_STAGE


def test_distinct_pairs_index_every_request_back_to_its_own_pair():
    rng = np.random.default_rng(3)
    n = 60_000
    inp = np.full(n, 65536, dtype=np.int64)
    inp[::7] = 65535  # two prompt lengths: a table of 2 x 65,537 pairs
    cached = np.floor(inp * rng.choice([0.0, 0.5, 0.97, 1.0], size=n))
    got = tails._distinct(inp, cached)
    assert got is not None
    first, inverse = got
    # each request's pair is its distinct pair's, and each distinct pair occurs once
    np.testing.assert_array_equal(inp[first][inverse], inp)
    np.testing.assert_array_equal(cached[first][inverse], cached)
    pairs = set(zip(inp[first].tolist(), cached[first].tolist()))
    assert len(pairs) == first.size == len(set(zip(inp.tolist(), cached.tolist())))


def test_distinct_pairs_refuse_short_or_widely_spread_prompts():
    rng = np.random.default_rng(4)
    short = np.full(1000, 4096, dtype=np.int64)
    assert tails._distinct(short, np.zeros(1000)) is None  # too few to pay
    spread = rng.integers(1, 200_000, size=60_000)  # a table of 4e10 pairs
    assert tails._distinct(spread, np.zeros(60_000)) is None


def test_composed_sample_is_an_even_sample_of_the_composed_law():
    # W exponential (mean 1 s) plus a constant 0.5 s: the sample's i-th value is the law's
    # (i + 1/2)/k quantile, 0.5 - ln(1 - u), to the grid's bin (top / 4,096)
    rng = np.random.default_rng(5)
    w = rng.exponential(1.0, 400_000)
    rest = np.full(2000, 0.5)
    k = 1000
    got = tails.composed_sample(w, rest, k)
    u = (np.arange(k) + 0.5) / k
    exact = 0.5 - np.log1p(-u)
    bin_s = (w.max() + 0.5) / (tails.GRID // 2 - 1)
    assert got.shape == (k,) and np.all(np.diff(got) >= 0)
    inner = u < 0.99  # the far tail of 400,000 draws is itself sampling noise
    # tolerance: two grid bins, plus 0.02 s for the draws themselves (the standard error of
    # 400,000 draws' 0.99 quantile, sqrt(0.99 x 0.01 / 400,000) / 0.01 = 0.016 s); measured 0.011
    assert np.max(np.abs(got - exact)[inner]) < 2 * bin_s + 0.02
    # the points `composed` states are the sample's at the same quantiles; tolerance 2 %: the
    # 1,000-point sample's P99 interpolates points 0.001 apart where the density is 0.01/s,
    # 0.1 s of 5.1 s (measured -0.9 %)
    c = tails.composed(w, rest)
    for q, p in zip(tails.QS, c.points):
        assert np.quantile(got, q) == pytest.approx(p, rel=0.02)
