"""Calibration: fit a GPU's few efficiency factors to measured throughput.

Four factors per GPU type, the physical ones of the roofline (not one per data row):
`mfu` (large-GEMM fraction of peak FLOP/s), `mbu` (fraction of HBM bandwidth), `step_overhead_ms`
(per forward pass) and `chunk_half_tokens` (tokens at which a pass reaches half of mfu). They are
fitted by `scipy.optimize.least_squares` on log errors, within physical bounds, with a weak pull
towards the analytic defaults so that a GPU with few rows is not over-fitted.

A fit is written to `data/calibration/<gpu>.yaml`; loading a GPU profile applies it on top of
the profile's analytic efficiency (`pdd_plan.inputs.calibrated.apply_calibration`) and sets
`efficiency.mode: calibrated`.
`comm_efficiency` and `mem_fraction` are never fitted. GPUs without measurements stay analytic.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import numpy as np
import yaml

from pdd_plan.calibration.measurements import (  # noqa: F401  (the CSV rows' parsing lives there; re-exported)
    HARDWARE,
    MODELS,
    PRECISIONS,
    Measurement,
    SetAside,
    read_measurements,
    read_rows,
)
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles

# Reading and applying calibration files is calibrated.py's; the file format and folder are
# re-exported here for the `calibrate` command, which writes them.
from pdd_plan.inputs.calibrated import CalibrationFile, calibration_dir, with_efficiency  # noqa: F401
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.io import load
from pdd_plan.perf import layers, roofline
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.offline import offline_throughput

FACTORS = ("mfu", "mbu", "step_overhead_ms", "chunk_half_tokens")
# Physical bounds of the fit: fractions of peak, milliseconds per pass, tokens.
BOUNDS = {
    "mfu": (0.05, 1.0),
    "mbu": (0.05, 1.0),
    "step_overhead_ms": (0.0, 20.0),
    "chunk_half_tokens": (1.0, 4096.0),
}
# Weight of the pull towards the analytic value, per factor, in the same units as a log error
# (0.1: moving mfu by a factor e costs as much as a 10 % error on one row).
PRIOR_WEIGHT = 0.1
PRIOR_SCALE = {"step_overhead_ms": 2.0}  # ms; the others are pulled in log space


def instance_of(meas: Measurement, gpu: GPUProfile, model=None) -> Instance:
    """The instance a measurement ran on."""
    if model is None:
        model = profiles.model(meas.model)
    model = layers.with_kv_dtype(model, meas.kv_dtype)
    if meas.expert_dtype is not None:
        w = model.weights.model_copy(update={"expert_dtype": meas.expert_dtype})
        model = model.model_copy(update={"weights": w})
    return Instance(
        model,
        gpu,
        meas.n_gpus,
        tp=meas.tp,
        ep=meas.ep,
        dp=meas.dp,
        dtype=None if meas.expert_dtype else meas.dtype,
        redundant_experts=meas.redundant_experts,
        two_batch_overlap=meas.two_batch_overlap,
        single_batch_overlap=meas.single_batch_overlap,
        expert_load=meas.expert_load,
    )


def predict(meas: Measurement, gpu: GPUProfile, model=None) -> float:
    """Predicted figure for one measurement on `gpu` (with its efficiency factors): the
    instance's tokens/s (offline: output; prefill: prompt tokens; decode: output) scaled to the
    GPUs the published figure covers."""
    inst = instance_of(meas, gpu, model)
    if meas.phase == "prefill":
        b = meas.batch or 1
        p = roofline.batch_prefill_time(inst, b, meas.isl, meas.cached, meas.chunk)
        tps = b * meas.isl / (p.total_s - p.overhead_s * meas.kernels_only)
    elif meas.phase == "decode":
        ctx = meas.isl + meas.osl / 2.0
        b = meas.batch or inst.max_batch(ctx)
        if b < 1:
            inst.require_fit()
            raise InputError(None, f"row {meas.row}", "no request fits the KV pool", "")
        p = roofline.decode_step(inst, b, ctx)
        tps = b / (p.total_s - p.overhead_s * meas.kernels_only)
    else:
        inst.require_fit()
        tps = offline_throughput(inst, meas.isl, meas.osl, meas.engine).output_tokens_per_s
    return tps * (meas.value_gpus or meas.n_gpus) / meas.n_gpus


@dataclass(frozen=True)
class FitResult:
    gpu: str
    factors: dict[str, float]
    rows: list[int]
    sources: list[str]  # distinct `source` cells of the rows
    errors_before: list[float]  # signed relative errors, pred/meas - 1
    errors_after: list[float]
    success: bool
    message: str
    free: tuple[str, ...] = FACTORS  # the factors fitted; the others kept at their priors
    at_bound: tuple[str, ...] = ()  # free factors the fit pushed onto a bound

    @property
    def fixed(self) -> tuple[str, ...]:
        return tuple(k for k in FACTORS if k not in self.free)

    @property
    def summary(self) -> str:
        """How many measurements fitted how many factors, and which were held."""
        held = f"; held at their priors: {', '.join(self.fixed)}" if self.fixed else ""
        return f"{len(self.rows)} measurement(s) for {len(self.free)} free factor(s){held}"

    @property
    def warnings(self) -> list[str]:
        """A factor on its bound: the measurements ask for more (or less) than the physical
        range allows, so the figure is suspect (a typo'd throughput) or the model misses
        something; the fit is then no estimate of that factor."""
        out = []
        for k in self.at_bound:
            lo, hi = BOUNDS[k]
            side = "upper" if abs(self.factors[k] - hi) <= abs(self.factors[k] - lo) else "lower"
            out.append(
                f"{self.gpu}: {k} sits at its {side} bound {hi if side == 'upper' else lo:g} "
                f"(median |error| {self.median_after:.1%} after the fit): check the measured "
                "figures; this factor is not estimated"
            )
        return out

    @property
    def median_before(self) -> float:
        return float(np.median(np.abs(self.errors_before)))

    @property
    def median_after(self) -> float:
        return float(np.median(np.abs(self.errors_after)))


def _models(rows: list[Measurement]):
    return {m: profiles.model(m) for m in {r.model for r in rows}}


def _sensitivity(preds, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """|d log prediction| summed over the rows, per factor, for a 5 % step from the prior
    (downwards when the prior sits on the upper bound): which factors the rows can see."""
    base = np.log(preds(x0))
    out = []
    for i in range(len(FACTORS)):
        step = max(0.05 * abs(x0[i]), 0.05 * float(X_SCALE[i]))
        x = x0.copy()
        x[i] = x0[i] + step if x0[i] + step <= hi[i] else x0[i] - step
        x[i] = min(max(x[i], lo[i]), hi[i])
        out.append(float(np.abs(np.log(preds(x)) - base).sum()))
    return np.array(out)


def free_factors(preds, n_rows: int, x0, lo, hi) -> tuple[str, ...]:
    """The factors a fit of one GPU to `n_rows` measurements may move: all four with four rows
    or more; else as many as there are rows, those the rows are most sensitive to (one
    measurement cannot tell four factors apart: the rest stay at their priors)."""
    if n_rows >= len(FACTORS):
        return FACTORS
    sens = _sensitivity(preds, x0, lo, hi)
    order = sorted(range(len(FACTORS)), key=lambda i: (-sens[i], i))  # ties: FACTORS order
    keep = sorted(order[:n_rows])
    return tuple(FACTORS[i] for i in keep)


# The fit's step scale per factor (x_scale): fractions of peak, ms, tokens.
X_SCALE = np.array([0.05, 0.05, 0.5, 16.0])
AT_BOUND = 1e-3  # relative to the bound's range: a free factor this close sits on it


def _at_bound(x: np.ndarray, free: list[int], lo: np.ndarray, hi: np.ndarray) -> tuple[str, ...]:
    tol = AT_BOUND * (hi - lo)
    return tuple(FACTORS[i] for i in free if x[i] - lo[i] <= tol[i] or hi[i] - x[i] <= tol[i])


def fit(rows: list[Measurement], gpu: GPUProfile) -> FitResult:
    """Least-squares fit of the factors of `gpu` to `rows` (all on that GPU): all four, or with
    fewer rows than factors as many as there are rows (`free_factors`)."""
    from scipy.optimize import least_squares  # heavy to import; only the fitter needs it

    if not rows:
        raise InputError(None, "gpu", f"no measurements on {gpu.name}", "pick a GPU in the CSV")
    models = _models(rows)
    e0 = gpu.efficiency
    x0 = np.array([getattr(e0, k) for k in FACTORS], dtype=float)
    lo = np.array([BOUNDS[k][0] for k in FACTORS])
    hi = np.array([BOUNDS[k][1] for k in FACTORS])
    x0 = np.clip(x0, lo, hi)
    meas = np.array([r.value for r in rows])

    def preds(x: np.ndarray) -> np.ndarray:
        g = with_efficiency(gpu, **dict(zip(FACTORS, map(float, x))))
        return np.array([predict(r, g, models[r.model]) for r in rows])

    free_names = free_factors(preds, len(rows), x0, lo, hi)
    free = [FACTORS.index(k) for k in free_names]

    def full(xf: np.ndarray) -> np.ndarray:
        x = x0.copy()
        x[free] = xf
        return x

    def residuals(xf: np.ndarray) -> np.ndarray:
        x = full(xf)
        err = np.log(preds(x) / meas)
        prior = []
        for i in free:
            k, v, v0 = FACTORS[i], x[i], x0[i]
            if k in PRIOR_SCALE:
                prior.append(PRIOR_WEIGHT * (v - v0) / PRIOR_SCALE[k])
            else:
                prior.append(PRIOR_WEIGHT * np.log(v / v0))
        return np.concatenate([err, prior])

    before = preds(x0) / meas - 1.0
    sol = least_squares(
        residuals,
        x0[free],
        bounds=(lo[free], hi[free]),
        x_scale=np.maximum(np.abs(x0), X_SCALE)[free],
        diff_step=1e-3,
        loss="linear",
    )
    x = full(sol.x)
    after = preds(x) / meas - 1.0
    factors = {k: float(v) for k, v in zip(FACTORS, x)}
    return FitResult(
        gpu.name,
        factors,
        [r.row for r in rows],
        sorted({r.source for r in rows}),
        [float(v) for v in before],
        [float(v) for v in after],
        bool(sol.success),
        str(sol.message),
        free=free_names,
        at_bound=_at_bound(x, free, lo, hi),
    )


# ------------------------------------------------------------------ calibration files


def analytic_gpu(name: str) -> GPUProfile:
    """A bundled GPU profile exactly as its YAML says (no calibration applied)."""
    path = profiles.data_dir() / "profiles" / "gpus" / f"{name}.yaml"
    if not path.is_file():
        profiles.gpu(name)  # raises the usual 'unknown GPU' error with a suggestion
    return load(GPUProfile, str(path))


def calibration_yaml(res: FitResult, csv_name: str, date: str | None = None) -> str:
    """The text of `data/calibration/<gpu>.yaml` for a fit."""
    date = date or _dt.date.today().isoformat()
    rows = ", ".join(str(r) for r in res.rows)
    f = res.factors
    src = (
        f"fitted by pdd-plan calibrate to {csv_name} rows {rows} ({res.gpu}, "
        f"throughput measured by: {'; '.join(res.sources)}), {date}; scipy least_squares on log errors within bounds "
        f"{', '.join(f'{k} {BOUNDS[k]}' for k in FACTORS)}, weak prior towards the analytic "
        f"defaults; {res.summary}; median |error| {res.median_before:.1%} analytic -> "
        f"{res.median_after:.1%}" + "".join(f"; warning: {w}" for w in res.warnings)
    )
    data = {
        "gpu": res.gpu,
        "efficiency": {
            "mfu": round(f["mfu"], 4),
            "mbu": round(f["mbu"], 4),
            "step_overhead_ms": round(f["step_overhead_ms"], 3),
            "chunk_half_tokens": round(f["chunk_half_tokens"], 1),
            "source": src,
        },
        "fit": {
            "measurements": csv_name,
            "rows": list(res.rows),
            "date": date,
            "errors_analytic": [round(e, 4) for e in res.errors_before],
            "errors_calibrated": [round(e, 4) for e in res.errors_after],
            "median_abs_error_analytic": round(res.median_before, 4),
            "median_abs_error_calibrated": round(res.median_after, 4),
        },
    }
    header = "# Written by `pdd-plan calibrate --write`. Applied on top of the analytic\n"
    header += f"# efficiency of profiles/gpus/{res.gpu}.yaml whenever that profile is loaded.\n"
    return header + yaml.safe_dump(data, sort_keys=False, width=100)
