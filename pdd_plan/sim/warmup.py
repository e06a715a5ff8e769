"""Warm-up truncation of a replay: MSER-5 (White 1997; White, Cobb & Spratt 2000), one-sided.

A replay starts with every queue empty and every decode batch unfilled, so its first requests
see shorter waits and faster decode steps than the steady state the plan will run in;
statistics over the whole replay mix that transient in. MSER (the "marginal standard error
rule") picks the number of leading observations to drop from the output series itself:

* batch the series (in arrival order) into ``k = n // 5`` means of 5 consecutive observations
  ``Z_1..Z_k`` (MSER-5; a trailing partial batch is left out of the rule and always kept);
* for each truncation ``d`` (in batches) the squared marginal standard error of the mean of
  what is kept is ``MSER(d) = sum_{j>d} (Z_j - mean_{j>d} Z)^2 / (k - d)^2``;
* choose ``d*`` minimising it over the first half of the run, ``0 <= d <= k // 2`` (the rule's
  own bound), and drop ``5 d*`` requests.

One-sided: only cuts whose dropped stretch reads *below* what is kept are candidates (the kept
mean at or above the run's mean). A replay started empty can only under-read: from an empty
start a FIFO queue's waits increase stochastically towards their stationary law (Lindley's
recursion from W_0 = 0; Loynes 1962), and a decode batch grows from none. A first stretch that
reads *high* is a steady-state excursion (a long busy period), and plain MSER cuts it, because
dropping it lowers the kept variance: on 20,000-request steady-state windows at 90% prefill
utilization plain MSER-5 on TTFT cut up to 9,240 requests and lowered their TTFT P90 by 5.6%
on average (BENCHMARKS.md, warm-up); the one-sided rule cut none of them.

A minimiser at the end of the searched half (d* = k // 2) means the series did not settle
within the run (White, Cobb & Spratt: the rule "fails"); nothing is dropped then and the run
is marked unsettled: its figures are those of the stated window from empty, as for a line
without a steady state. Several series of one replay (TTFT, TPOT) are cut at the largest of
their points: what is kept must be past every transient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BATCH = 5  # MSER-5: batch means of 5 observations
METHOD = "MSER-5"
MIN_BATCHES = 4  # fewer batch means than this leave nothing to choose between: no cut


@dataclass(frozen=True)
class Truncation:
    """Where a replay's warm-up ends: ``requests`` leading requests (arrival order) dropped
    from its statistics. ``settled`` False: the rule found no steady state in the run (nothing
    dropped). ``note``: why nothing was searched (too few requests, an unstable line)."""

    requests: int = 0
    settled: bool = True
    note: str | None = None
    method: str = METHOD

    def summary(self, n: int) -> dict:
        """The replay summary's ``warmup`` entry for a replay of ``n`` requests."""
        return {
            "method": self.method,
            "requests": int(self.requests),
            "kept_requests": int(n - self.requests),
            "settled": bool(self.settled),
            "note": self.note,
        }


NONE_UNSTABLE = Truncation(
    0, False, "unstable line: no steady state; figures are the stated window from empty", "none"
)


def mser(x: np.ndarray, batch: int = BATCH) -> Truncation:
    """One-sided MSER-``batch`` truncation of one series in arrival order. NaN entries (e.g. the
    TPOT of one-token requests) are left out of their batch's mean; an all-NaN batch takes the
    series' mean, so it neither starts nor ends a transient."""
    x = np.asarray(x, dtype=float)
    k = x.size // batch
    if k < MIN_BATCHES or np.isnan(x).all():
        return Truncation(0, True, f"fewer than {MIN_BATCHES * batch} requests: nothing dropped")
    b = x[: k * batch].reshape(k, batch)
    ok = ~np.isnan(b)
    cnt = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(ok, b, 0.0).sum(axis=1) / cnt
    z = np.where(cnt > 0, z, np.nanmean(z))
    z = z - z.mean()  # centred: the suffix sums below lose no precision
    half = k // 2
    s1 = np.cumsum(z[::-1])[::-1][: half + 1]  # sum of the kept batches d..k-1, d <= half
    s2 = np.cumsum((z * z)[::-1])[::-1][: half + 1]
    m = np.arange(k, k - half - 1, -1, dtype=float)  # k - d
    stat = np.maximum(s2 - s1 * s1 / m, 0.0) / (m * m)
    # one-sided: the kept mean (s1 / m, centred) at or above the run's mean (0); d = 0 always
    stat[1:] = np.where(s1[1:] >= 0.0, stat[1:], np.inf)
    d = int(np.argmin(stat))  # the first minimiser: the least truncation among equals
    if d == half:
        return Truncation(0, False, "no steady state within the replay: the window from empty")
    return Truncation(d * batch, True)


def truncate(series: list[np.ndarray]) -> Truncation:
    """The warm-up of several series of one replay (same length, arrival order): the largest
    MSER-5 point; unsettled (nothing dropped) if any series did not settle."""
    cuts = [mser(s) for s in series]
    bad = [c for c in cuts if not c.settled]
    if bad:
        return bad[0]
    if not cuts:
        return Truncation(0, True)
    return max(cuts, key=lambda c: c.requests)
