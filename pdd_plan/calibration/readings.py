"""How each row of a measurements CSV is read: predicted, a serving check, or set aside.

A CSV may have a ``readings.yaml`` beside it (the bundled one does:
``data/calibration/readings.yaml``). Each entry says what the row measures in the perf model's
terms, in words (``reading``) and, for rows the model predicts, as the run that reproduces it
(instance, phase, lengths, batch, the GPUs the published figure covers). Rows whose figure is a
serving quantity (per-request speed, TTFT, throughput at an SLO or at production load) check
``simulate`` instead; rows with too little detail stay out. Without a readings file every row
is parsed from the CSV text, as before (TensorRT-LLM-style rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.io import load

Use = Literal["predict", "simulate", "out"]
# throughput: output tokens/s (prefill: prompt tokens/s); total_throughput: input + output
# tokens/s; request_latency_ms: one request's time in the engine (offline phase); tpot_ms: the
# mean time between one request's output tokens (offline: a closed loop at the engine's
# max_batch, other requests' prefills included; decode: one step); ttft_ms: one request's
# prefill alone (concurrency 1: no queue); user_tokens_per_s: 1000 / tpot_ms
Figure = Literal[
    "throughput", "total_throughput", "request_latency_ms", "tpot_ms", "ttft_ms",
    "user_tokens_per_s",
]  # fmt: skip
LATENCY_FIGURES = ("request_latency_ms", "tpot_ms", "ttft_ms")


class EngineLimits(Strict):
    max_batch: PositiveInt | None = None
    max_num_tokens: PositiveInt = 8192
    kv_free_fraction: float | None = Field(default=None, gt=0, le=1)


class SameRun(Strict):
    """The same run's figure at another prompt length (another record of one benchmark run)."""

    row: str  # where it is stated (a CSV row or the record it comes from)
    isl: PositiveInt
    value: float = Field(gt=0)


class Reading(Strict):
    use: Use
    reading: str
    gpu: str | None = None
    model: str | None = None
    n_gpus: PositiveInt | None = None
    tp: PositiveInt | None = None
    ep: PositiveInt = 1
    dp: PositiveInt = 1
    dtype: Literal["bf16", "fp8", "fp4"] | None = None
    expert_dtype: Literal["bf16", "fp8", "fp4"] | None = None
    kv_dtype: Literal["bf16", "fp8"] | None = None
    phase: Literal["offline", "prefill", "decode"] = "offline"
    isl: PositiveInt | None = None
    osl: int = Field(default=0, ge=0)
    batch: PositiveInt | None = None
    chunk: PositiveInt = 8192
    value_gpus: float | None = Field(default=None, gt=0)
    engine: EngineLimits | None = None
    redundant_experts: int = Field(default=0, ge=0)
    two_batch_overlap: bool | None = None
    single_batch_overlap: bool = False
    expert_load: float | None = Field(default=None, ge=1)
    # the figure times the forward pass's kernels alone (no serving engine: no scheduler or
    # sampling between passes), so it is predicted without the step overhead
    kernels_only: bool = False
    cached: int = Field(default=0, ge=0)  # prefill: tokens already in the KV cache (an extend)
    figure: Figure = "throughput"
    # ttft_ms: prompt lengths spread uniformly over [lo, hi] (isl their mean): the figure is the
    # mean of the requests' TTFTs, which is convex in the length (attention is quadratic), so it
    # exceeds the TTFT of the mean length
    isl_range: tuple[PositiveInt, PositiveInt] | None = None
    # ttft_ms: the figure less `less`'s (the same run at another prompt length): the difference
    # is the prefill of the extra tokens, without the per-request part both carry (HTTP,
    # tokenizer, scheduling), which the perf model does not predict
    less: SameRun | None = None
    # the serving engine that ran it, where the source cell does not say (measurements.py)
    framework: Literal["tensorrt-llm", "sglang", "vllm", "atom"] | None = None

    @model_validator(mode="after")
    def _kernels_are_one_pass(self) -> Reading:
        if self.kernels_only and self.phase == "offline":
            raise ValueError("kernels_only times one pass: give phase prefill or decode")
        if self.cached and self.phase != "prefill":
            raise ValueError("cached (tokens already in the cache) is for phase prefill")
        if self.figure == "request_latency_ms" and self.phase != "offline":
            raise ValueError("request_latency_ms is an offline run's request latency")
        if self.figure == "ttft_ms" and self.phase != "prefill":
            raise ValueError("ttft_ms is one request's prefill: give phase prefill")
        if (self.isl_range or self.less) and self.figure != "ttft_ms":
            raise ValueError("isl_range and less are for a ttft_ms figure")
        if self.isl_range and self.less:
            raise ValueError("give isl_range or less, not both")
        lo_hi = self.isl_range
        if lo_hi and not (lo_hi[0] <= (self.isl or 0) <= lo_hi[1]):
            raise ValueError("isl_range [lo, hi] must hold isl (their mean)")
        if self.less and self.less.isl >= (self.isl or 0):
            raise ValueError("less: the other record's prompt must be shorter than isl")
        per_request = ("tpot_ms", "user_tokens_per_s")
        if self.figure in per_request and self.phase == "prefill":
            raise ValueError(f"{self.figure} is a decode figure: give phase offline or decode")
        return self

    @property
    def explicit(self) -> bool:
        """Whether the row's run is given here (else it is parsed from the CSV text)."""
        return self.gpu is not None


class Readings(Strict):
    csv: str
    date: str
    documents: dict[str, str]  # document key -> text that identifies it in `source`
    rows: dict[int, Reading]


def readings_path(csv_path: str | Path) -> Path:
    return Path(csv_path).with_name("readings.yaml")


def load_readings(csv_path: str | Path) -> Readings | None:
    """The readings beside a measurements CSV, or None when there are none."""
    p = readings_path(csv_path)
    if not p.is_file():
        return None
    return load(Readings, str(p))


def document_of(source: str, readings: Readings | None) -> str:
    """The document (leave-one-source-out group) a row's `source` cell belongs to."""
    if readings is not None:
        for key, text in readings.documents.items():
            if text in source:
                return key
    return source.split(" ")[1] if source.startswith("github ") else source
