"""The waiting-time DISTRIBUTION of a G/G/c FIFO queue with c > 1 (a shared queue, renewal
arrivals, a discrete service law): the prefill pool's wait beyond its mean.

The law, P(W > t) = min(P(wait), gamma e^(-delta t)) for t > 0, is Tijms' asymptotic expansion
of the M/G/c wait used for every t (H.C. Tijms, "A First Course in Stochastic Models", Wiley
2003, sec. 9.4; M.H. van Hoorn and H.C. Tijms, "Approximations for the waiting time
distribution of the M/G/c queue", Performance Evaluation 2 (1982) 22-28):

* ``delta``, the tail's decay rate, is exact: the positive root of
  E[e^(delta S / c)] E[e^(-delta A)] = 1 (S a service time, A a gap between arrivals;
  Y. Takahashi, "Asymptotic exponentiality of the tail of the waiting-time distribution in a
  PH/PH/c queue", Adv. Appl. Prob. 13 (1981) 619-630). For Poisson arrivals this is Tijms'
  lambda (E[e^(delta S / c)] - 1) = delta; for M/M/c it gives delta = c mu - lambda.
* ``gamma`` is fixed by the mean: for Poisson arrivals the expansion's area is set to the M/G/c
  mean wait, for which Kimura's two-moment system interpolation between M/M/c and M/D/c is used
  (T. Kimura, "A two-moment approximation for the mean waiting time in the GI/G/s queue",
  Management Science 32 (1986) 751-763, its M/G/s case), with the M/D/c mean from Cosmetatos
  (G.P. Cosmetatos, "Some approximate equilibrium results for the multi-server queue (M/G/r)",
  Operational Research Quarterly 27 (1976) 615-620). gamma < P(wait) leaves mass at W ~ 0: the
  waits that end at the first of c residual services (with a mixed service law one of c busy
  servers is often about to finish a short job), which a single exponential cannot hold.
  gamma > P(wait) (a service law less variable than exponential, M/D/c) makes the conditional
  wait a shifted exponential.
* for renewal arrivals of squared CV ``ca2`` != 1 the ratio gamma / P(wait) is kept from the
  Poisson system (a property of the service law at that load) while P(wait) moves by Whitt's
  QNA correction and delta is the root for the actual gaps (gamma distributed, mean 1/rate):
  two-moment means miss gamma-gap clustering, the exact decay rate sees it.

Exact for M/M/c (delta = c mu - lambda, gamma = P(wait) = Erlang C). The c = 1 case stays with
:mod:`pdd_plan.latency.closed_forms` (the M/G/1 has exact methods of its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdd_plan.latency.closed_forms import erlang_c, ggc_wait
from pdd_plan.latency.prefill.wait import ExponentialTail


@dataclass(frozen=True)
class ExpansionWait:
    """P(W > 0) = ``p_wait`` and P(W > t) = min(p_wait, gamma e^(-delta t)) for t > 0: an atom at
    0 of 1 - p_exp, then with probability ``p_exp`` a wait of t0 + Exp(delta); a
    :class:`~pdd_plan.latency.prefill.wait.WaitLaw` of one point and a tail."""

    p_wait: float
    gamma: float
    delta: float  # 1/s; 0 marks an unstable queue (every wait unbounded)

    @property
    def stable(self) -> bool:
        return self.delta > 0.0

    @property
    def wait_probability(self) -> float:
        return self.p_wait

    @property
    def points(self) -> np.ndarray:
        return np.zeros(1)

    @property
    def weights(self) -> np.ndarray:
        return np.array([1.0 - self.p_exp])

    @property
    def tail(self) -> ExponentialTail:
        return ExponentialTail(self.p_exp, self.t0, self.delta)

    @property
    def p_exp(self) -> float:
        return min(self.p_wait, self.gamma)

    @property
    def t0(self) -> float:
        """Seconds every long wait lasts at least (0 unless gamma > p_wait)."""
        if self.gamma <= self.p_wait or self.p_wait <= 0 or not self.stable:
            return 0.0
        return math.log(self.gamma / self.p_wait) / self.delta

    @property
    def mean(self) -> float:
        if not self.stable:
            return float("inf")
        return self.p_exp * (self.t0 + 1.0 / self.delta) if self.p_exp > 0 else 0.0

    def survival(self, t: np.ndarray | float) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        if not self.stable:
            return np.ones_like(t)
        if self.p_exp <= 0:
            return np.zeros_like(t)
        tail = self.p_exp * np.exp(-self.delta * np.maximum(t - self.t0, 0.0))
        return np.where(t < 0, 1.0, tail)

    def quantile(self, q: float) -> float:
        """The q-quantile of W (0 when the atom at 0 holds it)."""
        if not self.stable:
            return float("inf")
        if self.p_exp <= 1.0 - q:
            return 0.0
        return self.t0 + math.log(self.p_exp / (1.0 - q)) / self.delta


def cosmetatos_md_mean_wait(c: int, rho: float, mm_mean: float) -> float:
    """M/D/c mean wait from the M/M/c one (Cosmetatos 1976):
    E[W_D] = 1/2 [1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)] E[W_M]."""
    return (
        0.5 * mm_mean * (1.0 + (1.0 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c))
    )


def kimura_mgc_mean_wait(c: int, rate: float, es: float, cs2: float) -> float:
    """M/G/c mean wait, Kimura (1986) with Poisson arrivals: (1 + cs2) over
    2 cs2 / E[W_M/M/c] + (1 - cs2) / E[W_M/D/c]. Exact for M/M/c, P-K for c = 1 (where
    E[W_D] = E[W_M] / 2); the denominator stays positive for every cs2 since E[W_D] >= E[W_M]/2."""
    a = rate * es
    if a <= 0 or es <= 0:
        return 0.0
    if a >= c:
        return float("inf")
    mm = erlang_c(c, a) * es / (c - a)
    md = cosmetatos_md_mean_wait(c, a / c, mm)
    return (1.0 + cs2) / (2.0 * cs2 / mm + (1.0 - cs2) / md)


LogMGF = Callable[[float], float]  # x -> log E[e^(x S)] of the service time S (s), inf past a pole


def discrete_log_mgf(values: np.ndarray, weights: np.ndarray) -> LogMGF:
    """log E[e^(x S)] of a discrete service law (values s, weights), overflow-safe."""
    s = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float) / float(np.sum(weights))
    top = float(s.max())
    d = s - top
    # log-sum-exp: the largest service dominates for large x
    return lambda x: x * top + math.log(float(np.dot(w, np.exp(x * d))))


def tail_decay_rate(c: int, rate: float, es: float, log_mgf: LogMGF, ca2: float = 1.0) -> float:
    """delta > 0 (1/s) with log E[e^(delta S / c)] + log E[e^(-delta A)] = 0 (Takahashi 1981),
    A gamma gaps of mean 1/rate and squared CV ca2 (exponential when 1):
    E[e^(-x A)] = (1 + x ca2 / rate)^(-1/ca2). The left side is convex, 0 at 0 with slope
    E[S]/c - 1/rate < 0 when stable, so bisection from 0 brackets the root."""

    def f(x: float) -> float:
        return log_mgf(x / c) - math.log1p(x * ca2 / rate) / ca2

    hi = 1.0 / es
    while f(hi) <= 0.0:
        hi *= 2.0
    lo = 0.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi:  # adjacent doubles: every later round leaves both as they are
            break
        if f(mid) < 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def wait_law(
    c: int, rate: float, es: float, es2: float, log_mgf: LogMGF, ca2: float = 1.0
) -> ExpansionWait:
    """The wait law of a G/G/c FIFO pool (c > 1): service mean ``es`` and second moment ``es2``
    (s, s^2) with log-MGF ``log_mgf``, ``rate`` arrivals per second with gap squared CV ``ca2``;
    P(wait) as :func:`pdd_plan.latency.closed_forms.ggc_wait` says."""
    pw, _ = ggc_wait(c, rate, es, es2, ca2)
    if rate * es >= c:
        return ExpansionWait(1.0, float("inf"), 0.0)  # unstable: every wait is unbounded
    if pw <= 0.0:
        return ExpansionWait(0.0, 0.0, 1.0)
    # gamma / P(wait) from the Poisson system: the expansion's area equals Kimura's mean there
    pw1 = erlang_c(c, rate * es)
    d1 = tail_decay_rate(c, rate, es, log_mgf)
    ratio = d1 * kimura_mgc_mean_wait(c, rate, es, max(es2 / es**2 - 1.0, 0.0)) / pw1
    if ratio > 1.0:  # a shifted exponential: pw1 (t0 + 1/d1) = mean, so gamma/pw1 = e^(d1 t0)
        ratio = math.exp(ratio - 1.0)
    d = d1 if ca2 == 1.0 else tail_decay_rate(c, rate, es, log_mgf, ca2)
    return ExpansionWait(pw, pw * ratio, d)


def ggc_wait_law(
    c: int, rate: float, values: np.ndarray, weights: np.ndarray, ca2: float = 1.0
) -> ExpansionWait:
    """:func:`wait_law` of the discrete service law (values s, weights)."""
    s = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float) / float(np.sum(weights))
    es, es2 = float(np.dot(w, s)), float(np.dot(w, s * s))
    return wait_law(c, rate, es, es2, discrete_log_mgf(s, w), ca2)
