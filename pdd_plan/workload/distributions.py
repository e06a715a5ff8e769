"""Sampling the scenario's length and hit-rate distributions (seeded, vectorized)."""

from __future__ import annotations

import numpy as np

from pdd_plan.inputs.schema.distribution import Distribution
from pdd_plan.inputs.schema.scenario import Workload
from pdd_plan.workload.requests import Requests
from pdd_plan.workload.synthetic import arrival_gaps


def sample(dist: Distribution, n: int, rng: np.random.Generator) -> np.ndarray:
    if dist.fixed is not None:
        return np.full(n, float(dist.fixed))
    if dist.lognormal is not None:
        ln = dist.lognormal
        return np.clip(rng.lognormal(ln.mu, ln.sigma, n), ln.min, ln.max)
    bins = np.asarray(dist.histogram, dtype=float)
    idx = rng.choice(len(bins), size=n, p=bins[:, 2] / bins[:, 2].sum())
    lo, hi = bins[idx, 0], bins[idx, 1]
    return lo + (hi - lo) * rng.random(n)


def mean(dist: Distribution) -> float:
    """Mean of a distribution: exact for fixed and histogram, a large seeded sample for the
    clipped lognormal (its closed form needs the clipping terms, not worth the code)."""
    if dist.fixed is not None:
        return float(dist.fixed)
    if dist.histogram is not None:
        b = np.asarray(dist.histogram, dtype=float)
        return float(np.sum((b[:, 0] + b[:, 1]) / 2 * b[:, 2]))
    return float(sample(dist, 200_000, np.random.default_rng(0)).mean())


def sample_requests(w: Workload, n: int, seed: int, rate_rps: float = 1.0) -> Requests:
    """n arrivals at `rate_rps` (Poisson, or gamma gaps of CV `w.arrival_cv`) with lengths and
    hit rates drawn from the workload."""
    rng = np.random.default_rng(seed)
    inp = np.maximum(np.round(sample(w.input_tokens, n, rng)), 1).astype(np.int64)  # type: ignore[arg-type]
    out = np.maximum(np.round(sample(w.output_tokens, n, rng)), 1).astype(np.int64)  # type: ignore[arg-type]
    hit = np.clip(sample(w.prefix_hit, n, rng), 0.0, 1.0)
    arrivals = np.cumsum(arrival_gaps(n, rate_rps, w.arrival_cv, rng))
    return Requests(arrivals, inp, out, hit, hit.copy())
