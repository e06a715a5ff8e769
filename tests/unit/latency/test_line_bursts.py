"""A PS line fed bursts (issue 13, pdd_plan/latency/line/bursts.py and line_law.py): the size-dependent
GI/G/1-PS delay excess against hand arithmetic from the GI/G/1 wait law, its two limits, the
idle chance, the variance's limits, and the Poisson limit (today's law, unchanged). The replay
check is tests/unit/latency/test_kv_transfer_law.py (narrow-line at arrival cv 2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammainc

from pdd_plan.inputs import profiles
from pdd_plan.latency.line import bursts, transfer
from pdd_plan.latency.line import law as line_law
from pdd_plan.latency.prefill import gig1

TAU = np.array([0.1, 0.5])  # seconds of the line per transfer
W = np.array([0.7, 0.3])
E1, E2 = 0.7 * 0.1 + 0.3 * 0.5, 0.7 * 0.01 + 0.3 * 0.25
M = E2 / (2 * E1)  # mean residual of a transfer found in service
RHO, CA2 = 0.6, 4.0


def _wait() -> gig1.LatticeWait:
    law = gig1.gi_g1_wait(TAU, W, RHO / E1, CA2)
    assert law is not None
    return law


def _probe(t: float) -> tuple[np.ndarray, np.ndarray]:
    """A zero-weight class of size ``t`` beside the two real ones (moments unchanged)."""
    return np.r_[TAU, t], np.r_[W, 0.0]


@pytest.mark.unit
def test_burst_mates_renewal_excess():
    # Poisson gaps bring no excess; Gamma gaps: 0 at once, Cox's (ca2 - 1) / 2 in the long run,
    # and in between the stay-weighted mean of M(t) - lambda t, by quadrature
    t = np.array([0.0, 0.3, 2.0, 1e5])
    assert bursts.burst_mates(t, 2.0, 1.0) == pytest.approx(np.zeros(4), abs=1e-9)
    got = bursts.burst_mates(t, 2.0, CA2)
    # tolerance: rel 1e-4: t = 1e5 s is far past the renewal function's transient; quadrature below
    assert got[0] == 0.0 and got[-1] == pytest.approx((CA2 - 1) / 2, rel=1e-4)
    k, th = 1 / CA2, CA2 / 2.0
    # the n-th arrival's time is Gamma(n k, th), mean n: by t = 2 s the terms past n = 400 are
    # below 1e-60 (P(Gamma(100, 2) < 2))
    n = np.arange(1, 401)[:, None]
    for i in (1, 2):
        u = (np.arange(4000) + 0.5) * t[i] / 4000  # midpoints
        excess = gammainc(n * k, u / th).sum(0) - 2.0 * u
        # tolerance: rel 2e-3, the quadrature's bound (midpoints over 4,000 intervals read 3e-5
        # from the 20,000-point right-endpoint sum this test used before)
        assert got[i] == pytest.approx(excess.mean(), rel=2e-3)
    assert 0 < got[1] < got[2] < got[3]
    # smoother than Poisson (ca2 < 1): fewer follow, (ca2 - 1) / 2 < 0
    assert bursts.burst_mates(np.array([1e5]), 2.0, 0.5)[0] == pytest.approx(-0.25, rel=1e-4)


def _renewal_excess(t: np.ndarray, rate: float, ca2: float) -> np.ndarray:
    """M(t) - lambda t by the plain sum over Gamma partial sums (shape n / ca2)."""
    n = np.arange(1, 4000)[:, None]
    return gammainc(n / ca2, np.asarray(t) * rate / ca2).sum(0) - rate * np.asarray(t)


@pytest.mark.unit
def test_renewal_excess_and_found_count():
    t = np.array([0.0, 0.2, 1.5, 1e5])
    assert bursts.renewal_excess(t, 2.0, 1.0) == pytest.approx(np.zeros(4), abs=1e-9)
    got = bursts.renewal_excess(t, 2.0, CA2)
    assert got[0] == 0.0 and got[-1] == pytest.approx((CA2 - 1) / 2, rel=1e-6)
    assert got[1:3] == pytest.approx(_renewal_excess(t[1:3], 2.0, CA2), rel=1e-9)
    # Poisson, no excess delay: Little's lambda E[T] with the M/G/1-PS stay tau / (1 - rho): N*
    zero = np.zeros(2)
    assert bursts.found_count(TAU, W, RHO, 1.0, zero) == pytest.approx(RHO / (1 - RHO))
    # bursts: lambda E[T] + E[M(T) - lambda T] at each class's stay (hand sum)
    d = np.array([0.05, 0.3])
    stay = TAU / (1 - RHO) + d
    lam = RHO / E1
    hand = lam * np.dot(W, stay) + np.dot(W, _renewal_excess(stay, lam, CA2))
    assert bursts.found_count(TAU, W, RHO, CA2, d) == pytest.approx(hand, rel=1e-9)
    assert hand > lam * np.dot(W, stay)  # the burst's earlier members are still there


def _count(got: np.ndarray) -> float:
    """The count found at the law's own stays (the fixed point), by the hand sum."""
    lam = RHO / E1
    stay = TAU / (1 - RHO) + got
    return float(lam * np.dot(W, stay) + np.dot(W, _renewal_excess(stay, lam, CA2)))


