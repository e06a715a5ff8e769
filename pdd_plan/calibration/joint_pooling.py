"""What the joint fit's pooling is made of: how many rows inform each factor of a GPU, the
Student-t residual of its robust terms and the between-GPU spread estimator.

How many rows inform a factor (the pooling's row count, per factor):

A GPU's rows do not inform its three factors alike. A batch-1 decode row is almost all fixed
cost: it pins the step overhead and says little about mfu; a max-throughput row of a large
model the reverse. Counting a GPU's rows once for all three lets one row drag a factor the other
rows do not see to a bound (GB200's step overhead went to 0 on its one batch-1 row while its
five other rows, large-batch ones, hardly move with it).

A row's information on factor k, against the pooling prior's, is (s_k SIGMA_GPU_k / SIGMA_ROW)^2
with s_k = d log(figure) / d factor_k: the ratio of the row's Fisher information on the factor
(its error is SIGMA_ROW in log) to the prior's (1 / SIGMA_GPU_k^2). It is taken as the change of
log(figure) when the factor moves by one prior spread (mfu and mbu divided by e^SIGMA_GPU, the
overhead raised by SIGMA_GPU ms) at the analytic defaults, over SIGMA_ROW, squared, and capped at
1: a row counts as at most one row. A GPU's effective rows for a factor are the sum over its rows;
joint.py pools a factor with at most FEW_ROWS of them under the narrowed normal prior (it stays
near the GPUs' mean), one with more under the Student-t.
"""

from __future__ import annotations

import math

import numpy as np

from pdd_plan.calibration.fit import BOUNDS, FACTORS, Measurement, predict
from pdd_plan.inputs.calibrated import with_efficiency
from pdd_plan.inputs.schema.gpu import FamilyFactors, GPUProfile

# a factor no row informs: its effective row count is floored here, so that its prior stays
# finite (SIGMA_GPU x 0.1 / 3.1: the factor held within 3 % of a spread of the GPUs' mean)
MIN_ROWS = 0.1
# the factors counted by their rows' information; the others count every row of the GPU. The
# step overhead adds to every pass, so its share of a row's figure is its information whatever
# the factors; mfu and mbu trade off inside the roofline's rounded corner (moe-serving.yaml
# gemm_roofline) and against the communication, so a sensitivity at the analytic defaults is
# not their information at the fitted ones (counted by it they were held near the mean on
# rows that do inform them: held-out MoE median 12.1 % against 11.6 %)
BY_INFORMATION = ("step_overhead_ms",)


def _at(gpu: GPUProfile, f: dict[str, float]) -> GPUProfile:
    """`gpu` with both families at the factors `f`."""
    moe = FamilyFactors(**f, basis="sensitivity of the fit's rows")
    return with_efficiency(gpu, **f, mode="calibrated", moe=moe)


def _moved(prior: dict[str, float], k: str, spread: float, log: bool) -> dict[str, float]:
    f = dict(prior)
    lo, hi = BOUNDS[k]
    f[k] = max(lo, f[k] / math.exp(spread)) if log else min(hi, f[k] + spread)
    return f


def row_information(
    r: Measurement, gpu: GPUProfile, model, prior: dict[str, float], sigmas: tuple, log: tuple
) -> np.ndarray:
    """Row `r`'s information on each of FACTORS against the pooling prior's (capped at 1)."""
    sigma_row, sigma_gpu = sigmas
    base = predict(r, _at(gpu, prior), model)
    out = []
    for k, s, lg in zip(FACTORS, sigma_gpu, log):
        d = math.log(predict(r, _at(gpu, _moved(prior, k, s, lg)), model) / base)
        out.append(min(1.0, (d / sigma_row) ** 2))
    return np.array(out)


def effective_rows(
    rows: list[Measurement],
    analytic: dict[str, GPUProfile],
    models: dict,
    prior: dict[str, float],
    sigmas: tuple,
    log: tuple,
) -> dict[str, np.ndarray]:
    """GPU -> its effective rows per factor (FACTORS order), at least MIN_ROWS each."""
    out: dict[str, np.ndarray] = {}
    by_info = np.array([k in BY_INFORMATION for k in FACTORS])
    for r in rows:
        info = row_information(r, analytic[r.gpu], models[r.model], prior, sigmas, log)
        info = np.where(by_info, info, 1.0)
        out[r.gpu] = out.get(r.gpu, np.zeros(len(FACTORS))) + info
    return {g: np.maximum(v, MIN_ROWS) for g, v in out.items()}


def student_t_residual(r: np.ndarray, nu: float) -> np.ndarray:
    """The residual whose square is Student-t's negative log density (up to a constant),
    nu log(1 + r^2 / nu), with r's sign: least squares on it is a t prior on r. Equal to r near
    0; grows like sqrt(log r) far out, so one GPU far from the others barely moves their mean."""
    return np.sign(r) * np.sqrt(nu * np.log1p(r * r / nu))


def dersimonian_laird(s: np.ndarray, v: np.ndarray) -> float:
    """The method-of-moments between-study variance tau^2 of estimates `s` with within-study
    variances `v` (DerSimonian & Laird 1986); 0 when the spread is no more than `v` explains."""
    if len(s) < 2:
        return 0.0
    w = 1.0 / v
    mean = float(np.sum(w * s) / np.sum(w))
    q = float(np.sum(w * (s - mean) ** 2))
    denom = float(np.sum(w) - np.sum(w**2) / np.sum(w))
    return max(0.0, (q - (len(s) - 1)) / denom) if denom > 0 else 0.0
