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
    if meas.phase == "serve":  # a benchmark client's run (calibration/serving_runs.py)
        from pdd_plan.calibration.serving_runs import predict_serving

        inst.require_fit()
        v = predict_serving(meas, inst)
        return v if meas.is_latency else v * (meas.value_gpus or meas.n_gpus) / meas.n_gpus
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


# ------------------------------------------------------------------ calibration files


def analytic_gpu(name: str) -> GPUProfile:
    """A bundled GPU profile exactly as its YAML says (no calibration applied)."""
    path = profiles.data_dir() / "profiles" / "gpus" / f"{name}.yaml"
    if not path.is_file():
        profiles.gpu(name)  # raises the usual 'unknown GPU' error with a suggestion
    return load(GPUProfile, str(path))