@pytest.mark.unit
def test_burst_delay_limits_from_the_wait_law():
    ew = _wait().mean
    v_poisson = RHO * M / (1 - RHO)  # Pollaczek-Khinchine
    v_time = RHO * ew + RHO * M  # Brumelle
    assert ew > v_poisson  # bursts: more work found
    got = bursts.burst_delay(TAU, W, RHO, CA2)
    n = _count(got)  # the law is its own count's fixed point
    # small: the transfers found beyond N* (count-based), times its size (the rest of its
    # burst has not come yet; it comes slowly, ~ t^(1 / ca2): 0.3% at 1e-9 s)
    tiny = bursts.burst_delay(*_probe(1e-9), RHO, CA2)[-1]
    assert tiny == pytest.approx((n - RHO / (1 - RHO)) * 1e-9, rel=1e-2)
    # long: the Poisson law's tau rho / (1 - rho) plus the constant work conservation gives,
    # the whole burst after it, E[tau] (ca2 - 1) / 2, included (the count does not enter)
    huge = bursts.burst_delay(*_probe(1e5), RHO, CA2)[-1]
    assert huge == pytest.approx((ew + E1 * (CA2 - 1) / 2 - v_time) / (1 - RHO), rel=1e-6)
    # in between, per class: the fresh members found beyond E[W] / m, E[min(tau_j, tau)]
    # each (PS: equal service until the first leaves); the work found's part with its slope
    # and the rest of K, shaped as the size law's equilibrium residual E[min(R, x)] / m
    # (M/M/1's would be 1 - e^(-x / m)); and the rest of the burst, by quadrature
    fresh = n - ew / M
    slope = ew / M - RHO / (1 - RHO)
    offset = (ew - v_time) / (1 - RHO) - fresh * E1
    x = TAU * slope / offset * M
    mn = np.minimum(x[:, None], TAU[None, :])
    residual = (mn * (2 * TAU[None, :] - mn)) @ W / (2 * E1 * M)
    shared = np.minimum(TAU[:, None], TAU[None, :]) @ W
    hand = offset * residual + fresh * shared + _mates(TAU * (1 + ew / M), None)
    assert got == pytest.approx(hand, rel=1e-3)  # the count's renewal excess is tabulated


def _mates(stay: np.ndarray, lead: np.ndarray | None) -> np.ndarray:
    """The rest of the burst by hand: sum_j w_j integral (M'(u) - lambda) min(tau_j, r(u +
    S_j)) du, r falling linearly from tau_i to 0 over the stay, by parts and midpoints on the
    plain renewal sum, times the M/M/1-PS gain."""
    lam = RHO / E1
    s = np.zeros(2) if lead is None else lead
    out = np.zeros(2)
    for i in range(2):
        for j in range(2):
            hi = stay[i] - s[j]
            lo = max(stay[i] * (1 - TAU[j] / TAU[i]) - s[j], 0.0)
            if hi <= lo:
                continue
            u = lo + (np.arange(1000) + 0.5) * (hi - lo) / 1000
            # stays of a few seconds: the terms past n = 600 (P(Gamma(150, 1.5) < 10)) vanish
            n = np.arange(1, 601)[:, None]
            r = gammainc(n / CA2, u * lam / CA2).sum(0) - lam * u
            out[i] += W[j] * TAU[i] / stay[i] * r.mean() * (hi - lo)
    gain = -np.expm1(-(1 - RHO) * TAU / M) / ((1 - RHO) * -np.expm1(-TAU / M))
    return out * gain


