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
    instance's tokens/s (offline: output, or input + output for a total_throughput figure;
    prefill: prompt tokens; decode: output) scaled to the GPUs the published figure covers, or
    a request's latency in ms for a request_latency_ms figure."""
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
        res = offline_throughput(inst, meas.isl, meas.osl, meas.engine)
        if meas.is_latency:
            return res.request_latency_s * 1e3
        tps = res.output_tokens_per_s
        if meas.figure == "total_throughput":
            tps *= (meas.isl + meas.osl) / meas.osl
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

    @property
    def median_before(self) -> float:
        return float(np.median(np.abs(self.errors_before)))

    @property
    def median_after(self) -> float:
        return float(np.median(np.abs(self.errors_after)))


def _models(rows: list[Measurement]):
    return {m: profiles.model(m) for m in {r.model for r in rows}}


def fit(rows: list[Measurement], gpu: GPUProfile) -> FitResult:
    """Least-squares fit of the four factors of `gpu` to `rows` (all on that GPU)."""
    from scipy.optimize import least_squares

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

    def residuals(x: np.ndarray) -> np.ndarray:
        err = np.log(preds(x) / meas)
        prior = []
        for k, v, v0 in zip(FACTORS, x, x0):
            if k in PRIOR_SCALE:
                prior.append(PRIOR_WEIGHT * (v - v0) / PRIOR_SCALE[k])
            else:
                prior.append(PRIOR_WEIGHT * np.log(v / v0))
        return np.concatenate([err, prior])

    before = np.array([r.error(p) for r, p in zip(rows, preds(x0))])
    sol = least_squares(
        residuals,
        x0,
        bounds=(lo, hi),
        x_scale=np.maximum(np.abs(x0), [0.05, 0.05, 0.5, 16.0]),
        diff_step=1e-3,
        loss="linear",
    )
    after = np.array([r.error(p) for r, p in zip(rows, preds(sol.x))])
    factors = {k: float(v) for k, v in zip(FACTORS, sol.x)}
    return FitResult(
        gpu.name,
        factors,
        [r.row for r in rows],
        sorted({r.source for r in rows}),
        [float(v) for v in before],
        [float(v) for v in after],
        bool(sol.success),
        str(sol.message),
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
        f"defaults; median |error| {res.median_before:.1%} analytic -> {res.median_after:.1%}"
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
