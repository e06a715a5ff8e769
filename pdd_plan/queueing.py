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
    a = rate * es
    if c < 1 or a <= 0 or es <= 0:
        return 0.0, 0.0
    if a >= c:
        return 1.0, float("inf")
    pw = erlang_c(c, a)
    cs2 = max(es2 / es**2 - 1.0, 0.0)
    return pw, pw * (1.0 + cs2) / 2.0 * es / (c - a)
