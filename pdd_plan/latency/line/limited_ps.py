"""The transfer pool and the line as one limited-processor-sharing queue: its ingredients per
transfer size, which :func:`pdd_plan.latency.line.law.transfer_law` (the one place a
transfer's delay is put together) composes.

Each transfer holds ``k = streams_per_transfer`` connections of a finite pool of ``c`` and
stripes its slices over them (Mooncake's TCP lanes), so at most ``floor(c / k)`` =
:attr:`LineConfig.pool` transfers share the line at once (processor sharing, each at most
``k`` connections' rate), the rest wait FIFO for a slot, as the simulator runs them. Its number
in system is a birth-death chain (:func:`closed_forms.limited_ps_numbers`, exponential sizes):
``E[N_s]`` in service, ``E[N_q]`` waiting, ``lambda = rho x usable / E[x]``. By Little's law:

* **hold** (its ``k`` connections are held) ``E[N_s] / lambda`` on average, in proportion to
  the size (``x E[N_s] / (rho x usable)``; exactly M/G/1-PS's ``x / (C (1 - rho))`` when one
  transfer can fill the line and the pool never binds), never under ``x`` over ``k``
  connections' rate;
* **pool wait** ``E[N_q] / lambda``, the same for every size (FIFO), scaled by
  ``(1 + cs^2) / 2`` for the squared CV of the classes' sizes (exact for exponential sizes;
  heavier spreads hold the slots longer, as in M/G/c).

Finite whenever ``rho < 1``: the pool's holders share a line whose total rate is constant
once ``c`` of them are active, so the queue is stable exactly when the line is (an Erlang C
wait with the PS-inflated hold as service time would call a 95%-busy line with 16 slots
unstable at 19 erlangs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.latency.closed_forms import limited_ps_numbers
from pdd_plan.latency.line import tagged
from pdd_plan.latency.line.delay_shape import ps_sojourn_variance
from pdd_plan.latency.line.transfer import LineConfig


@dataclass(frozen=True)
class LimitedPS:
    """The queue at one load: ``per_byte`` seconds a transfer holds its slot per byte, the
    mean pool ``wait`` (s, every size alike) and ``p_wait``, the chance of waiting at all."""

    per_byte: float
    wait: float
    p_wait: float


def fastest_bytes_s(line: LineConfig) -> float:
    """A transfer's rate alone on the line: the line's, or ``k`` connections' when lower."""
    return min(line.capacity_bytes_s, line.flow_cap_bytes_s)


def limited_ps(x: np.ndarray, line: LineConfig, rho: float, weight: np.ndarray | None) -> LimitedPS:
    """The queue of transfers of sizes ``x`` (bytes) at request shares ``weight`` (equal when
    None) on ``line`` at utilization ``rho`` of its usable capacity."""
    usable = line.usable_bytes_s
    w = np.ones_like(x) if weight is None else np.asarray(weight, dtype=float)
    w = w / float(np.sum(w))
    mean_x = float(np.dot(w, x))
    fastest = fastest_bytes_s(line)
    if rho <= 0 or mean_x <= 0:
        return LimitedPS(1.0 / fastest, 0.0, 0.0)
    n_s, n_q = limited_ps_numbers(line.pool, rho, line.capacity_bytes_s, line.flow_cap_bytes_s)
    per_byte = max(n_s / (rho * usable), 1.0 / fastest)
    # the chain assumes exponential sizes (cs^2 = 1); the classes' own spread moves the wait
    # as it moves M/G/c's (Allen-Cunneen, (1 + cs^2) / 2); the hold is PS, insensitive
    cs2 = float(np.dot(w, x * x)) / mean_x**2 - 1.0
    wait = n_q * mean_x / (rho * usable) * (1.0 + cs2) / 2.0
    # P(N >= c) = pi(c) / (1 - rho) and E[N_q] = pi(c) rho / (1 - rho)^2 (the geometric tail)
    return LimitedPS(per_byte, wait, min(n_q * (1.0 - rho) / rho, 1.0))


# a slowdown this close to 1 is the per-byte figure's rounding, not a PS share (a share of
# 1e-9 moves a 10 s transfer by 10 ns)
SHARE_ROUNDING = 1e-9


