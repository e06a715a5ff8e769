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
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from .. import profiles
from ..atomic import note_input
from ..errors import InputError
from ..schema.gpu import GPUProfile
from ..schema.io import load
from . import arch

# Reading and applying calibration files is calibrated.py's; the file format and folder are
# re-exported here for the `calibrate` command, which writes them.
from .calibrated import CalibrationFile, calibration_dir, with_efficiency  # noqa: F401
from .instance import Instance
from .offline import ENGINES, TRTLLM_BENCH, Engine, offline_throughput

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
HARDWARE = {"H100 SXM 80GB": "h100", "H200 SXM 141GB": "h200"}
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
    value: float  # measured output tokens/s, whole instance
    engine: Engine

    @property
    def label(self) -> str:
        return f"{self.gpu} {self.model} tp{self.tp} {self.dtype} {self.isl}/{self.osl}"


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


NEED_COLUMNS = ("source", "hardware", "n_gpus", "model", "precision", "parallelism")
NEED_COLUMNS += ("workload", "metric", "value")


def _number(text: str, file: str, field: str, row: int, integer: bool = False) -> float:
    """A finite, positive number from a CSV cell (a whole one with `integer`)."""
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not (math.isfinite(x) and x > 0) or (integer and x != int(x)):
        what = "a whole number >= 1" if integer else "a finite number > 0"
        raise InputError(file, f"row {row} {field}", f"must be {what} (got {text!r})", "")
    return x


def _measurement(r: dict, i: int, f: str) -> Measurement:
    short = [c for c in NEED_COLUMNS if r.get(c) is None]
    if short or None in r:  # DictReader: None for missing cells, a None key for extra ones
        header = [k for k in r if k is not None]
        n = sum(r[k] is not None for k in header) + len(r.get(None) or [])
        raise InputError(f, f"row {i}", f"has {n} cells, the header {len(header)}", "fix the row")
    gpu = _lookup(HARDWARE, r["hardware"], f, "hardware", i)
    model = _lookup(MODELS, r["model"], f, "model", i)
    dtype, kv = _lookup(PRECISIONS, r["precision"], f, "precision", i)
    m = re.search(r"ISL/OSL\s*=\s*(\d+)\s*/\s*(\d+)", r["workload"])
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise InputError(f, f"row {i} workload", "no 'ISL/OSL = a/b' (a, b >= 1) in it", "")
    tp_m = re.search(r"TP(\d+)", r["parallelism"])
    if "output throughput" not in r["metric"].lower():
        raise InputError(
            f, f"row {i} metric", f"unsupported metric '{r['metric']}'", "use output tok/s"
        )
    n = int(_number(r["n_gpus"], f, "n_gpus", i, integer=True))
    engine = next((e for k, e in ENGINE_OF_SOURCE.items() if k in r["source"]), None)
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
        value=_number(r["value"], f, "value", i),
        engine=engine or ENGINES["sglang"],
    )


def read_measurements(path: str | Path) -> list[Measurement]:
    """Parse a measurements CSV (columns: source, hardware, n_gpus, model, precision,
    parallelism, workload, metric, value, unit, notes). Rows whose metric is not output
    throughput, short rows and values that are not positive numbers are refused with the
    row number; a file with no rows is refused too."""
    p = Path(path)
    f = str(p)
    if not p.is_file():
        raise InputError(f, None, "file not found", "give the measurements CSV path")
    note_input(p)  # no output of this command may overwrite it
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = set(NEED_COLUMNS) - set(reader.fieldnames or [])
            if missing:
                raise InputError(
                    f,
                    None,
                    f"missing columns: {', '.join(sorted(missing))}",
                    "use the CSV layout",
                )
            out = [_measurement(r, i, f) for i, r in enumerate(reader, start=1)]
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(
            f, None, f"not a UTF-8 CSV file ({type(e).__name__})", "give the measurements CSV"
        ) from None
    if not out:
        raise InputError(f, None, "no measurement rows (only a header)", "add measured rows")
    return out


def predict(meas: Measurement, gpu: GPUProfile, model=None) -> float:
    """Predicted output tokens/s for one measurement on `gpu` (with its efficiency factors)."""
    if model is None:
        model = profiles.model(meas.model)
    model = arch.with_kv_dtype(model, meas.kv_dtype)
    inst = Instance(model, gpu, meas.n_gpus, tp=meas.tp, ep=1, dtype=meas.dtype)
    inst.require_fit()
    return offline_throughput(inst, meas.isl, meas.osl, meas.engine).output_tokens_per_s


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
        f"fitted by pdd-plan calibrate to {csv_name} rows {rows} ({res.gpu}, offline output "
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
