"""The line's input stream as the prefill pool emits it: its index of dispersion for work.

A KV transfer leaves for the line when its prefill finishes, and its size is close to affine in
that prefill's own service (both follow the uncached tokens). So a busy prefill instance emits
bytes at a near-constant rate, and a pool of ``c`` instances can never emit faster than ``c``
busy ones: the pool smooths the work the line is offered. The gaps look Poisson (Burke: an
M/M/c pool's departures are), the sizes look i.i.d., yet the work offered over windows of a
few prefill services varies less than a Poisson stream's (replay of the default PDD plan,
benchmarks/line_input_stream.py: 0.69-0.88 x over 0.3-1 s, back to 1 at 0.03 s and 30 s).

**Index of dispersion for work** (Fendick & Whitt 1989, "Measurements and approximations to
describe the offered traffic and predict the average workload in a single-server queue", Proc.
IEEE 77(1)): ``I(t) = Var[W(t)] / (lambda t E[x^2])``, ``W(t)`` the work offered in a window of
``t`` seconds; 1 at every ``t`` for Poisson arrivals of i.i.d. sizes.

**The pool's output** (:func:`work_dispersion`). With sizes ``x = beta S`` (``beta = E[x] /
E[S]``, bytes per second of prefill), the work a window sees is exactly ``beta`` times the
busy time ``integral B`` spent in it plus an edge term (the ages of the jobs in service at its
two ends). An infinite pool (M/G/inf) emits a compound Poisson stream: ``I = 1`` for every ``t``
(its departures are Poisson with i.i.d. services). A pool of ``c`` caps ``B = min(N, c)``; what
the cap removes is the busy time's variance beyond the infinite pool's, the edge terms kept:

``I(t) = 1 - beta^2 (V_inf(t) - V_c(t)) / (lambda t E[x^2])``, ``V_k(t) = Var[integral_0^t
min(N_k, k)]``,

with the number in the pool ``N`` taken as the M/M/c birth-death chain at the pool's rate and
mean service (``V`` from its Laplace transform, exact for the infinite chain, inverted by the
fixed Talbot method; ``V_inf`` M/M/inf's closed form) and
``E[x^2]`` the sizes' own second moment. Exact limits: ``I -> 1`` as ``t -> 0`` (one arrival
at a time), as ``t -> inf`` (both busy-time integrals are the work arrived, up to what the
pool holds: Poisson arrivals' variance), as ``c -> inf`` and for a near-idle pool (``B = N``).
Assumptions: Poisson arrivals (a renewal input's own dispersion is the caller's
``gig1.workload_ratio``), the M/M/c chain's relaxation for the real service mixture's, and
sizes proportional to services.

**The line's workload** (:func:`dispersion_ratio`): Fendick & Whitt's approximation, the M/G/1
mean workload times ``I`` at the queue's own time scale. The scale is the heavy-traffic one:
for Gaussian net input of variance ``lambda E[tau^2] I t`` and drift ``-(1 - rho)``, the mean
workload ``sup_t {sqrt(2 lambda E[tau^2] I t) - (1 - rho) t}`` (exact for M/G/1 at ``I = 1``:
Pollaczek-Khinchine's ``lambda E[tau^2] / (2 (1 - rho))``) is reached at ``t* = E[V] / (1 - rho)``,
``E[V]`` that P-K workload (seconds of the line). Derived here from that reasoning (the paper's
own text was not at hand); on the replay, ``I(t*)`` measured from the replay's own input
predicts its line's time-average work within 6% (default PDD: 231 MB vs 219; microbenchmark at
40 req/s: 210 vs 205), where the Poisson law says 287 / 273.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from pdd_plan.latency import laplace
from pdd_plan.latency.prefill import gig1


def _mmc_covariance_transform(a: float, c: int, s: np.ndarray) -> np.ndarray:
    """``C^(s) = integral_0^inf e^(-s u) Cov(B(0), B(u)) du`` of the M/M/c chain (``mu = 1``,
    births ``a < c``, deaths ``min(n, c)``), ``B = min(N, c)``: ``p' diag(f) z``, ``z = (s - Q)^-1
    f``, ``f = B - E[B]`` (``E[B] = a``), ``p`` the stationary law. Exact for the infinite chain:
    above ``c`` the chain is a random walk (births ``a``, deaths ``c``) on which ``f`` is
    constant, so ``z_n = f_c / s + A xi^(n - c)`` for ``n >= c - 1``, ``xi`` the root of ``a xi^2
    - (s + a + c) xi + c = 0`` inside the unit circle (the other grows: ``z`` is bounded); that
    closes the ``c + 1`` equations of ``n = 0 .. c`` (``z_c - f_c / s = xi (z_(c-1) - f_c / s)``),
    solved by elimination, and ``p_n = p_c (a / c)^(n - c)`` sums the tail in closed form."""
    n = np.arange(c + 1)
    logp = np.r_[0.0, np.cumsum(np.log(a / n[1:]))]  # a^n / n!, n <= c
    p = np.exp(logp - logp.max())
    rho = a / c
    p /= p[:c].sum() + p[c] / (1.0 - rho)
    f = n - a
    fc = c - a
    b = s + a + c
    root = np.sqrt(b * b - 4.0 * a * c)
    root = np.where((np.conj(b) * root).real >= 0.0, root, -root)  # |b + root| >= |b - root|
    xi = 2.0 * c / (b + root)  # = (b - root) / 2a without the cancellation
    # elimination down rows 0 .. c - 1 (-n z_(n-1) + (s + a + n) z_n - a z_(n+1) = f_n), then the
    # tail's row; back up
    up = np.empty((c,) + s.shape, dtype=complex)
    rhs = np.empty((c + 1,) + s.shape, dtype=complex)
    den = s + a
    up[0], rhs[0] = -a / den, f[0] / den
    for i in range(1, c):
        den = s + a + i + i * up[i - 1]
        up[i], rhs[i] = -a / den, (f[i] + i * rhs[i - 1]) / den
    z_c = ((1.0 - xi) * fc / s + xi * rhs[c - 1]) / (1.0 + xi * up[c - 1])
    total = p[c] * fc * (fc / (s * (1.0 - rho)) + (z_c - fc / s) / (1.0 - rho * xi))
    z = z_c
    for i in range(c - 1, -1, -1):
        z = rhs[i] - up[i] * z
        total = total + p[i] * f[i] * z
    return total


def _mmc_busy_variance(a: float, c: int, tau: np.ndarray) -> np.ndarray:
    """``Var[integral_0^tau min(N, c)]`` of the M/M/c chain at ``mu = 1``: ``2 integral_0^tau
    (tau - u) C(u) du``, whose transform is ``2 C^(s) / s^2``, inverted (:func:`laplace.talbot`)."""
    out = np.zeros(tau.shape)
    pos = tau > 0  # no window, no variance
    if pos.any():
        out[pos] = laplace.talbot(
            lambda s: 2.0 * _mmc_covariance_transform(a, c, s) / (s * s), tau[pos]
        )
    return out


def busy_variance(lam: float, mean_service_s: float, c: int | None, t: np.ndarray) -> np.ndarray:
    """``Var[integral_0^t min(N, c) ds]`` (s^2) of the M/M/c chain at arrival rate ``lam`` and
    mean service ``mean_service_s``; ``c`` None: M/M/inf, ``2 a (t / mu - (1 - e^(-mu t)) /
    mu^2)``, ``a = lam / mu`` (``N`` Poisson of mean ``a``, covariance ``a e^(-mu u)``)."""
    mu = 1.0 / mean_service_s
    if c is None:
        t = np.asarray(t, dtype=float)
        return 2.0 * (lam / mu) * (t / mu + np.expm1(-mu * t) / mu**2)
    # in units of one mean service: the load alone (to 12 figures, so that a draw scaling every
    # service and the rate alike gives the same bits), time times mu, variance over mu^2
    a = float(f"{lam / mu:.12g}")
    tau = np.asarray(t, dtype=float) * mu
    return _mmc_busy_variance(a, int(c), tau.ravel()).reshape(tau.shape) / mu**2


def work_dispersion(
    lam: float, mean_service_s: float, c: int, size_scv: float, t: np.ndarray
) -> np.ndarray:
    """``I(t)`` of the work a pool of ``c`` servers (M/M/c at ``lam`` arrivals per second,
    mean service ``mean_service_s``) emits, sizes proportional to services with squared CV
    ``size_scv``: ``1 - (V_inf - V_c) / (lam t E[S]^2 (1 + size_scv))`` (module docstring;
    ``beta^2 / E[x^2] = 1 / (E[S]^2 (1 + scv))``). 1 where the pool is idle or unstable."""
    t = np.asarray(t, dtype=float)
    if lam <= 0 or mean_service_s <= 0 or lam * mean_service_s >= c:
        return np.ones_like(t)
    gap = busy_variance(lam, mean_service_s, None, t) - busy_variance(lam, mean_service_s, c, t)
    ref = lam * t * mean_service_s**2 * (1.0 + size_scv)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, 1.0 - gap / np.where(t > 0, ref, 1.0), 1.0)


def dispersion_ratio(
    lam: float,
    mean_service_s: float,
    c: int,
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    stretch: float = 1.0,
) -> float:
    """How much less work the line holds fed by the pool than fed Poisson arrivals at the same
    load: ``I(t*)`` (Fendick & Whitt), ``t* = E[V] / (1 - rho)``, ``E[V] = stretch x rho
    E[tau^2] / (2 E[tau] (1 - rho))`` the line's workload (P-K's, times ``stretch`` where a
    renewal input already lengthens it) with ``tau`` = ``sizes_s`` (seconds of the line per
    transfer, request shares ``weight``). 1 when the line is idle or saturated."""
    if not 0.0 < rho < 1.0:
        return 1.0
    tau = np.asarray(sizes_s, dtype=float)
    w = np.asarray(weight, dtype=float) / float(np.sum(weight))
    e1, e2 = float(np.dot(w, tau)), float(np.dot(w, tau * tau))
    if e1 <= 0:
        return 1.0
    t_star = time_scale(sizes_s, weight, rho, stretch)
    scv = e2 / (e1 * e1) - 1.0
    return float(work_dispersion(lam, mean_service_s, c, scv, np.array([t_star]))[0])


def time_scale(sizes_s: np.ndarray, weight: np.ndarray, rho: float, stretch: float = 1.0) -> float:
    """The line's time scale ``t* = E[V] / (1 - rho)`` (s), ``E[V] = stretch x rho E[tau^2] /
    (2 E[tau] (1 - rho))`` its workload (P-K's, times ``stretch``), ``tau`` = ``sizes_s`` at
    request shares ``weight``. For M/G/1 it is also the mean age of the busy period in progress
    (``integral_0^inf P(busy, age > s) ds = lambda (1 - rho) E[B^2] / 2``, ``E[B^2] = E[tau^2] /
    (1 - rho)^3``): how long work put on the line keeps it from emptying. 0 when idle."""
    if not 0.0 < rho < 1.0:
        return 0.0
    tau = np.asarray(sizes_s, dtype=float)
    w = np.asarray(weight, dtype=float) / float(np.sum(weight))
    e1, e2 = float(np.dot(w, tau)), float(np.dot(w, tau * tau))
    return stretch * rho * e2 / (2.0 * e1 * (1.0 - rho) ** 2) if e1 > 0 else 0.0


class FeedingPool(Protocol):
    """What :func:`queueing_ratio` reads of the prefill pool (``pipeline.PrefillPool``): read
    only (properties), so a frozen dataclass satisfies it."""

    @property
    def rate_rps(self) -> float: ...
    @property
    def count(self) -> int: ...
    @property
    def service_s(self) -> np.ndarray: ...
    @property
    def weight(self) -> np.ndarray: ...


def queueing_ratio(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    pool: FeedingPool | None,
) -> float:
    """The line's queueing (its delay beyond the bare transfer) over the Poisson-fed law's:
    its mean workload's ratio. Renewal gaps of squared CV ``ca2`` (the pool's departures):
    GI/G/1's over M/G/1's (:func:`gig1.workload_ratio`, Brumelle's formula; the PS line's
    number in system follows its work); times the pool's smoothing, :func:`dispersion_ratio`
    (1 without a pool). They compose by variance: the pool removes ``1 - I(t*)`` of a
    Poisson stream's work variance from what the input offers (``I_out = I_in - dip``, both
    in units of ``lambda t E[x^2]``), and ``t*`` is the time scale of the line's own workload,
    the renewal ratio's included. Never below the pool's own ``I(t*)`` (a renewal input at
    least as smooth as Poisson, ``ca2 <= 1``, keeps the product)."""
    return ratio_and_scale(sizes_s, weight, rho, ca2, pool)[0]


def ratio_and_scale(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    pool: FeedingPool | None,
) -> tuple[float, float]:
    """(:func:`queueing_ratio`, the line's :func:`time_scale` it was taken at, renewal stretch
    included)."""
    r, i_star, t_star = renewal_and_pool(sizes_s, weight, rho, ca2, pool)
    if pool is None or not np.isfinite(r):
        return r, t_star
    return (r * i_star if r <= 1.0 else r - (1.0 - i_star)), t_star


def renewal_and_pool(
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    pool: FeedingPool | None,
) -> tuple[float, float, float]:
    """The two parts :func:`queueing_ratio` composes, apart: (the renewal workload ratio
    :func:`gig1.workload_ratio`, the pool's :func:`dispersion_ratio` ``I(t*)`` (1 without
    a pool), ``t*`` the line's :func:`time_scale`, renewal stretch included)."""
    r = gig1.workload_ratio(sizes_s, weight, rho, ca2)
    t_star = time_scale(sizes_s, weight, rho, r) if np.isfinite(r) else float("inf")
    if pool is None or not np.isfinite(r):
        return r, 1.0, t_star
    w = np.asarray(pool.weight, dtype=float)
    es = float(np.dot(w, pool.service_s)) / float(np.sum(w))
    return r, dispersion_ratio(pool.rate_rps, es, pool.count, sizes_s, weight, rho, r), t_star
