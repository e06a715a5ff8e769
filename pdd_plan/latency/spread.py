"""How much a stratum's requests spread around its mean, for percentiles over strata.

The planner's classes are split into strata that halve toward the top of each class (the
bottom half of a class is one stratum): a percentile over them puts every request of a
stratum at its mean. Where a time follows a request's size (a transfer capped at what one
transfer gets, a prefill) that misplaces a percentile inside a wide stratum: the mean of the
top half of requests is not their median. Each stratum carries the standard deviation of the
tokens MD lacks among its requests (``RequestClasses.lacked_sd``); these turn it into seconds
at the time's slope per token (or byte) over the strata, for
:func:`pdd_plan.latency.line.delay_shape.spread_points`."""

from __future__ import annotations

import numpy as np

from pdd_plan.latency import paths as latency_paths
from pdd_plan.workload.requests import RequestClasses


def _slope(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """The weighted least-squares slope of ``y`` on ``x`` (0 where undefined or negative)."""
    ww = np.asarray(w, dtype=float)
    if ww.sum() <= 0 or np.ptp(x) <= 0:
        return 0.0
    mx = float(np.dot(ww, x) / ww.sum())
    vx = float(np.dot(ww, (x - mx) ** 2))
    if vx <= 0:
        return 0.0
    return max(float(np.dot(ww, (x - mx) * (y - np.dot(ww, y) / ww.sum()))) / vx, 0.0)


def bare_spread(
    bare: np.ndarray, xb: np.ndarray, w: np.ndarray, sd_bytes: np.ndarray | None
) -> np.ndarray | None:
    """Each stratum's spread of bare transfer times: its bytes' spread at the seconds per byte
    a bare transfer takes (the regression slope of the strata's bare times on their bytes: a
    bare transfer is affine in its bytes but for slow start)."""
    if sd_bytes is None or len(sd_bytes) != len(bare) or len(bare) < 2:
        return None
    return _slope(np.asarray(xb, dtype=float), np.asarray(bare, dtype=float), w) * sd_bytes


def fixed_spread(
    classes: RequestClasses, ft: latency_paths.PathTimes, fshares: dict[str, np.ndarray]
) -> np.ndarray | None:
    """Per path and stratum, the spread of TTFT's fixed part over the stratum's requests: the
    spread of the tokens MD lacks (what prefill computes, bar MD-only hits, and what crosses)
    at the fixed part's seconds per such token over the path's strata. None where the strata
    carry no spread."""
    f = classes.fine
    sd = f.lacked_sd
    first = ft.ttft_fixed_s[next(iter(fshares))]
    if sd is None or len(sd) != len(f.weight) or len(first) != len(sd):
        return None
    x = f.input_tokens * (1.0 - f.hit_d)
    return np.concatenate(
        [_slope(x, np.asarray(ft.ttft_fixed_s[k], dtype=float), w) * sd for k, w in fshares.items()]
    )