@pytest.mark.unit
def test_mates_late_by_their_own_prefill():
    """A burst's members reach the line their own prefill after their start: the small come
    first, the large late, so a transfer meets less of their work during its stay (by hand,
    and the tabulated law), and in the long run their whole work, E[tau] (ca2 - 1) / 2."""
    ew = _wait().mean
    stay = TAU * (1 + ew / M)
    lead = np.array([0.05, 0.6])  # the big transfer's prefill is long
    gain = -np.expm1(-(1 - RHO) * TAU / M) / ((1 - RHO) * -np.expm1(-TAU / M))
    assert bursts.mates_gain(TAU, M, RHO) == pytest.approx(gain, rel=1e-12)
    for s in (None, lead):
        got = bursts.mates_delay(TAU, W, stay, RHO / E1, CA2, s) * gain
        # tolerance: rel 1e-2, the 129-point table of R(x) / x against 1,000 midpoints
        assert got == pytest.approx(_mates(stay, s), rel=1e-2)
    none = bursts.mates_delay(TAU, W, stay, RHO / E1, CA2, None)
    late = bursts.mates_delay(TAU, W, stay, RHO / E1, CA2, lead)
    assert np.all(late < none)
    # small: tau times the members' stay-weighted count; long: their work, whatever the lead
    lam = RHO / E1
    tiny = bursts.mates_delay(np.r_[TAU, 1e-3], np.r_[W, 0], np.r_[stay, 1e-3], lam, CA2, None)
    want = 1e-3 * bursts.burst_mates(np.array([1e-3]), lam, CA2)[0]
    assert tiny[-1] == pytest.approx(want, rel=1e-2)
    far = np.r_[stay, 1e6]
    for s in (None, np.r_[lead, 0.0]):
        long = bursts.mates_delay(np.r_[TAU, 1e5], np.r_[W, 0], far, lam, CA2, s)
        assert long[-1] == pytest.approx(E1 * (CA2 - 1) / 2, rel=1e-3)


@pytest.mark.unit
def test_burst_delay_poisson_idle_and_found_shift():
    assert np.array_equal(bursts.burst_delay(TAU, W, RHO, 1.0), np.zeros(2))
    assert np.array_equal(bursts.burst_delay(TAU, W, 0.0, CA2), np.zeros(2))
    # toward an idle line the excess vanishes (the bare transfer), if slowly: a Gamma
    # stream's next arrival comes within t with probability ~ (lambda t / ca2)^(1 / ca2)
    near = [bursts.burst_delay(TAU, W, r, CA2).max() for r in (1e-2, 1e-4, 1e-6, 1e-9)]
    assert near == sorted(near, reverse=True) and near[-1] < 0.01 * TAU.max()
    # more bursty, more delay, at every size
    assert np.all(bursts.burst_delay(TAU, W, RHO, 6.0) > bursts.burst_delay(TAU, W, RHO, CA2))
    # the big transfers finding less work (their prefill's silence) lower the time-average
    # work (Brumelle's lambda E[tau W]), so the long offset rises
    dv = np.array([0.03, -0.07])
    ew = _wait().mean
    v_time = RHO * ew + RHO / E1 * float(np.dot(W, TAU * dv)) + RHO * M
    offset = (ew + E1 * (CA2 - 1) / 2 - v_time) / (1 - RHO)
    got = bursts.burst_delay(np.r_[TAU, 1e5], np.r_[W, 0.0], RHO, CA2, np.r_[dv, 0.0])
    assert got[-1] == pytest.approx(offset, rel=1e-6)
    # a smoother-than-Poisson stream (ca2 < 1): less delay
    assert np.all(bursts.burst_delay(TAU, W, RHO, 0.5) < 0)


