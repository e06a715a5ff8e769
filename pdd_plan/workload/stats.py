"""Summary statistics of a request set (JSON-serialisable plain Python values)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pdd_plan.workload.requests import Requests

# Per-request hit-rate bin edges as fractions: [lo, hi) except the last, [0.99, 1.0].
HIT_BIN_EDGES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.99, 1.0)


def hit_bin_index(hit: np.ndarray, edges: Sequence[float] = HIT_BIN_EDGES) -> np.ndarray:
    """Bin of each hit fraction: bins are [lo, hi) and the last one is closed."""
    inner = np.asarray(edges[1:-1], dtype=np.float64)
    return np.searchsorted(inner, np.asarray(hit, dtype=np.float64), side="right")


def _r(x: float, nd: int) -> float:
    return float(round(float(x), nd))


def _dist(x: np.ndarray) -> dict[str, float]:
    if x.shape[0] == 0:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "mean": 0.0}
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"p50": _r(p50, 1), "p90": _r(p90, 1), "p99": _r(p99, 1), "mean": _r(x.mean(), 1)}


def trace_stats(
    requests: Requests,
    *,
    hit: str = "p",
    edges: Sequence[float] = HIT_BIN_EDGES,
) -> dict:
    """Counts, rate, length percentiles and the hit-rate histogram of ``requests``.

    ``hit``: ``"p"`` (prefill side, ``hit_p``) or ``"d"`` (MD side, ``hit_d``). Hit
    statistics cover requests whose hit is known (not NaN; ``hit_known_requests``);
    they are None when no hit is known. ``rate_rps`` = requests / duration (None for a
    zero duration). Shares and rates are fractions, not percent.
    """
    if hit not in ("p", "d"):
        raise ValueError(f"hit must be 'p' or 'd', got {hit!r}")
    n = len(requests)
    inp = np.asarray(requests.input_tokens, dtype=np.float64)
    out = np.asarray(requests.output_tokens, dtype=np.float64)
    h = np.asarray(requests.hit_p if hit == "p" else requests.hit_d, dtype=np.float64)
    dur = requests.duration_s
    known = ~np.isnan(h)
    n_known = int(known.sum())
    stats: dict = {
        "requests": n,
        "duration_s": _r(dur, 3),
        "rate_rps": _r(n / dur, 4) if dur > 0 else None,
        "input_tokens": _dist(inp),
        "output_tokens": _dist(out),
        "hit_side": hit,
        "hit_known_requests": n_known,
        "hit_rate_bins": None,
        "token_weighted_hit_rate": None,
        "mean_hit_rate": None,
    }
    if n_known == 0:
        return stats
    hk, ik = h[known], inp[known]
    counts = np.bincount(hit_bin_index(hk, edges), minlength=len(edges) - 1)
    stats["hit_rate_bins"] = [
        {"lo": _r(edges[b], 4), "hi": _r(edges[b + 1], 4), "share": _r(counts[b] / n_known, 6)}
        for b in range(len(edges) - 1)
    ]
    tw = float((hk * ik).sum() / ik.sum()) if ik.sum() > 0 else math.nan
    stats["token_weighted_hit_rate"] = _r(tw, 6) if math.isfinite(tw) else None
    stats["mean_hit_rate"] = _r(hk.mean(), 6)
    return stats
