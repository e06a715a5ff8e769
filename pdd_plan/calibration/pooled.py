"""Pooled efficiency factors: what a GPU without its own measurements is predicted with.

A GPU type with calibration rows gets its four factors fitted to them
(:func:`pdd_plan.calibration.fit.fit`). A GPU type with none used to keep the analytic
defaults of its profile (mfu 0.5, mbu 0.8, 2 ms per pass, half-speed chunk 256 tokens), a
guess made without data. The fitted factors are fractions of each GPU's *own* peak (mfu, mbu)
or engine-side costs of a forward pass (step overhead; the GEMM size at which a pass reaches
half of mfu), so they describe the serving software and the workload as much as the silicon
and carry over to another GPU type. The in-sample fits of the bundled rows show which way
they carry: the half-speed chunk is fitted below the analytic 256 tokens on every GPU
(99-215), mbu above the analytic 0.8 wherever the rows pin it (0.84-0.92), and mfu splits by
*model family*, not by GPU: 0.57-0.91 on the GPUs fitted to dense TensorRT-LLM rows, 0.34-0.42
on those fitted to MoE rows (grouped expert GEMMs, MLA kernels, imbalance left after EPLB).

Hence the one-level hierarchical (pooled) estimate used here: a GPU with no rows, predicting a
row of family F, takes per factor the row-weighted median of the factors fitted on the GPUs
that have rows of family F (each GPU counted once per such row); when no GPU has rows of F, the
median over all fitted rows. The median (not the mean) keeps one outlying GPU (A100 fitted to a
single GPT-J row: mfu 0.91) from dragging the estimate; row weights make a GPU fitted to eight
rows count more than one fitted to a single row. A GPU's own fit is not changed (its prior
stays the analytic defaults), so each calibration file depends on that GPU's rows only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pdd_plan.calibration.measurements import Measurement
from pdd_plan.inputs.calibrated import with_efficiency
from pdd_plan.inputs.schema.gpu import GPUProfile


def weighted_median(values: Sequence[float], weights: Sequence[int]) -> float:
    """Median of `values`, each counted `weights` times (whole numbers of rows): the ordinary
    median of the list with every value repeated, so an even total averages the middle two."""
    if len(values) != len(weights) or not values:
        raise ValueError("weighted_median needs as many weights as values, at least one")
    if any(int(w) != w or w < 1 for w in weights):
        raise ValueError("weights are row counts: whole numbers >= 1")
    return float(np.median(np.repeat(np.asarray(values, dtype=float), np.asarray(weights, int))))


def pooled_factors(
    fits: Mapping[str, Mapping[str, float]], weights: Mapping[str, int]
) -> dict[str, float]:
    """Per factor, the median of the GPUs' fitted factors (`fits`: GPU name -> factors), each
    GPU counted `weights[gpu]` times; GPUs with weight 0 or no fit are left out. Empty when
    nothing is left."""
    names = sorted(g for g in fits if weights.get(g, 0) > 0)
    if not names:
        return {}
    keys = sorted(set.intersection(*(set(fits[g]) for g in names)))
    w = [weights[g] for g in names]
    return {k: weighted_median([fits[g][k] for g in names], w) for k in keys}


def family_pool(
    fits: Mapping[str, Mapping[str, float]], rows: Iterable[Measurement], family: str
) -> tuple[dict[str, float], str]:
    """The pooled factors for a row of `family` on a GPU without rows, given the per-GPU `fits`
    and the `rows` they were fitted to; with a short note of what was pooled ('' and {} when
    there is nothing to pool)."""
    rows = [r for r in rows if r.gpu in fits]
    same = Counter(r.gpu for r in rows if r.family == family)
    weights, what = (same, f"{family} rows") if same else (Counter(r.gpu for r in rows), "rows")
    pooled = pooled_factors(fits, weights)
    if not pooled:
        return {}, ""
    n = sum(weights.values())
    return pooled, f"pooled: median of {len(weights)} GPUs' fits over {n} {what}"


def pooled_profile(gpu: GPUProfile, factors: Mapping[str, float]) -> GPUProfile:
    """`gpu` with pooled factors, marked calibrated; unchanged when `factors` is empty."""
    if not factors:
        return gpu
    return with_efficiency(gpu, **factors, mode="calibrated")
