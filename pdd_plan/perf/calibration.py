"""Calibration: fit a GPU's few efficiency factors to measured throughput.

Four factors per GPU type, the physical ones of the roofline (not one per data row):
`mfu` (large-GEMM fraction of peak FLOP/s), `mbu` (fraction of HBM bandwidth), `step_overhead_ms`
(per forward pass) and `chunk_half_tokens` (tokens at which a pass reaches half of mfu). They are
fitted by `scipy.optimize.least_squares` on log errors, within physical bounds, with a weak pull
towards the analytic defaults so that a GPU with few rows is not over-fitted.

A fit is written to `data/calibration/<gpu>.yaml`; loading a GPU profile applies it on top of
the profile's analytic efficiency (`pdd_plan.perf.calibrated.apply_calibration`) and sets
`efficiency.mode: calibrated`.
`comm_efficiency` and `mem_fraction` are never fitted. GPUs without measurements stay analytic.
"""

from __future__ import annotations

import csv
import datetime as _dt
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from .. import profiles
from ..errors import InputError
from ..schema.gpu import GPUProfile
from ..schema.io import load
from . import arch, roofline

# Reading and applying calibration files is calibrated.py's; the file format and folder are
# re-exported here for the `calibrate` command, which writes them.
from .calibrated import CalibrationFile, calibration_dir, with_efficiency  # noqa: F401
from .instance import Instance
from .offline import ENGINES, TRTLLM_BENCH, Engine, offline_throughput
from .readings import Reading, Readings, document_of, load_readings

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

# How the CSV's free-text columns map to profile names (the CSV keeps its own wording).
HARDWARE = {
    "H100 SXM 80GB": "h100",
    "H200 SXM 141GB": "h200",
    "H800": "h800",
    "A100 SXM 80GB": "a100-80g",
    "GB200": "gb200",
}
MODELS = {
    "Llama-3.1-8B": "llama-3.1-8b",
    # Llama-3.3-70B has Llama-3.1-70B's architecture (same config.json shapes)
    "Llama-3.3-70B": "llama-3.1-70b",
    "Llama-3.1-70B": "llama-3.1-70b",
}
# precision column -> (weight dtype, KV-cache dtype). ModelOpt FP8 checkpoints are run by
# TensorRT-LLM with an FP8 KV cache; assumption, supported by the data: with BF16 KV the
# H200 Llama-70B 2048/2048 row would need more than the GPU's HBM bandwidth.
PRECISIONS = {"FP8 (ModelOpt)": ("fp8", "fp8"), "FP8": ("fp8", "fp8"), "BF16": ("bf16", None)}
ENGINE_OF_SOURCE = {"TensorRT-LLM": TRTLLM_BENCH}


@dataclass(frozen=True)
class Measurement:
    row: int  # 1-based data row in the CSV (header excluded)
    source: str
    gpu: str
    n_gpus: int
    tp: int
    model: str
    dtype: str
    kv_dtype: str | None
    isl: int
    osl: int
    value: float  # measured tokens/s over `value_gpus` GPUs
    engine: Engine
    phase: str = "offline"  # offline | prefill | decode
    ep: int = 1
    dp: int = 1
    batch: int | None = None  # requests on the instance (None: engine/KV limits)
    chunk: int = 8192  # prefill tokens per pass and DP group
    value_gpus: float | None = None  # GPUs the figure covers (None: the instance's)
    expert_dtype: str | None = None
    redundant_experts: int = 0
    two_batch_overlap: bool | None = None
    expert_load: float | None = None
    document: str = ""  # leave-one-source-out group
    reading: str = ""

    @property
    def label(self) -> str:
        par = f"tp{self.tp}" + (f" ep{self.ep}" if self.ep > 1 else "")
        return f"{self.gpu} {self.model} {par} {self.dtype} {self.phase} {self.isl}/{self.osl}"

    @property
    def family(self) -> str:
        """dense | moe: the model family the error band is reported for."""
        return "moe" if profiles.model(self.model).ffn.moe is not None else "dense"


@dataclass(frozen=True)
class SetAside:
    """A CSV row the perf model does not predict, and why."""

    row: int
    source: str
    document: str
    use: str  # simulate | out
    reading: str
    metric: str
    value: float


def _lookup(table: dict[str, object], text: str, file: str, field: str, row: int):
    for key, val in table.items():
        if text.startswith(key) or key in text:
            return val
    raise InputError(
        file,
        f"row {row} {field}",
        f"unknown {field} '{text}'",
        f"known: {', '.join(table)}",
    )


def read_measurements(path: str | Path) -> list[Measurement]:
    """The rows of a measurements CSV the perf model predicts (see `read_rows`)."""
    return read_rows(path)[0]


def _engine(r: Reading, base: Engine) -> Engine:
    if r.engine is None:
        return base
    e = r.engine
    return Engine(
        name=f"{base.name} (row limits)",
        limits="fixed",
        max_batch=e.max_batch,
        max_num_tokens=e.max_num_tokens,
        kv_free_fraction=e.kv_free_fraction,
        source="data/calibration/readings.yaml (the measurement's stated engine limits)",
    )


