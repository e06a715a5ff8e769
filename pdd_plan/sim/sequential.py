"""Early stopping of a verification replay: stop when its SLA verdict is statistically settled.

The verdict of a replay is, for each SLA check, whether a percentile of the kept requests'
TTFT or TPOT is at or under its threshold ``tau``. That is a statement about ``F(tau)``, the
share of requests at or under ``tau``: the P``q`` is at most ``tau`` exactly when ``F(tau)
>= q`` (the order-statistic, or binomial, view of a quantile: ``#{x_i <= tau}`` is binomial
with ``F(tau)`` for independent requests). So each check is settled when a confidence
interval for ``F(tau)`` lies entirely on one side of ``q``.

The rule (``settled``):

* the kept requests' series in arrival order (NaN TPOTs of one-token requests left out),
  ``I_i = [x_i <= tau]``, ``m`` of them, ``F = mean(I)``;
* requests of a queue are not independent: those in the system together share its waits and
  its decode batch. Batch means respect that: ``B`` consecutive batches of ``b`` requests,
  ``b`` at least the mean number of requests in the system (Little: rate x mean end-to-end
  time, so requests of different batches barely overlap) and at least ``MIN_BATCH``;
  ``B >= MIN_BATCHES`` or nothing is settled at this look;
* the variance inflation of the autocorrelation, ``VIF = max(1, b s_y^2 / (F (1 - F)))`` with
  ``s_y^2`` the batch means' variance (1 when ``F`` is 0 or 1), gives the effective sample
  size ``m / VIF``; the Wilson score interval for a binomial share at that size (an
  approximation of the exact Clopper-Pearson one) with the Student-t quantile of ``B - 1``
  degrees of freedom (the VIF is estimated from ``B`` batch means) at level
  ``1 - ALPHA / (2 K J)``: Bonferroni over the ``K`` checks and the ``J`` looks (``LOOKS``),
  so the chance that any verdict taken at a look is wrong is at most ``ALPHA`` (1%);
* pass when the interval's lower end exceeds ``q``, fail when its upper end is below ``q``.

``look`` replays the first ``share`` of the requests (on the full sample's tables: see
``sim.replay.replay_requests``'s ``upto``) and keeps the leading requests whose last token came
before the first request left out arrived: their figures are the full replay's, bit for bit,
so a look is the full replay seen early, not a shorter replay with its own drain. Where the
look settles every check the replay stops there; otherwise the full length is replayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pdd_plan.outputs.plan import ArchitecturePlan
from pdd_plan.workload.requests import Requests

ALPHA = 0.01  # the chance that a verdict taken at a look is wrong, all looks and checks
LOOKS = (0.5,)  # interim looks, as shares of the full length (the last look is the full run)
MIN_BATCH = 100  # requests per batch at least
MIN_BATCHES = 10  # batch means at least, for the VIF's estimate


@dataclass(frozen=True)
class Check:
    """One SLA check as the look tests it: the series, its percentile and threshold."""

    name: str
    series: np.ndarray  # kept requests, arrival order
    q: float  # the percentile's level, 0-1
    tau: float


def t_quantile(p: float, dof: int) -> float:
    """Student-t quantile by the Cornish-Fisher expansion of the normal one (Abramowitz &
    Stegun 26.7.5; within 0.5% of the exact value for 9 or more degrees of freedom at
    p <= 0.9995): stdlib only, no scipy import on the replay's path."""
    z = NormalDist().inv_cdf(p)
    v = float(dof)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def level(checks: int, looks: int = len(LOOKS)) -> float:
    """The one-sided tail each interval leaves out: ALPHA / (2 K J)."""
    return ALPHA / (2 * checks * looks)


def interval(ind: np.ndarray, batch: int, tail: float) -> tuple[float, float] | None:
    """Batch-means Wilson interval for the share of ``ind`` (booleans, in order) that is true;
    None when fewer than MIN_BATCHES batches of ``batch`` fit."""
    m = ind.size
    b = max(int(batch), MIN_BATCH)
    nb = m // b
    if nb < MIN_BATCHES:
        return None
    f = float(ind.mean())
    y = ind[: nb * b].reshape(nb, b).mean(axis=1)
    pq = f * (1.0 - f)
    vif = max(1.0, b * float(y.var(ddof=1)) / pq) if pq > 0 else 1.0
    n = m / vif
    t = t_quantile(1.0 - tail, nb - 1)
    t2 = t * t
    centre = (f + t2 / (2 * n)) / (1 + t2 / n)
    half = t / (1 + t2 / n) * math.sqrt(pq / n + t2 / (4 * n * n))
    return centre - half, centre + half


