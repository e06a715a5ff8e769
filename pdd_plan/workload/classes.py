"""Request classes for the optimizer: hit-rate bin x input-length bucket, weighted by share."""

from __future__ import annotations

import numpy as np

from ..resolve import Context
from .distributions import sample_requests
from .requests import RequestClasses, Requests

# Hit-rate bin edges (fractions): the bins trace stats reports; the top ones are narrow
# because that is where line bytes change fastest.
HIT_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.99, 1.0000001)


def classes_from_requests(req: Requests, n_length_buckets: int = 3) -> RequestClasses:
    """Group requests by hit bin x input-length quantile bucket; each class is its members' mean."""
    hit_p = np.nan_to_num(req.hit_p, nan=0.0)
    hit_d = np.where(np.isnan(req.hit_d), hit_p, req.hit_d)
    hb = np.clip(np.searchsorted(HIT_EDGES, hit_p, side="right") - 1, 0, len(HIT_EDGES) - 2)
    inp = req.input_tokens.astype(float)
    qs = (
        np.quantile(inp, np.linspace(0, 1, n_length_buckets + 1)[1:-1])
        if n_length_buckets > 1
        else []
    )
    lb = np.searchsorted(np.unique(qs), inp, side="right")
    key = hb * (n_length_buckets + 1) + lb
    keys, inv, counts = np.unique(key, return_inverse=True, return_counts=True)

    def mean_of(x: np.ndarray) -> np.ndarray:
        return np.bincount(inv, weights=x, minlength=len(keys)) / counts

    rate = len(req) / req.duration_s if req.duration_s > 0 else None
    return RequestClasses(
        input_tokens=mean_of(inp),
        output_tokens=mean_of(req.output_tokens.astype(float)),
        hit_p=mean_of(hit_p),
        hit_d=mean_of(hit_d),
        weight=counts / counts.sum(),
        rate_rps=rate,
    )


def build_classes(ctx: Context) -> RequestClasses:
    """Classes from the scenario's trace, or from its distributions (seeded sample)."""
    w, sc = ctx.scenario.workload, ctx.scenario
    buckets = max(1, w.classes // (len(HIT_EDGES) - 1))
    if w.trace is not None:
        from .traces import read_trace

        path = (
            w.trace if (ctx.base_dir / w.trace).exists() is False else str(ctx.base_dir / w.trace)
        )
        req, _info = read_trace(path)
    else:
        req = sample_requests(w, w.samples, sc.seed, w.rate_rps or 1.0)
    cls = classes_from_requests(req, buckets)
    if not sc.policy.drc:
        return cls
    # MD's radix cache holds what it saw on earlier turns: a fraction of the prefill-side hit
    hit_d = cls.hit_p * sc.policy.md_hit_ratio if w.trace is None else cls.hit_d
    return RequestClasses(
        cls.input_tokens, cls.output_tokens, cls.hit_p, hit_d, cls.weight, cls.rate_rps
    )
