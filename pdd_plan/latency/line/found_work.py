"""The work a transfer finds on the line, by the prefill that made it (capped-line tails).

A KV transfer leaves for the line when its own prefill ends, and in the ``S`` seconds that
prefill ran its instance emitted nothing: it was busy with this very request. So a transfer
whose prefill was long arrives after one of the ``c`` sources of the line's input was silent
for that long, into a line that drained meanwhile; a short one finds its instance's share of
the input as usual. The pool's index of dispersion (:mod:`line_input`) gives one ratio ``R``
for every transfer and cannot show this: it is size-conditional, because a transfer's size is
affine in its own prefill service (both follow the uncached tokens), so the big transfers,
which set the KV-transfer P99, find the least work (replay of the default PDD plan,
benchmarks/line_input_stream.py: the top size decile finds 172 MB where the rest find 254 and
a Poisson-fed line 296).

**Work found** (:func:`found_shift`). Work put on the line at ``t - s`` still adds to what is
there at ``t`` exactly when the line has not emptied since (a work-conserving server: one more
unit of work moves the whole later path up until the next idle instant), with probability
``h(s) = P(busy, age of the busy period > s)``: ``h(0) = rho`` and, for M/G/1,
``integral_0^inf h = lambda (1 - rho) E[B^2] / 2 = t*`` (:func:`input_stream.time_scale`, the
scale at which ``R`` is taken). Taking ``h`` exponential with that value and integral,
``h(s) = rho e^(-rho s / t*)``. The tagged transfer's instance offers ``rho / c`` seconds of
line work per second on average (its share of the input) and offered none during ``S_k``, the
rest of the input as usual (its emissions before its silence at their long-run rate), so a
class-``k`` transfer finds, in seconds of the line's usable rate,

``dV_k = -(rho / c) integral_0^{S_k} h = -(rho / c) t* (1 - e^(-rho S_k / t*))``

less than the stationary work, up to a constant: the shifts are centred on their mean over the
transfers (request shares), because the ratio ``R`` already sets the work an average transfer
finds (on the default replay: the pool's dispersion puts it at 248 MB, the transfers found
246 on average). Exact limits: no shift for ``c -> inf`` (one silent source among infinitely
many; the pool's output is then Poisson), for equal prefill services (nothing singles out a
class), on an idle line (``rho -> 0``), and without a pool (independent input).

**Delay** (:func:`delay_response`). Found work ``dV`` more than the stationary state changes a
processor-sharing transfer's mean delay by ``dV (1 - e^(-(1 - rho) tau / m)) / (1 - rho)``:
M/M/1-PS conditioned on the number found (the tagged transfer's own time scale: with ``n``
found, ``E[T(tau) | n] = tau (1 + N*) + (n - N*) m (1 - e^(-(1 - rho) tau / m)) / (1 - rho)``,
``N* = rho / (1 - rho)``, from ``dE[N] / db = lambda (1 + N) - N / m`` in the tagged job's
served seconds ``b``). Small ``tau``: ``tau dV / m``, the extra transfers found each share the
line; large: ``dV / (1 - rho)``, the extra work all served, and the work arriving meanwhile.
The line is taken as one PS server of its usable rate, ``tau`` a transfer's seconds at that
rate and ``m = E[tau^2] / (2 E[tau])`` the mean residual of a transfer found in service (the
choice of :func:`limited_ps.delay_shape`, which keeps both limits exact for any size law).
On the default replay this predicts every size decile's mean delay within 3% of the replay's
(tests/unit/latency/test_kv_transfer_law.py).
"""

from __future__ import annotations

import numpy as np

from pdd_plan.latency.line import bursts, input_stream


def found_shift(
    service_s: np.ndarray, weight: np.ndarray, rho: float, c: int, t_star: float
) -> np.ndarray:
    """``dV_k`` (s of the line) per class: the work a transfer whose prefill took ``service_s``
    finds beyond the average transfer's, ``-(rho / c) t* (1 - e^(-rho S_k / t*))`` centred on
    its mean at request shares ``weight``. Zeros when the line is idle or saturated."""
    s = np.asarray(service_s, dtype=float)
    if not (0.0 < rho < 1.0 and 0.0 < t_star < np.inf and c > 0):
        return np.zeros_like(s)
    w = np.asarray(weight, dtype=float) / float(np.sum(weight))
    dv = -(rho / c) * t_star * -np.expm1(-rho * s / t_star)
    return dv - float(np.dot(w, dv))


def delay_response(sizes_s: np.ndarray, weight: np.ndarray, rho: float) -> np.ndarray:
    """Seconds of mean delay per second of extra work found, per transfer of ``sizes_s``
    (seconds at the line's usable rate): ``(1 - e^(-(1 - rho) tau / m)) / (1 - rho)``,
    ``m = E[tau^2] / (2 E[tau])`` at request shares ``weight``."""
    tau = np.asarray(sizes_s, dtype=float)
    w = np.asarray(weight, dtype=float) / float(np.sum(weight))
    e1 = float(np.dot(w, tau))
    if not (0.0 < rho < 1.0 and e1 > 0):
        return np.zeros_like(tau)
    m = float(np.dot(w, tau * tau)) / (2.0 * e1)
    return -np.expm1(-(1.0 - rho) * tau / m) / (1.0 - rho)


def class_delay(
    delay_s: np.ndarray,
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    pool: input_stream.FeedingPool | None,
    service_s: np.ndarray,
) -> np.ndarray:
    """Each class's mean line delay beyond its bare transfer, fed by the prefill pool: the sum
    of :func:`delay_parts`, never below 0."""
    base, burst = delay_parts(delay_s, sizes_s, weight, rho, ca2, pool, service_s)
    return np.maximum(base + burst, 0.0)


def delay_parts(
    delay_s: np.ndarray,
    sizes_s: np.ndarray,
    weight: np.ndarray,
    rho: float,
    ca2: float,
    pool: input_stream.FeedingPool | None,
    service_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(the Poisson-fed law's ``delay_s`` times the pool's smoothing ``I(t*)``
    (:func:`input_stream.renewal_and_pool`) plus what each class's own prefill's silence
    changes, ``dV_k x response`` (:func:`found_shift`, :func:`delay_response`; ``service_s``
    each class's prefill seconds), what bursts add at each size (:func:`bursts.burst_delay`:
    renewal gaps of squared CV ``ca2``; zeros at ``ca2 = 1``)). Without a pool: no smoothing
    and no silence."""
    d = np.asarray(delay_s, dtype=float)
    r, i_star, t_star = input_stream.renewal_and_pool(sizes_s, weight, rho, ca2, pool)
    if not np.isfinite(r):
        return d * r, np.zeros_like(d)
    dv, lead = np.zeros_like(d), None
    if pool is not None:
        dv = found_shift(service_s, weight, rho, pool.count, t_star)
        lead = np.asarray(service_s, dtype=float)
    burst = bursts.burst_delay(sizes_s, weight, rho, ca2, dv, lead)
    return d * i_star + dv * delay_response(sizes_s, weight, rho), burst