def settled(c: Check, batch: int, tail: float) -> bool | None:
    """True: the percentile is settled at or under tau; False: settled over it; None: not
    settled at this look."""
    x = c.series[~np.isnan(c.series)]
    ci = interval(x <= c.tau, batch, tail)
    if ci is None:
        return None
    lo, hi = ci
    if lo > c.q:
        return True
    if hi < c.q:
        return False
    return None


def in_system(arrival_s: np.ndarray, e2e_s: np.ndarray) -> float:
    """Mean requests in the system (Little's law: arrival rate x mean time in the system)."""
    if arrival_s.size < 2:
        return 0.0
    window = float(arrival_s[-1] - arrival_s[0])
    return float(np.nansum(e2e_s)) / window if window > 0 else math.inf


def worth_a_look(plan: ArchitecturePlan, req: Requests, upto: int) -> bool:
    """Whether a look after ``upto`` requests can settle anything, judged before replaying it
    from the plan's analytic TTFT and TPOT medians: the requests in the system then (Little)
    set the batch length, and about twice as many at the look's end are still running (their
    figures are not yet the full replay's). Skipping a look that cannot settle costs nothing;
    replaying it costs half a full replay."""
    if upto < MIN_BATCH * MIN_BATCHES + 1:
        return False
    span = float(req.arrival_s[upto] - req.arrival_s[0])
    if span <= 0:
        return False
    e2e = plan.ttft_s.p50 + float(np.mean(req.output_tokens[:upto])) * plan.tpot_ms.p50 / 1e3
    held = upto / span * e2e
    return MIN_BATCHES * max(MIN_BATCH, held) + 2 * held <= upto


def exact_prefix(end_s: np.ndarray, first_left_out_s: float) -> int:
    """Leading requests (arrival order) every one of which had its last token before
    ``first_left_out_s``, the arrival of the first request a look did not replay: nothing a
    later request does reaches them, so their figures are the full replay's."""
    reach = np.maximum.accumulate(np.nan_to_num(end_s, nan=math.inf))
    return int(np.searchsorted(reach, first_left_out_s, side="left"))


CI_TAIL = 0.025  # a printed percentile's interval: 95%, two-sided (descriptive: no Bonferroni)
# batches a printed percentile's interval is built from: as few as the batch-means method takes
# (MIN_BATCHES doubled for the variance's estimate), so each batch spans the queue's busy
# periods, whose correlation outlasts a request's time in the system by far near saturation
# (the default's prefill: batches of the requests in the system gave a P90 interval of
# 1.10-1.31 s at 20,000 requests against 1.56 s over 1M)
CI_BATCHES = 2 * MIN_BATCHES
SETTLED = 0.05  # a percentile is settled when its interval lies within +-5% of it


def quantile_interval(
    x: np.ndarray, q: float, batch: int, tail: float = CI_TAIL
) -> tuple[float, float] | None:
    """A batch-means interval for the ``q`` quantile of ``x`` (in arrival order, NaN left out):
    the share of requests at or under the estimate has the Wilson interval ``interval`` gives
    (batch means: the requests of a queue are not independent); the quantile's interval is the
    sample quantiles at that interval's ends (the order-statistic interval). None: too few
    batches."""
    x = x[~np.isnan(x)]
    if x.size == 0:
        return None
    est = float(np.quantile(x, q))
    ci = interval(x <= est, max(batch, x.size // CI_BATCHES), tail)
    if ci is None:
        return None
    f = float(np.mean(x <= est))
    lo_q = min(max(q - (f - ci[0]), 0.0), 1.0)
    hi_q = min(max(q + (ci[1] - f), 0.0), 1.0)
    return float(np.quantile(x, lo_q)), float(np.quantile(x, hi_q))


def unsettled(cis: dict[str, dict], points: dict[str, dict]) -> list[str]:
    """The percentiles (e.g. ``ttft_s.p99``) whose interval reaches past +-SETTLED of them, or
    that have none (too few batches)."""
    out = []
    for metric, ci in cis.items():
        for k, bounds in ci.items():
            v = points[metric].get(k)
            if v is None:
                continue
            if bounds is None or max(v - bounds[0], bounds[1] - v) > SETTLED * abs(v):
                out.append(f"{metric}.{k}")
    return out
