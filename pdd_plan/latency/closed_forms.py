"""Closed-form queueing used by the analytic models (and checked by the simulator's tests)."""

from __future__ import annotations

import numpy as np


def mg1_mean_wait(rho: float, es: float, es2: float) -> float:
    """Pollaczek-Khinchine mean wait in an M/G/1 FIFO queue: rho E[S^2] / (2 (1 - rho) E[S])."""
    if rho <= 0 or es <= 0:
        return 0.0
    if rho >= 1:
        return float("inf")
    return rho * es2 / (2.0 * (1.0 - rho) * es)


def mg1_wait_survival(t: np.ndarray | float, rho: float, mean_wait: float) -> np.ndarray:
    """P(W > t) for M/G/1, the standard exponential approximation: rho * exp(-rho t / E[W]).

    Exact for M/M/1; the atom P(W = 0) = 1 - rho is exact for every M/G/1.
    """
    t = np.asarray(t, dtype=float)
    if rho <= 0 or mean_wait <= 0:
        return np.zeros_like(t)
    return rho * np.exp(-rho * t / mean_wait)


def mg1_wait_quantile(q: float, rho: float, mean_wait: float) -> float:
    """The q-quantile of the M/G/1 wait under the same approximation (0 when rho <= 1 - q)."""
    if rho <= 0 or mean_wait <= 0 or rho <= 1 - q:
        return 0.0
    if not np.isfinite(mean_wait):
        return float("inf")
    return float(mean_wait / rho * np.log(rho / (1.0 - q)))


def ps_response_time(size: np.ndarray | float, capacity: float, rho: float) -> np.ndarray:
    """M/G/1 processor sharing: E[T | size x] = x / (C (1 - rho)), insensitive to the size law."""
    x = np.asarray(size, dtype=float)
    if rho >= 1:
        return np.full_like(x, np.inf)
    return x / (capacity * (1.0 - rho))


def limited_ps_numbers(c: int, rho: float, capacity: float, flow_cap: float) -> tuple[float, float]:
    """(E[transfers in service], E[transfers waiting]) on a line of ``capacity`` shared by at
    most ``c`` transfers at once (processor sharing, each at most ``flow_cap``), the rest waiting
    FIFO for a slot: Poisson arrivals, exponential sizes, at utilization ``rho`` of the usable
    rate ``u = min(capacity, c x flow_cap)``.

    The number in system is a birth-death chain: births ``lambda``, deaths ``min(capacity,
    min(n, c) x flow_cap) / E[x]``, so ``pi(n) / pi(n - 1) = rho u / min(capacity, min(n, c) x
    flow_cap)``; from ``n = c`` on that ratio is ``rho``, a geometric tail summed in closed form.
    Stable whenever ``rho < 1`` (then finite for every ``c``), inf otherwise. Exact M/M/c when
    the line has room for the whole pool, M/M/1-PS (``E[N] = rho / (1 - rho)``) when one
    transfer fills the line."""
    if rho <= 0:
        return 0.0, 0.0
    if rho >= 1:
        return float("inf"), float("inf")
    n = np.arange(1, c + 1, dtype=float)
    usable = min(capacity, c * flow_cap)
    # log pi(n) - log pi(0), n = 0..c, kept in logs: (rho u / k f) multiplies past 1e308 for big c
    logw = np.concatenate(
        [[0.0], np.cumsum(np.log(rho * usable / np.minimum(capacity, n * flow_cap)))]
    )
    w = np.exp(logw - logw.max())
    tail = w[-1] * rho / (1.0 - rho)  # sum over n > c of pi(c) rho^(n - c)
    z = float(w.sum()) + tail
    in_service = (float(np.dot(np.arange(c + 1), w)) + c * tail) / z
    waiting = w[-1] * rho / (1.0 - rho) ** 2 / z  # sum over j >= 1 of j pi(c) rho^j
    return in_service, float(waiting)


def erlang_c(c: int, a: float) -> float:
    """Probability an arrival waits in M/M/c with offered load a = lambda E[S] (Erlang C)."""
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    # stable recursion for Erlang B, then C from B
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1.0 - rho + rho * b)


def mgc_wait(c: int, rate: float, es: float, es2: float) -> tuple[float, float]:
    """(P(wait), mean wait) in M/G/c FIFO with a shared queue: the Allen-Cunneen approximation,
    Erlang C scaled by (1 + cs^2)/2 (exact for M/M/c; M/G/1 when c = 1 reduces to P-K)."""
    return ggc_wait(c, rate, es, es2, 1.0)


def _delay_probability(pw: float, rho: float, ca2: float, cs2: float) -> float:
    """P(wait) for renewal arrivals of squared CV ca2: Erlang C (the Poisson value) moved by
    Whitt's QNA correction for GI/G/1, P(W > 0) = rho + (ca2 - 1) rho (1 - rho) h (Whitt 1983,
    "The Queueing Network Analyzer", eqs. 46-47), with Erlang C in place of rho (an
    approximation: checked against a 300k-request FIFO replay for c = 5, cs2 = 3.5, ca2 = 4,
    rho 0.67-0.90, where Erlang C alone says 0.34-0.76 and the replay 0.58-0.86; this gives
    0.48-0.86). Exactly Erlang C when ca2 = 1."""
    if ca2 == 1.0:
        return pw
    if ca2 > 1.0:
        h = 4.0 * rho / (ca2 + rho**2 * (4.0 * ca2 + cs2))
    else:
        h = (1.0 + ca2 + rho * cs2) / (1.0 + rho * (cs2 - 1.0) + rho**2 * (4.0 * ca2 + cs2))
    return float(min(max(pw + (ca2 - 1.0) * pw * (1.0 - pw) * h, 0.0), 1.0))


def ggc_wait(c: int, rate: float, es: float, es2: float, ca2: float) -> tuple[float, float]:
    """(P(wait), mean wait) in G/G/c FIFO with a shared queue and renewal arrivals whose gaps
    have squared CV ``ca2`` (1: Poisson, cv^2 for gamma gaps): the Allen-Cunneen mean
    E[W] = C(c, a) (ca2 + cs2)/2 E[S]/(c - a) (Kingman's G/G/1 law when c = 1; exact for M/M/c),
    and P(wait) from :func:`_delay_probability`."""
    a = rate * es
    if c < 1 or a <= 0 or es <= 0:
        return 0.0, 0.0
    if a >= c:
        return 1.0, float("inf")
    pw = erlang_c(c, a)
    cs2 = max(es2 / es**2 - 1.0, 0.0)
    mean = pw * (ca2 + cs2) / 2.0 * es / (c - a)
    return _delay_probability(pw, a / c, ca2, cs2), mean
