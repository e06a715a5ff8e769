"""Measurement rows: the calibration CSV (and the readings beside it) parsed into typed rows,
every bad cell a one-line error naming its row and column."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from pdd_plan.calibration.readings import (
    LATENCY_FIGURES,
    Reading,
    Readings,
    document_of,
    load_readings,
)
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import require_file
from pdd_plan.inputs import profiles
from pdd_plan.perf.offline import ENGINES, TRTLLM_BENCH, Engine

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
# The serving engine a row's figure was measured with, from its source cell (first match):
# the accuracy tables are split by it. MLPerf's bundled submissions are NVIDIA's TensorRT-LLM
# harness; lm-sys posts are SGLang's; a reading may say otherwise (InferenceX rows).
FRAMEWORK_OF_SOURCE = {
    "TensorRT-LLM": "tensorrt-llm",
    "mlcommons": "tensorrt-llm",
    "lm-sys": "sglang",
    "vllm-project": "vllm",
}
# An engine's ROCm build is an engine of its own: SGLang on AMD GPUs runs from its ROCm images
# (lmsysorg/sglang:*-rocm*, the rows' stated image or ROCm version) with other attention and
# MoE kernels (aiter), HIP graphs and RCCL, so its per-step overhead is fitted apart from the
# CUDA build's (calibration/joint.py: one offset per engine, shared by every GPU it ran on)
ROCM_BUILDS = {"sglang": "sglang-rocm"}


def engine_build(engine: str, gpu: str) -> str:
    """The build of `engine` that runs on `gpu`: its ROCm build on an AMD GPU."""
    if engine in ROCM_BUILDS and profiles.gpu(gpu).display_name.startswith("AMD"):
        return ROCM_BUILDS[engine]
    return engine


# The regimes the accuracy and the error band are reported for (Measurement.regime): the
# bounds are where serving practice splits them (batch 1-4: interactive / relay decode, whose
# step is mostly fixed cost; up to 128: the concurrency sweeps of serving benchmarks; beyond:
# KV- or engine-bound max-throughput runs); a prompt of 16K tokens or more is long context.
REGIMES = ("small_batch_decode", "moderate_concurrency", "max_throughput", "long_context_prefill")
SMALL_BATCH, MODERATE_BATCH, LONG_CONTEXT = 4, 128, 16384


def regime_of(phase: str, concurrency: int | None, isl: float, prefill_led: bool) -> str:
    """The regime of a run (REGIMES): a prefill-led run of a LONG_CONTEXT prompt, a decode of
    at most SMALL_BATCH requests, one of at most MODERATE_BATCH, else max throughput."""
    if isl >= LONG_CONTEXT and prefill_led:
        return "long_context_prefill"
    if phase != "prefill" and concurrency is not None and concurrency <= SMALL_BATCH:
        return "small_batch_decode"
    if phase != "prefill" and concurrency is not None and concurrency <= MODERATE_BATCH:
        return "moderate_concurrency"
    return "max_throughput"


def framework_of(source: str) -> str:
    """The engine named by a source cell ('unknown' when none is)."""
    return next((f for k, f in FRAMEWORK_OF_SOURCE.items() if k in source), "unknown")


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
    single_batch_overlap: bool = False
    expert_load: float | None = None
    kernels_only: bool = False  # a kernel timing: predicted without the step overhead
    cached: int = 0  # prefill on top of this many cached tokens (an extend)
    figure: str = "throughput"  # readings.Figure
    isl_range: tuple[int, int] | None = None  # ttft_ms: lengths uniform over it (readings.py)
    less_isl: int | None = None  # ttft_ms: value is the figure less the same run's at less_isl
    framework: str = ""  # the serving engine (tensorrt-llm, sglang, vllm, atom); "" = the source's
    document: str = ""  # leave-one-source-out group
    reading: str = ""

    @property
    def label(self) -> str:
        par = f"tp{self.tp}" + (f" ep{self.ep}" if self.ep > 1 else "")
        return f"{self.gpu} {self.model} {par} {self.dtype} {self.phase} {self.isl}/{self.osl}"

    @property
    def engine_name(self) -> str:
        """The serving engine (its build for the row's GPU) that measured the row (the
        reading's, else the source's)."""
        return engine_build(self.framework or framework_of(self.source), self.gpu)

    @property
    def is_latency(self) -> bool:
        """A latency figure: lower is better, its error is measured / predicted - 1."""
        return self.figure in LATENCY_FIGURES

    def error(self, predicted: float) -> float:
        """Signed relative error, + meaning optimistic: predicted / measured - 1 for a
        throughput, measured / predicted - 1 for a latency."""
        if self.is_latency:
            return self.value / predicted - 1.0
        return predicted / self.value - 1.0

    @property
    def concurrency(self) -> int | None:
        """Requests on the instance when the row states them (a batch, or a closed loop's
        running-request cap); None: as many as the engine and the KV pool admit."""
        if self.batch is not None:
            return self.batch
        if self.engine.limits == "fixed" and self.engine.max_batch is not None:
            return self.engine.max_batch
        return None

    @property
    def regime(self) -> str:
        """Where the row's figure sits (REGIMES): a prefill of at least LONG_CONTEXT tokens (or a
        run they dominate), a decode of at most SMALL_BATCH requests, one of at most
        MODERATE_BATCH, else a max-throughput run (KV- or engine-bound batches)."""
        prefill_led = self.phase == "prefill" or self.figure in ("throughput", "total_throughput")
        return regime_of(self.phase, self.concurrency, self.isl, prefill_led)

    @cached_property
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


def _lookup(table: dict[str, Any], text: str, file: str, field: str, row: int):
    for key, val in table.items():
        if text.startswith(key) or key in text:
            return val
    raise InputError(
        file,
        f"row {row} {field}",
        f"unknown {field} '{text}'",
        f"known: {', '.join(table)}",
    )


NEED_COLUMNS: tuple[str, ...] = (
    "source",
    "hardware",
    "n_gpus",
    "model",
    "precision",
    "parallelism",
)
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
    """The rows of a measurements CSV the perf model predicts (see `read_rows`)."""
    return read_rows(path)[0]


def _engine(r: Reading, base: Engine, source: str) -> Engine:
    if r.engine is None:
        return base
    e = r.engine
    trt = (r.framework or framework_of(source)) == "tensorrt-llm"
    return Engine(
        name=f"{base.name} (row limits)",
        limits="fixed",
        max_batch=e.max_batch,
        max_num_tokens=e.max_num_tokens,
        kv_free_fraction=e.kv_free_fraction,
        source="data/calibration/readings.yaml (the measurement's stated engine limits)",
        kv_admission="reserve" if trt else "live",
    )


def _from_reading(i: int, r: dict, rd: Reading, base: Engine, doc: str, f: str) -> Measurement:
    n = rd.n_gpus or 1
    value = _number(r["value"], f, "value", i) - (rd.less.value if rd.less else 0.0)
    if value <= 0:
        raise InputError(
            f, f"row {i}", "the value is not above the reading's less.value", "check the reading"
        )
    return Measurement(
        row=i,
        source=r["source"],
        gpu=cast(str, rd.gpu),  # a predicted row's reading names them (readings.yaml)
        n_gpus=n,
        tp=rd.tp or n,
        model=cast(str, rd.model),
        dtype=cast(str, rd.dtype),
        kv_dtype=rd.kv_dtype,
        isl=rd.isl or 0,
        osl=rd.osl,
        value=value,
        engine=_engine(rd, base, r["source"]),
        phase=rd.phase,
        ep=rd.ep,
        dp=rd.dp,
        batch=rd.batch,
        chunk=rd.chunk,
        value_gpus=rd.value_gpus,
        expert_dtype=rd.expert_dtype,
        redundant_experts=rd.redundant_experts,
        two_batch_overlap=rd.two_batch_overlap,
        single_batch_overlap=rd.single_batch_overlap,
        expert_load=rd.expert_load,
        kernels_only=rd.kernels_only,
        cached=rd.cached,
        figure=rd.figure,
        isl_range=rd.isl_range,
        less_isl=rd.less.isl if rd.less else None,
        framework=rd.framework or "",
        document=doc,
        reading=rd.reading,
    )


def _from_text(i: int, r: dict, f: str, engine: Engine, doc: str) -> Measurement:
    return replace(_measurement(r, i, f), engine=engine, document=doc)


def _csv_rows(p: Path) -> list[dict]:
    f = str(p)
    require_file(p, "give the measurements CSV path")  # noted: no output may overwrite it
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
            rows = list(reader)
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(
            f, None, f"not a UTF-8 CSV file ({type(e).__name__})", "give the measurements CSV"
        ) from None
    if not rows:
        raise InputError(f, None, "no measurement rows (only a header)", "add measured rows")
    return rows


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
            out.append(_from_reading(i, r, rd, engine, doc, f))
        else:
            m = _from_text(i, r, f, engine, doc)
            out.append(m if rd is None else replace(m, reading=rd.reading))
    return out, aside
