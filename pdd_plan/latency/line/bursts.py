"""A processor-sharing line fed bursts: the delay each transfer size sees (arrival cv > 1).

Fed Poisson arrivals, a PS line's mean delay beyond the bare transfer is ``tau rho / (1 - rho)``
for every size (M/G/1-PS). Fed a renewal stream with gap squared CV ``ca2 > 1`` it is not that
line stretched by one ratio: a burst's transfers arrive on a line its earlier members filled and
are followed by its later ones, so the small transfers (which set the median) are slowed far more
per second of their own than the big ones (narrow-line, cv 2: 4.3 x their size against 2.5 x
for the top decile; benchmarks/line_bursts_by_size.py). This module gives the delay's excess
over the Poisson-fed law, ``delta(tau)``, from two limits (seconds of the line's usable rate;
``tau`` a transfer's own, ``m = E[tau^2] / (2 E[tau])`` the mean residual of a transfer found in
service, ``lambda`` the arrival rate, ``N* = rho / (1 - rho)``):

On a PS line two transfers get equal service while both are there, so one delays another by
exactly ``min`` of what each has left when they meet. The excess has three parts:

* **The fresh members found** (:func:`found_count`): each earlier arrival, ``s`` back, still
  there while its stay outlasts ``s``, ``N_f = lambda E[T] + E[M(T) - lambda T]`` (Little's
  number plus the burst's earlier members, fresh; a fixed point, the stays carrying the
  excess). The work found, the FIFO wait's ``E[W]`` (:func:`gig1.gi_g1_wait`, exact for Gamma
  gaps), in units of ``m`` counts them too few (exact for M/G/1-PS's i.i.d. equilibrium
  residuals): the ``N_f - E[W] / m`` beyond it are whole transfers of the size law, each
  costing ``E[min(tau_j, tau)]``.
* **The work found** beyond Poisson's: small transfers, slowed by ``tau`` for each transfer
  found, slope ``E[W] / m - N*``; long ones, by work conservation (the line serves, during the
  stay ``T``, the work found, the work arriving and the transfer, less what the others still
  hold when it leaves, ``T = tau + W + A(T) - V_end``, ``V_end`` the time-stationary work
  ``E[V] = lambda E[tau W] + rho m``, Brumelle's formula: a long stay ends at a time unrelated
  to its start), ``K = (E[W] - E[V]) / (1 - rho)`` less the fresh members' ``(N_f - E[W] / m)
  E[tau]``. Between them the transfers found are equilibrium residuals of the size law
  (M/G/1-PS's): ``K Psi(tau m / L)``, ``Psi(x) = E[min(R, x)] / m`` (:func:`_residual`; M/M/1's
  residual would give the exponential ``1 - e^(-tau / L)``), ``L = K / slope`` so both limits
  hold.
* **The rest of the burst**, met during the stay (:func:`mates_delay`): the renewal function's
  excess ``M(u) - lambda u`` after the transfer, each member costing it ``min(tau_j, r)``
  (``r`` what it has left, falling linearly over the stay ``T = tau (1 + E[W] / m)``) and
  coming late by its own prefill (a burst's members reach the line their own prefill after
  their start: the small first, the large late), amplified by the line as one more transfer
  found is in M/M/1-PS (:func:`mates_gain`: 1 small, ``1 / (1 - rho)`` long). Small ``tau``:
  ``tau`` times their stay-weighted count; long: their work, ``E[tau] (ca2 - 1) / 2`` (the
  renewal function's asymptote, Cox 1962, "Renewal Theory"), over ``1 - rho``.

Small transfers: slope ``N_f - N*`` plus the members' count (Poisson: ``N_f = N*``, no members:
0); long ones: ``tau rho / (1 - rho)`` plus the constant ``(E[W] + E[tau] (ca2 - 1) / 2 -
E[V]) / (1 - rho)``: a long stay's slope is the time-average ``1 / (1 - rho)`` whatever the
arrivals. Poisson arrivals give ``delta = 0`` (today's law); toward an idle line it vanishes
(the next arrival of a Gamma stream comes within ``t`` with probability ~ ``(lambda t /
ca2)^(1 / ca2)``, so slowly). No constant is fitted: ``E[W]``, the members, ``E[V]`` come from
the sizes, their prefills, the load and ``ca2`` alone. Narrow line at cv 2 with relay decode
(tests/integration/test_line_law_vs_replay.py): the mean delay by size within 10% of the
replay's, where the exponential bridge with members of mean size read 12-20% long for the mid
sizes (30-130 MB) and the members' work alone 10-20% short for the small.

**No delay** (:func:`idle_ratio`): a transfer that finds the line idle and keeps it to itself
sees none; the line is idle at an arrival with probability ``P(W = 0)`` (the GI/G/1 wait law's
atom), not the Poisson ``1 - rho``, so the Poisson law's no-delay chance is scaled by their
ratio. **Variance** (:func:`variance_ratio`): the found work's (small) and the arriving work's
(long) over Poisson's.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pdd_plan.latency.prefill import gig1

_RENEWAL_SPAN = 50.0  # gap scales after which the renewal excess is at its asymptote (to ~1e-6)


def gammainc(a, x):
    """scipy.special.gammainc (regularized lower incomplete gamma), imported on first use."""
    from scipy.special import gammainc as g  # ~0.4 s to import; only bursty arrivals need it

    return g(a, x)


def _moments(
    sizes_s: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float, float]:
    tau = np.asarray(sizes_s, dtype=float)
    w = np.asarray(weight, dtype=float)
    w = w / float(np.sum(w))
    return tau, w, float(np.dot(w, tau)), float(np.dot(w, tau * tau))


def _wait(sizes_s: np.ndarray, weight: np.ndarray, rho: float, ca2: float):
    tau, w, e1, _ = _moments(sizes_s, weight)
    if ca2 == 1.0 or not 0.0 < rho < 1.0 or e1 <= 0:
        return None
    keep = w > 0  # a class no request takes does not move the law (nor widen its lattice)
    return gig1.gi_g1_wait(tau[keep], w[keep], rho / e1, ca2)


def burst_mates(stay_s: np.ndarray, rate: float, ca2: float) -> np.ndarray:
    """``(1 / T) integral_0^T (M(t) - lambda t) dt`` per stay ``T``: the transfers a renewal
    stream (Gamma gaps, mean ``1 / rate``, squared CV ``ca2``) brings beyond Poisson's after an
    arrival, each weighted by the share of the stay still ahead when it comes (a tagged
    transfer's attained service grows about linearly over its stay, so one arriving at ``t``
    shares ``1 - t / T`` of it). ``M(t) = sum_n P(S_n <= t)``, ``S_n`` Gamma of shape
    ``n / ca2``: ``integral_0^T P(S_n <= t) dt = T G(n k, T / th) - n k th G(n k + 1, T / th)``
    (``G`` the regularized lower incomplete gamma, ``k = 1 / ca2``, ``th = ca2 / rate``). 0 at
    ``T = 0``, ``(ca2 - 1) / 2`` (Cox's renewal-function asymptote) as ``T -> inf``."""
    t = np.asarray(stay_s, dtype=float)
    k, th = 1.0 / ca2, ca2 / rate
    top = _RENEWAL_SPAN * th  # beyond it the excess has reached its asymptote
    x = np.minimum(t, top) / th
    xm = float(x.max()) if x.size else 0.0
    n = np.arange(1, int(np.ceil((xm + 10.0 * np.sqrt(xm) + 30.0) / k)) + 1)[:, None]
    area = np.sum(x * gammainc(n * k, x) - n * k * gammainc(n * k + 1.0, x), axis=0) * th
    tc = np.minimum(t, top)
    area = area - rate * tc * tc / 2.0 + (t - tc) * (ca2 - 1.0) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(t > 0, area / np.where(t > 0, t, 1.0), 0.0)


def mates_delay(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    stay_s: np.ndarray,
    rate: float,
    ca2: float,
    lead_s: np.ndarray | None,
) -> np.ndarray:
    """The delay (s) the rest of its burst adds to a transfer of ``tau_i`` staying ``T_i``, before
    the line's own amplification (:func:`mates_gain`). On a PS line two transfers get equal
    service while both are there, so a member of ``tau_j`` that comes when the tagged one has
    ``r`` left to send delays it by ``min(tau_j, r)``, exactly; with ``r`` falling linearly over
    the stay, ``r(t) = tau_i (1 - t / T_i)``, and the members beyond Poisson's coming at the
    renewal's excess rate ``M'(u) - lambda`` (``u`` after the tagged one left its prefill),
    each late by its own prefill ``S_j`` (a burst's members are started in turn and reach the
    line their own prefill after their start: the small first, the large late),
    ``D_i = sum_j w_j integral_0^inf (M'(u) - lambda) min(tau_j, r(u + S_j)) du = (tau_i /
    T_i) sum_j w_j [R(T_i - S_j) - R(T_i (1 - tau_j / tau_i) - S_j)]`` (by parts; ``R(x) =
    integral_0^x (M(u) - lambda u) du = x burst_mates(x)``, 0 for ``x <= 0``, ``burst_mates``
    tabulated on :data:`_MATES_GRID` quartic steps to the asymptote's reach (to 0.5%: steep
    at 0, ~ x^(1 / ca2)), its asymptote's slope ``(ca2 - 1) / 2`` beyond). Small ``tau_i``: ``tau_i``
    times the members' stay-weighted count (each shares the line with it whatever its size);
    long: ``E[tau] (ca2 - 1) / 2``, their work, whatever their lead. ``lead_s``: each class's
    prefill ``S_j`` (None: no pool, no lead; assumption: the starts' lag is the renewal's,
    exact while the pool has a free instance, a queued member starts later still). Replay of
    the narrow line at cv 2: the members within 0.5 s of a transfer average 0.07-0.2 s of the
    line against E[tau] 0.38, those after 1.5 s E[tau]; the work they bring beyond Poisson's
    reads -0.03/-0.09/+0.14 s at 0.05/0.5/16 s (the replay -0.02/-0.06/+0.12-0.17) where
    members of mean size would bring +0.22/+0.41/+0.55."""
    tau = np.asarray(sizes_s, dtype=float)
    w = np.asarray(weight, dtype=float) / float(np.sum(weight))
    t = np.asarray(stay_s, dtype=float)
    lead = np.zeros_like(tau) if lead_s is None else np.asarray(lead_s, dtype=float)
    theta = ca2 / rate
    unit, mean = _mates_table(float(f"{ca2:.12g}"))  # R(x) / x at the grid points
    grid = unit * theta
    top = float(grid[-1])

    def integral(x: np.ndarray) -> np.ndarray:
        # R(x) = x (R(x) / x): the mean interpolated, so R keeps its slope 0 at x = 0
        x = np.maximum(x, 0.0)
        inside = np.minimum(x, top)
        return inside * np.interp(inside, grid, mean) + np.maximum(x - top, 0.0) * (ca2 - 1.0) / 2.0

    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(tau[:, None] > 0, tau[None, :] / np.where(tau > 0, tau, 1.0)[:, None], 1.0)
        upper = t[:, None] - lead[None, :]
        lower = t[:, None] * (1.0 - ratio) - lead[None, :]
        d = (integral(upper) - integral(lower)) @ w
        return np.where(t > 0, tau / np.where(t > 0, t, 1.0) * d, 0.0)


@lru_cache(maxsize=64)
def _mates_table(ca2: float) -> tuple[np.ndarray, np.ndarray]:
    """(grid in gap scales ``ca2 / rate``, :func:`burst_mates` there) for :func:`mates_delay`:
    ``burst_mates`` is a function of ``t rate / ca2`` and ``ca2`` alone (the Gamma stream in
    its own time unit), so one table serves every rate (to 12 figures of ``ca2``)."""
    unit = _RENEWAL_SPAN * np.linspace(0.0, 1.0, _MATES_GRID) ** 4
    return unit, burst_mates(unit * ca2, 1.0, ca2)


def mates_gain(sizes_s: np.ndarray, m: float, rho: float) -> np.ndarray:
    """What the line makes of a delay a burst member causes directly, per transfer of
    ``tau``: the transfers that come during the longer stay share the line too. M/M/1-PS
    conditioned on one more transfer found (the response :mod:`found_work` uses): it costs
    ``m (1 - e^(-(1 - rho) tau / m)) / (1 - rho)`` against its direct ``E[min(tau, Exp(m))]
    = m (1 - e^(-tau / m))``; their ratio, 1 for a small transfer (nothing else comes in its
    short stay), ``1 / (1 - rho)`` for a long one (all the work arriving meanwhile is served
    before it leaves)."""
    tau = np.asarray(sizes_s, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = -np.expm1(-(1.0 - rho) * tau / m) / ((1.0 - rho) * -np.expm1(-tau / m))
    return np.where(tau > 0, g, 1.0)


def renewal_excess(age_s: np.ndarray, rate: float, ca2: float) -> np.ndarray:
    """``M(s) - lambda s`` per ``s``: the arrivals a renewal stream (Gamma gaps, mean ``1 /
    rate``, squared CV ``ca2``) puts in the ``s`` seconds before one of its arrivals beyond a
    Poisson stream's (a renewal stream read backwards from an arrival is the same renewal
    stream: the gaps are i.i.d.). ``M(s) = sum_n G(n k, s / th)`` (``S_n`` Gamma of shape
    ``n k``, ``k = 1 / ca2``, ``th = ca2 / rate``). 0 at ``s = 0``, ``(ca2 - 1) / 2`` as
    ``s -> inf`` (Cox)."""
    s = np.asarray(age_s, dtype=float)
    k, th = 1.0 / ca2, ca2 / rate
    top = _RENEWAL_SPAN * th
    x = np.minimum(s, top) / th
    xm = float(x.max()) if x.size else 0.0
    n = np.arange(1, int(np.ceil((xm + 10.0 * np.sqrt(xm) + 30.0) / k)) + 1)[:, None]
    out = np.sum(gammainc(n * k, x), axis=0) - rate * np.minimum(s, top)
    return np.where(s > top, (ca2 - 1.0) / 2.0, out)


def found_count(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    excess_s: np.ndarray,
    renewal=None,
) -> float:
    """The mean number of transfers an arrival finds on the PS line fed renewal gaps: each
    earlier arrival, ``s`` seconds before, still there with the chance its stay outlasts ``s``,
    ``E[N_found] = integral_0^inf M'(s) P(T > s) ds = lambda E[T] + E[M(T) - lambda T]`` (by
    parts; ``M`` the renewal function read back from the tagged arrival, :func:`renewal_excess`,
    ``T`` an arrival's stay). The first term is Little's time-average number; the second the
    burst's earlier members, fresh, so still there (the equilibrium residual ``m`` of the work
    found counts them too few). Each class's stay at its mean ``T_k = tau_k / (1 - rho) +
    excess_s`` (the Poisson-fed PS law plus the bursts' excess). Poisson: ``M(s) = lambda s``,
    ``lambda E[T] = N*`` (M/G/1-PS). ``renewal``: ``M(s) - lambda s`` as a function of ``s``
    (default :func:`renewal_excess`; the fixed point passes a tabulated one)."""
    tau, w, e1, _ = _moments(sizes_s, weight)
    lam = rho / e1
    stay = tau / (1.0 - rho) + np.asarray(excess_s, dtype=float)
    excess = renewal_excess(stay, lam, ca2) if renewal is None else renewal(stay)
    return lam * float(np.dot(w, stay)) + float(np.dot(w, excess))


def _limits(
    tau: np.ndarray,
    w: np.ndarray,
    rho: float,
    count: float,
    found: float,
    v_time: float,
) -> tuple[float, float, float]:
    """(``s0 - N*`` of the work found without the fresh members, ``K`` of it less their part,
    their count) for ``count`` transfers and ``found`` s of work found at arrival (the rest of
    the burst, met after it, is :func:`mates_delay`'s)."""
    e1 = float(np.dot(w, tau))
    m = float(np.dot(w, tau * tau)) / (2.0 * e1)
    # the transfers found beyond the work found's count E[W] / m: the burst's earlier members,
    # fresh (about E[tau] each still to send), so each slows a transfer of tau by ~ min(tau, its
    # rest) and no more: E[tau] (1 - e^(-tau / E[tau]))
    fresh = count - found / m
    slope = found / m - rho / (1.0 - rho)  # s0 - N* of the rest
    offset = (found - v_time) / (1.0 - rho) - fresh * e1  # K less the fresh ones'
    return slope, offset, fresh


_MATES_GRID = 129  # points of burst_mates tabulated for the rest of the burst (to 0.5%)
_GRID = 65  # points of the tabulated renewal excess (its mean over the classes to ~1e-3)
_COUNT_STEPS = 30  # secant steps for the count found at most (it takes 3-5)


def _terms(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    found_shift: np.ndarray | None,
    lead_s: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float, gig1.LatticeWait, np.ndarray] | None:
    """(``K`` and ``L`` per class of the work found's part, the fresh members' count, the
    GI/G/1 wait law, the rest of the burst's delay per class) of :func:`burst_delay`; None
    where the queue has no steady state."""
    tau, w, e1, e2 = _moments(sizes_s, weight)
    law = _wait(tau, w, rho, ca2)
    if law is None:
        return None
    m = e2 / (2.0 * e1)
    dv = np.zeros_like(tau) if found_shift is None else np.asarray(found_shift, dtype=float)
    found = law.mean
    # Brumelle: E[V] = lambda E[tau W] + lambda E[tau^2] / 2, W = E[W] + dv per class
    v_time = rho * found + rho / e1 * float(np.dot(w, tau * dv)) + rho * m
    # the count found depends on the stays, which depend on it: a fixed point, by the secant
    # method from the work-found count E[W] / m (a few steps; plain iteration needs ~25)
    # M(s) - lambda s tabulated once (quadratic steps: steep at 0) to the asymptote's reach
    grid = _RENEWAL_SPAN * ca2 * e1 / rho * np.linspace(0.0, 1.0, _GRID) ** 2
    table = renewal_excess(grid, rho / e1, ca2)
    # the rest of the burst met during the stay tau (1 + E[W] / m), each member late by its
    # own prefill, and what the line makes of it (the work-found stay: it keeps the burst
    # out of the loop)
    stay = tau * (1.0 + found / m)
    mates = mates_delay(tau, w, stay, rho / e1, ca2, lead_s) * mates_gain(tau, m, rho)
    shared = _shared(tau, w)

    def renewal(t: np.ndarray) -> np.ndarray:
        return np.interp(t, grid, table)

    def gap(count: float) -> float:
        slope, offset, fresh = _limits(tau, w, rho, count, found, v_time)
        amplitude, scale = _shape(slope, offset, m, rho)
        delta = amplitude * _residual(tau * m / scale, tau, w, m) + fresh * shared + mates
        return found_count(tau, w, rho, ca2, delta, renewal) - count

    x0 = found / m
    g0 = gap(x0)
    x1 = x0 + g0
    for _ in range(_COUNT_STEPS):
        g1 = gap(x1)
        if abs(g1) <= 1e-10 * max(1.0, abs(x1)) or g1 == g0:
            break
        x0, g0, x1 = x1, g1, x1 - g1 * (x1 - x0) / (g1 - g0)
    count = x1
    slope, offset, fresh = _limits(tau, w, rho, count, found, v_time)
    amplitude, scale = _shape(slope, offset, m, rho)
    return amplitude, scale, fresh, law, mates


def _residual(x: np.ndarray, tau: np.ndarray, w: np.ndarray, m: float) -> np.ndarray:
    """``E[min(R, x)] / m`` per ``x``, ``R`` the equilibrium residual of the size law (density
    ``P(tau > r) / E[tau]``, mean ``m``): ``E[min(tau, x) (2 tau - min(tau, x))] / (2 E[tau] m)``.
    0 at 0, slope ``1 / m``, 1 as ``x -> inf``."""
    mn = np.minimum(np.asarray(x, dtype=float)[:, None], tau[None, :])
    e1 = float(np.dot(w, tau))
    return (mn * (2.0 * tau[None, :] - mn)) @ w / (2.0 * e1 * m)


def _shared(tau: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``E[min(tau_j, tau_i)]`` per class ``i``: what one whole transfer of the size law
    costs a transfer of ``tau_i`` that shares the line with it from its start (PS: both get
    equal service until the first leaves)."""
    return np.minimum(tau[:, None], tau[None, :]) @ w


def _shape(
    slope: np.ndarray | float, offset: np.ndarray | float, m: float, rho: float
) -> tuple[np.ndarray, np.ndarray]:
    """(``K``, ``L``) of ``K Psi(tau m / L)`` (:func:`_residual`: slope ``K / L`` at 0, ``K``
    in the limit) with slope ``slope`` at 0 and limit ``offset``."""
    # the limits disagree in sign (near Poisson): M/M/1-PS's own time scale
    same = slope * offset > 0
    scale = np.where(same, offset / np.where(same, slope, 1.0), m / (1.0 - rho))
    return slope * scale, scale


def burst_delay(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    found_shift: np.ndarray | None = None,
    lead_s: np.ndarray | None = None,
) -> np.ndarray:
    """``delta(tau) = K Psi(tau m / L) + (N_f - E[W] / m) E[min(tau_j, tau)] + mates(tau)`` (s)
    per class of ``sizes_s`` (seconds at the line's usable rate, request shares ``weight``):
    the PS line's mean delay fed renewal gaps of squared CV ``ca2`` beyond the Poisson-fed one
    (module docstring). ``found_shift``: each class's work found beyond ``E[W]``
    (:func:`line_found.found_shift`, centred), which enters ``E[V]`` through Brumelle's
    ``lambda E[tau W]``. ``lead_s``: each class's prefill seconds, by which a burst's member
    of that class comes late (:func:`mates_delay`; None: no pool). Zeros for ``ca2 = 1`` or an
    idle line, inf when the GI/G/1 queue has no steady state."""
    tau = np.asarray(sizes_s, dtype=float)
    if ca2 == 1.0 or not 0.0 < rho < 1.0 or _moments(tau, weight)[2] <= 0:
        return np.zeros_like(tau)
    terms = _terms(tau, weight, rho, ca2, found_shift, lead_s)
    if terms is None:
        return np.full_like(tau, np.inf)
    amplitude, scale, fresh, _, mates = terms
    _, w, e1, e2 = _moments(tau, weight)
    m = e2 / (2.0 * e1)
    return amplitude * _residual(tau * m / scale, tau, w, m) + fresh * _shared(tau, w) + mates


def variance_ratio(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    lead_s: np.ndarray | None = None,
) -> np.ndarray:
    """How much the delay's variance moves from the Poisson-fed PS share's, per size. A small
    transfer's delay is ``tau`` times the number it shares with, which follows the work found
    (in units of ``m``): its variance moves as the found work's, ``Var[W]`` of the GI/G/1 wait
    law over M/G/1's (``E[W^2] = 2 E[W]^2 + lambda E[tau^3] / (3 (1 - rho))``, Takacs). A long
    stay's comes from the work arriving meanwhile (Coffman-Muntz-Trotter's linear term), whose
    variance over a long window is the renewal stream's ``(ca2 + cs2) / (1 + cs2)`` times a
    Poisson one's (``cs2`` the sizes' squared CV: the index of dispersion for work at
    ``t -> inf``). Between them the weight ``1 - e^(-tau / L)``, ``L`` :func:`burst_delay`'s. Ones
    for ``ca2 = 1`` or an idle line."""
    tau, w, e1, e2 = _moments(sizes_s, weight)
    if ca2 == 1.0 or not 0.0 < rho < 1.0 or e1 <= 0:
        return np.ones_like(tau)
    terms = _terms(tau, w, rho, ca2, None, lead_s)
    if terms is None:
        return np.ones_like(tau)
    _, scale, _, law, _ = terms
    lam = rho / e1
    pk = lam * e2 / (2.0 * (1.0 - rho))
    pk_var = pk * pk + lam * float(np.dot(w, tau**3)) / (3.0 * (1.0 - rho))
    small = (float(np.dot(law.weights, law.points**2)) - law.mean**2) / pk_var
    cs2 = e2 / (e1 * e1) - 1.0
    large = (ca2 + cs2) / (1.0 + cs2)
    return small + (large - small) * -np.expm1(-tau / scale)


def idle_ratio(sizes_s: np.ndarray, weight: np.ndarray, rho: float, ca2: float) -> float:
    """``P(W = 0) / (1 - rho)``: how much more (or less) often than under Poisson arrivals a
    transfer finds the line idle (the GI/G/1 wait law's atom at 0). 1 for ``ca2 = 1`` or an idle
    line, 0 when the queue has no steady state."""
    if ca2 == 1.0 or not 0.0 < rho < 1.0:
        return 1.0
    tau, w, e1, _ = _moments(sizes_s, weight)
    if e1 <= 0:
        return 1.0
    law = _wait(tau, w, rho, ca2)
    return 0.0 if law is None else (1.0 - law.wait_probability) / (1.0 - rho)