def _from_reading(i: int, r: dict, rd: Reading, base: Engine, doc: str) -> Measurement:
    n = rd.n_gpus or 1
    return Measurement(
        row=i,
        source=r["source"],
        gpu=rd.gpu,
        n_gpus=n,
        tp=rd.tp or n,
        model=rd.model,
        dtype=rd.dtype,
        kv_dtype=rd.kv_dtype,
        isl=rd.isl or 0,
        osl=rd.osl,
        value=float(r["value"]),
        engine=_engine(rd, base),
        phase=rd.phase,
        ep=rd.ep,
        dp=rd.dp,
        batch=rd.batch,
        chunk=rd.chunk,
        value_gpus=rd.value_gpus,
        expert_dtype=rd.expert_dtype,
        redundant_experts=rd.redundant_experts,
        two_batch_overlap=rd.two_batch_overlap,
        expert_load=rd.expert_load,
        document=doc,
        reading=rd.reading,
    )


def _from_text(i: int, r: dict, f: str, engine: Engine, doc: str) -> Measurement:
    gpu = _lookup(HARDWARE, r["hardware"], f, "hardware", i)
    model = _lookup(MODELS, r["model"], f, "model", i)
    dtype, kv = _lookup(PRECISIONS, r["precision"], f, "precision", i)
    m = re.search(r"ISL/OSL\s*=\s*(\d+)\s*/\s*(\d+)", r["workload"])
    if not m:
        raise InputError(f, f"row {i} workload", "no 'ISL/OSL = a/b' in it", "")
    tp_m = re.search(r"TP(\d+)", r["parallelism"])
    if "output throughput" not in r["metric"].lower():
        raise InputError(
            f, f"row {i} metric", f"unsupported metric '{r['metric']}'", "use output tok/s"
        )
    try:
        n = int(float(r["n_gpus"]))
    except ValueError:
        raise InputError(
            f, f"row {i} n_gpus", "missing or not a number", "give the GPU count"
        ) from None
    return Measurement(
        row=i,
        source=r["source"],
        gpu=gpu,
        n_gpus=n,
        tp=int(tp_m.group(1)) if tp_m else n,
        model=model,
        dtype=dtype,
        kv_dtype=kv,
        isl=int(m.group(1)),
        osl=int(m.group(2)),
        value=float(r["value"]),
        engine=engine,
        document=doc,
    )


def _csv_rows(p: Path) -> list[dict]:
    f = str(p)
    if not p.is_file():
        raise InputError(f, None, "file not found", "give the measurements CSV path")
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        need = {"source", "hardware", "n_gpus", "model", "precision", "parallelism"}
        need |= {"workload", "metric", "value"}
        missing = need - set(reader.fieldnames or [])
        if missing:
            raise InputError(
                f, None, f"missing columns: {', '.join(sorted(missing))}", "use the CSV layout"
            )
        return list(reader)


def read_rows(path: str | Path) -> tuple[list[Measurement], list[SetAside]]:
    """Parse a measurements CSV (columns: source, hardware, n_gpus, model, precision,
    parallelism, workload, metric, value, unit, notes) with the readings beside it, if any:
    (rows to predict, rows set aside with the reason). Without readings, a row whose metric
    is not output throughput is refused with its row number."""
    p = Path(path)
    f = str(p)
    rows = _csv_rows(p)
    readings: Readings | None = load_readings(p)
    out, aside = [], []
    for i, r in enumerate(rows, start=1):
        engine = next((e for k, e in ENGINE_OF_SOURCE.items() if k in r["source"]), None)
        engine = engine or ENGINES["sglang"]
        doc = document_of(r["source"], readings)
        rd = readings.rows.get(i) if readings is not None else None
        if rd is not None and rd.use != "predict":
            aside.append(
                SetAside(i, r["source"], doc, rd.use, rd.reading, r["metric"], float(r["value"]))
            )
        elif rd is not None and rd.explicit:
            out.append(_from_reading(i, r, rd, engine, doc))
        else:
            m = _from_text(i, r, f, engine, doc)
            out.append(m if rd is None else replace(m, reading=rd.reading))
    return out, aside


def instance_of(meas: Measurement, gpu: GPUProfile, model=None) -> Instance:
    """The instance a measurement ran on."""
    if model is None:
        model = profiles.model(meas.model)
    model = arch.with_kv_dtype(model, meas.kv_dtype)
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
        expert_load=meas.expert_load,
    )


def predict(meas: Measurement, gpu: GPUProfile, model=None) -> float:
    """Predicted figure for one measurement on `gpu` (with its efficiency factors): the
    instance's tokens/s (offline: output; prefill: prompt tokens; decode: output) scaled to the
    GPUs the published figure covers."""
    inst = instance_of(meas, gpu, model)
    if meas.phase == "prefill":
        b = meas.batch or 1
        t = roofline.batch_prefill_time(inst, b, meas.isl, 0.0, meas.chunk).total_s
        tps = b * meas.isl / t
    elif meas.phase == "decode":
        ctx = meas.isl + meas.osl / 2.0
        b = meas.batch or inst.max_batch(ctx)
        if b < 1:
            inst.require_fit()
            raise InputError(None, f"row {meas.row}", "no request fits the KV pool", "")
        tps = b / roofline.decode_step(inst, b, ctx).total_s
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

    before = preds(x0) / meas - 1.0
    sol = least_squares(
        residuals,
        x0,
        bounds=(lo, hi),
        x_scale=np.maximum(np.abs(x0), [0.05, 0.05, 0.5, 16.0]),
        diff_step=1e-3,
        loss="linear",
    )
    after = preds(sol.x) / meas - 1.0
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