def delay_shape(
    x: np.ndarray, line: LineConfig, rho: float, weight: np.ndarray | None, queue: LimitedPS
) -> tuple[np.ndarray, np.ndarray]:
    """(squared CV, P(no delay)) of a transfer's delay beyond its bare time, per size: the PS
    share's, which the pool wait (``E[N_q] / lambda``, FIFO) stretches to the whole mean. The
    wait is a rare, long event where the pool seldom binds (narrow-line: P(wait) 0.2%, 5 ms of
    mean): a two-moment fit of its variance would spread that tail over the body of every
    small transfer's delay, so it keeps the mean and takes the share's shape. A line with no
    PS share (every transfer at its cap) has the wait's own: ``P(wait)`` and an exponential.

    * **PS share**: Coffman-Muntz-Trotter's Var[T | x] of M/M/1-PS
      (:func:`delay_shape.ps_sojourn_variance`) for the line's equivalent single PS server:
      service ``tau = x / r`` at the bare rate ``r`` (:func:`fastest_bytes_s`), load ``rho_e``
      with ``1 / (1 - rho_e)`` = the limited-PS slowdown (``rho`` itself when one transfer can
      fill the line and the pool never binds, 0 when every transfer runs at its cap), and the
      mean job ``1 / mu = E[tau^2] / (2 E[tau])``, the mean residual service. That choice keeps
      both exact limits of M/G/1-PS for any size law: ``rho x^2 / (1 - rho)^2`` for small ``x``
      (the number found in system is geometric whatever the sizes) and ``lambda E[tau^2] x /
      (1 - rho)^3`` for large ``x`` (the work arriving during a long stay); exponential sizes
      give CMT exactly.

    No delay at all when the transfer gets a slot at once, finds the line idle and sees no
    arrival while it runs: ``(1 - P(wait)) (1 - rho_e) e^(-lambda_e tau)``, ``lambda_e =
    rho_e / E[tau]`` (exact for M/G/1-PS: ``P(N = 0) = 1 - rho`` for any size law)."""
    capped = _capped_shape(x, line, rho, weight, queue)
    if capped is not None:
        return capped
    fastest = fastest_bytes_s(line)
    slowdown = queue.per_byte * fastest
    # a pool-bound line (every transfer at its cap: E[N_s] = rho x pool) has no PS share, but
    # its per-byte figure lands an ulp above 1 / f: a share of ~1e-16 x its size would then
    # carry CMT's variance over its square (a squared CV ~1e15, the whole delay an atom at
    # zero); below SHARE_ROUNDING of slowdown it is rounding, and the wait's own law applies
    share = slowdown - 1.0 > SHARE_ROUNDING
    extra = x * (queue.per_byte - 1.0 / fastest) if share else np.zeros_like(x)
    w = np.ones_like(x) if weight is None else np.asarray(weight, dtype=float)
    tau = x / fastest
    e1 = float(np.dot(w, tau)) / float(np.sum(w))
    residual = float(np.dot(w, tau * tau)) / float(np.sum(w)) / (2.0 * e1) if e1 > 0 else 0.0
    rho_e = 1.0 - 1.0 / slowdown
    var = ps_sojourn_variance(tau, residual, rho_e)
    p_wait = queue.p_wait
    atom = (1.0 - p_wait) * (1.0 - rho_e) * np.exp(-rho_e * tau / e1 if e1 > 0 else 0.0 * tau)
    # no PS share (every transfer at its cap): the wait alone, an atom and an exponential
    # (a vanishing P(wait) has no delay to shape: its SCV overflows, so it takes 1)
    alone = 2.0 / p_wait - 1.0 if p_wait > 0 and 2.0 / p_wait < np.inf else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        cv2 = np.where(extra > 0, var / np.where(extra > 0, extra * extra, 1.0), alone)
    return cv2, atom


def _capped_shape(
    x: np.ndarray, line: LineConfig, rho: float, weight: np.ndarray | None, queue: LimitedPS
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`delay_shape` on a line one transfer cannot fill (cap ``f`` < line ``C``): the
    tagged transfer's exact law (:mod:`tagged`; Poisson arrivals, exponential sizes of the
    classes' mean). Its variance replaces CMT's at an equivalent load (which lets a transfer
    alone be slowed, where on a capped line it runs at its cap undisturbed), its ``P(stays at
    its cap)`` the no-delay atom. The mean stays the Little's-law one: a PS line with a
    state-dependent total rate is a symmetric queue (insensitive), its ``E[T | x]`` linear in
    ``x`` and equal to the per-byte figure (the tagged chain's mean matches it to rounding:
    tests/unit/latency/test_line_tagged.py). None where the line is not capped or never
    shares (the CMT shape applies), idle or saturated."""
    f, cap = line.flow_cap_bytes_s, line.capacity_bytes_s
    # every transfer at its cap (pool x f <= C): no share to shape, the wait's own law applies
    # a cap within 0.1% of the line (rounding of the TCP efficiency) fills it: CMT's law
    if not (f < 0.999 * cap and cap < line.pool * f and 0.0 < rho < 1.0):
        return None
    w = np.ones_like(x) if weight is None else np.asarray(weight, dtype=float)
    mean_x = float(np.dot(w, x)) / float(np.sum(w))
    if mean_x <= 0:
        return None
    law = tagged.tagged_law(line.pool, float(rho), cap, f, mean_x)
    mean_t, second, stay = tagged.tagged_moments(law, x)
    var = np.maximum(second - mean_t * mean_t, 0.0)
    extra = x * (queue.per_byte - 1.0 / f)
    with np.errstate(divide="ignore", invalid="ignore"):
        cv2 = np.where(extra > 0, var / np.where(extra > 0, extra * extra, 1.0), 1.0)
    return cv2, (1.0 - queue.p_wait) * stay
