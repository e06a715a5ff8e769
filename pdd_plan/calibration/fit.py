"""Calibration: what a measurement row predicts, and the factors a fit may move.

Three factors per GPU type (and model family), the physical ones of the roofline, not one per
data row: `mfu` (large-GEMM fraction of peak FLOP/s), `mbu` (fraction of HBM bandwidth) and
`step_overhead_ms` (per forward pass), within `BOUNDS`. How a GEMM near its ridge runs (the
roofline's rounded corner) is not fitted: its sharpness comes from DeepGEMM's published shapes
(`data/profiles/runtime/moe-serving.yaml` gemm_roofline). `predict` is one row's figure on a GPU profile with given
factors; `calibration/joint.py` fits them for every GPU and family at once and
`calibration/joint_files.py` writes `data/calibration/<gpu>.yaml`, which loading a GPU profile
applies on top of its analytic efficiency (`pdd_plan.inputs.calibrated.apply_calibration`,
`efficiency.mode: calibrated`). `comm_efficiency` and `mem_fraction` are never fitted.
"""

from __future__ import annotations

from typing import cast

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

FACTORS = ("mfu", "mbu", "step_overhead_ms")
# Physical bounds of the fit: fractions of peak, milliseconds per pass.
BOUNDS = {
    "mfu": (0.05, 1.0),
    "mbu": (0.05, 1.0),
    "step_overhead_ms": (0.0, 20.0),
}


def factors_at_bound(eff) -> list[str]:
    """The fitted factors (dense and MoE) of an efficiency that sit at a bound of the fit, in
    words: the rows push them to where the fit stops them, so they measure the model's misfit
    rather than the GPU. Empty for analytic profiles."""
    if getattr(eff, "mode", "analytic") != "calibrated":
        return []
    out = []
    fams = [("dense", eff)] + ([("moe", eff.moe)] if eff.moe is not None else [])
    for fam, f in fams:
        for k in FACTORS:
            v, (lo, hi) = getattr(f, k), BOUNDS[k]
            tol = 1e-3 * (hi - lo)
            for edge in (lo, hi):
                if abs(v - edge) <= tol:
                    out.append(f"{fam} {k} {v:g} at the fit's bound {edge:g}")
    return out


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
    a latency in ms (request_latency_ms, tpot_ms, ttft_ms), or one request's tokens/s
    (user_tokens_per_s)."""
    inst = instance_of(meas, gpu, model)
    if meas.phase == "serve":  # a benchmark client's run (calibration/serving_runs.py)
        from pdd_plan.calibration.serving_runs import ServingMeasurement, predict_serving

        inst.require_fit()
        v = predict_serving(cast(ServingMeasurement, meas), inst)
        return v if meas.is_latency else v * (meas.value_gpus or meas.n_gpus) / meas.n_gpus
    if meas.phase == "prefill":
        return _prefill(meas, inst)
    if meas.phase == "decode":
        return _decode(meas, inst)
    return _offline(meas, inst)


def _per_request(meas: Measurement, tpot_s: float) -> float | None:
    """tpot_ms or user_tokens_per_s from one request's time per output token; None otherwise."""
    if meas.figure == "tpot_ms":
        return tpot_s * 1e3
    if meas.figure == "user_tokens_per_s":
        return 1.0 / tpot_s
    return None


def _scaled(meas: Measurement, tps: float) -> float:
    return tps * (meas.value_gpus or meas.n_gpus) / meas.n_gpus


# points of a uniform length spread a mean TTFT is taken over (midpoints of equal-width bins:
# exact for a quadratic in the length to 1 / (12 n^2) of the spread's variance)
SPREAD_POINTS = 16


def _ttft_ms(meas: Measurement, inst: Instance, isl: float) -> float:
    """Mean TTFT of one request alone (its prefill passes) at mean prompt `isl`, over the
    row's length spread if it has one (TTFT is convex in the length)."""
    lens = [float(isl)]
    if meas.isl_range is not None:
        lo, hi = meas.isl_range
        shift = isl - (lo + hi) / 2.0  # the spread's mean at `isl`
        step = (hi - lo) / SPREAD_POINTS
        lens = [max(lo + (j + 0.5) * step + shift, 1.0) for j in range(SPREAD_POINTS)]
    t = [roofline.prefill_time(inst, n, meas.cached, meas.chunk).total_s for n in lens]
    return 1e3 * sum(t) / len(t)


def _prefill(meas: Measurement, inst: Instance) -> float:
    if meas.figure == "ttft_ms":  # one request alone: its prefill passes
        t = _ttft_ms(meas, inst, meas.isl)
        return t - (_ttft_ms(meas, inst, meas.less_isl) if meas.less_isl else 0.0)
    b = meas.batch or 1
    p = roofline.batch_prefill_time(inst, b, meas.isl, meas.cached, meas.chunk)
    return _scaled(meas, b * meas.isl / (p.total_s - p.overhead_s * meas.kernels_only))


def _decode(meas: Measurement, inst: Instance) -> float:
    ctx = meas.isl + meas.osl / 2.0
    b = meas.batch or inst.max_batch(ctx)
    if b < 1:
        inst.require_fit()
        raise InputError(None, f"row {meas.row}", "no request fits the KV pool", "")
    p = roofline.decode_step(inst, b, ctx)
    step = p.total_s - p.overhead_s * meas.kernels_only
    per = _per_request(meas, step)
    return per if per is not None else _scaled(meas, b / step)


def _offline(meas: Measurement, inst: Instance) -> float:
    inst.require_fit()
    res = offline_throughput(inst, meas.isl, meas.osl, meas.engine)
    if meas.figure == "request_latency_ms":
        return res.request_latency_s * 1e3
    per = _per_request(meas, res.tpot_s)
    if per is not None:
        return per
    tps = res.output_tokens_per_s
    if meas.figure == "total_throughput":
        tps *= (meas.isl + meas.osl) / meas.osl
    return _scaled(meas, tps)


# ------------------------------------------------------------------ calibration files


def analytic_gpu(name: str) -> GPUProfile:
    """A bundled GPU profile exactly as its YAML says (no calibration applied)."""
    path = profiles.data_dir() / "profiles" / "gpus" / f"{name}.yaml"
    if not path.is_file():
        profiles.gpu(name)  # raises the usual 'unknown GPU' error with a suggestion
    return load(GPUProfile, str(path))
