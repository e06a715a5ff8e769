"""The bathtub: per-instance throughput and revenue against prefix hit rate.

A request of L input tokens at hit rate x prefills n = (1 - x) L new tokens in chunks of C.
Full chunks batch well; the short last chunk (the tail chunk) runs alone and pays a whole
pass's weight reads and overhead for few tokens, so miss-token throughput dips each time the
remainder n mod C is small. Cached tokens are served at x / (1 - x) times the miss rate and are
billed at `hit_price_ratio` of an uncached token; revenue per second (in uncached-token prices)
is miss/s + ratio * hit/s: high at both ends, a valley between.
"""

from __future__ import annotations

import numpy as np

from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance


def hit_rates(step: float = 0.01) -> np.ndarray:
    """The hit rates the curve is evaluated at: 0, step, ... below 1."""
    return np.round(np.arange(0.0, 1.0 - 1e-9, step), 6)


def prefill_passes(input_tokens: int, chunk: int, step: float = 0.01) -> int:
    """Chunked-prefill passes the whole curve evaluates (each one is a roofline evaluation):
    the work `bathtub` does, known before doing it."""
    new = input_tokens - np.floor(hit_rates(step) * input_tokens)
    return int(np.sum(np.maximum(np.ceil(new / chunk), 1)))


def bathtub(
    inst: Instance, input_tokens: int, chunk: int, hit_price_ratio: float, step: float = 0.01
) -> dict:
    """Points over hit rates 0..(1 - step) and the valley: the deepest revenue drop below the
    revenue at hit rate 0 that lies between two higher points."""
    pts = []
    for x in hit_rates(step):
        cached = float(np.floor(x * input_tokens))
        new = float(input_tokens) - cached
        t = roofline.prefill_time(inst, new, cached, chunk).total_s
        miss, hit = new / t, cached / t
        pts.append(
            {
                "hit_rate": float(x),
                "miss_tokens_per_s": round(miss, 2),
                "hit_tokens_per_s": round(hit, 2),
                "revenue_per_s": round(miss + hit_price_ratio * hit, 2),
            }
        )
    rev = np.array([p["revenue_per_s"] for p in pts])
    i = int(np.argmin(rev))
    valley = {
        "hit_rate": pts[i]["hit_rate"],
        "revenue_drop": round(float(1.0 - rev[i] / rev[0]), 4),
        "revenue_per_s": pts[i]["revenue_per_s"],
    }
    return {"points": pts, "valley": valley}
