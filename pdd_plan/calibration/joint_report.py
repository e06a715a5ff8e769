"""What a joint fit says about one GPU, in words: how many measurements it had against how many
parameters, and which fitted factors ended on a bound (the measurements ask for more, or less,
than the physical range allows: a figure is suspect or the model misses an effect)."""

from __future__ import annotations

import math

from pdd_plan.calibration.fit import BOUNDS, FACTORS
from pdd_plan.calibration.joint import SHIFTED, JointFit

AT_BOUND = 1e-3  # relative to the bound's range: a factor this close sits on it
# a row the fit leaves off by more than this factor (half or twice the figure) is one the model
# does not explain: each row's error is Student-t (joint.py), so one such row is left standing
# rather than absorbed, and the user is told
UNEXPLAINED = 2.0


def n_parameters(jf: JointFit) -> int:
    """Three factors per GPU with rows, three for the population mean and one slope of its mfu
    on the machine balance, one shared shift per factor MoE moves and one deviation from it per
    factor for each GPU that has its own."""
    return len(FACTORS) * (len(jf.gpus) + 1) + 1 + len(SHIFTED) * (1 + len(jf.deviation))


def fit_summary(jf: JointFit, gpu: str) -> str:
    mine = sum(jf.counts.get(gpu, {}).values())
    return (
        f"{mine} measurement(s) on {gpu} in a joint fit of {len(jf.rows)} rows on "
        f"{len(jf.gpus)} GPU(s) for {n_parameters(jf)} parameters, each GPU's factors pooled "
        "toward the GPUs' mean (a GPU with few rows stays near it)"
    )


def at_bound_warnings(jf: JointFit, gpu: str, rows_gpu: dict[int, str] | None = None) -> list[str]:
    """Factors of `gpu` on a bound of the fit, and (given `rows_gpu`, row -> GPU) the rows of
    `gpu` the fit leaves more than UNEXPLAINED off."""
    out = []
    for row, err in zip(jf.rows, jf.errors):
        off = abs(math.log1p(err)) if err > -1.0 else math.inf
        if rows_gpu is not None and rows_gpu.get(row) == gpu and off > math.log(UNEXPLAINED):
            out.append(
                f"{gpu}: row {row} is left {err:+.0%} off by the fitted factors: check the "
                "measured figure (the model does not explain it, so it moves the fit little)"
            )
    for family in ("dense", "moe"):
        f = jf.factors(gpu, family)
        for k in FACTORS:
            lo, hi = BOUNDS[k]
            tol = AT_BOUND * (hi - lo)
            side = "upper" if hi - f[k] <= tol else "lower" if f[k] - lo <= tol else None
            if side is not None and gpu in jf.gpus:
                out.append(
                    f"{gpu}: {family} {k} sits at its {side} bound {hi if side == 'upper' else lo:g}:"
                    " check the measured figures; this factor is not estimated"
                )
    return out