@pytest.mark.unit
def test_idle_ratio_is_the_wait_laws_atom():
    law = _wait()
    assert bursts.idle_ratio(TAU, W, RHO, CA2) == pytest.approx(
        (1 - law.wait_probability) / (1 - RHO), rel=1e-12
    )
    assert bursts.idle_ratio(TAU, W, RHO, CA2) < 1.0  # bursts keep the line busier
    assert bursts.idle_ratio(TAU, W, RHO, 1.0) == 1.0
    assert bursts.idle_ratio(TAU, W, 0.0, CA2) == 1.0


@pytest.mark.unit
def test_variance_ratio_limits():
    law = _wait()
    lam = RHO / E1
    pk = lam * E2 / (2 * (1 - RHO))
    e3 = 0.7 * 0.1**3 + 0.3 * 0.5**3
    var_mg1 = pk * pk + lam * e3 / (3 * (1 - RHO))  # Takacs: E[W^2] - E[W]^2
    var_gi = float(np.dot(law.weights, law.points**2)) - law.mean**2
    small = bursts.variance_ratio(*_probe(1e-9), RHO, CA2)[-1]
    assert small == pytest.approx(var_gi / var_mg1, rel=1e-6)
    cs2 = E2 / E1**2 - 1
    large = bursts.variance_ratio(*_probe(1e5), RHO, CA2)[-1]
    assert large == pytest.approx((CA2 + cs2) / (1 + cs2), rel=1e-9)
    assert np.array_equal(bursts.variance_ratio(TAU, W, RHO, 1.0), np.ones(2))
    # the lattice M/G/1 wait law agrees with Takacs' variance (the small limit's reference)
    m1 = gig1.gi_g1_wait(TAU, W, lam, 1.0)
    assert float(np.dot(m1.weights, m1.points**2)) - m1.mean**2 == pytest.approx(var_mg1, rel=0.02)


@pytest.mark.unit
def test_transfer_law_poisson_is_the_limited_ps_queue_by_hand():
    # eth-1g: one transfer fills the line, 16 slots; M/M/1 in total, so E[N] = rho / (1 - rho)
    # and E[N_q] = rho^17 / (1 - rho) (the geometric tail past 16), by Little's law the hold
    # per byte E[N_s] / (rho C) and the FIFO wait E[N_q] E[x] / (rho C) x (1 + cs^2) / 2
    line = transfer.LineConfig(profiles.line("eth-1g"), 1)
    assert line.pool == 16 and line.flow_cap_bytes_s >= line.capacity_bytes_s
    xb = np.array([5e6, 2e7, 2.5e8])
    w = np.array([0.5, 0.4, 0.1])
    rho, c = 0.63, line.capacity_bytes_s
    got = line_law.transfer_law(xb, w, line, rho)
    n_q = rho**17 / (1 - rho)
    n_s = rho / (1 - rho) - n_q
    ex, ex2 = float(w @ xb), float(w @ xb**2)
    wait = n_q * ex / (rho * c) * (ex2 / ex**2) / 2
    lt = xb * n_s / (rho * c) + wait + line.sku.rtt_ms / 1e3
    bare = xb / c + line.sku.rtt_ms / 1e3
    np.testing.assert_allclose(got.total, lt, rtol=1e-9)
    np.testing.assert_allclose(got.bare, bare, rtol=1e-12)
    assert np.array_equal(got.line_wait, got.total - got.bare)
    # no delay only for a transfer that finds the line idle: under 1 - rho, fewer the longer
    assert np.all(got.atom < 1 - rho) and np.all(np.diff(got.atom) < 0)
    # bursts: more delay, most of all (per second of transfer) for the small ones, fewer
    # transfers that see none
    b = line_law.transfer_law(xb, w, line, 0.63, ca2=4.0)
    gain = (b.line_wait - got.line_wait) / (xb / line.usable_bytes_s)
    # (the smallest meet less of their burst: it has not come yet when they are done)
    assert np.all(b.line_wait > got.line_wait) and min(gain[0], gain[1]) > gain[2]
    assert np.all(b.atom < got.atom) and np.all(b.total == b.bare + b.line_wait)
