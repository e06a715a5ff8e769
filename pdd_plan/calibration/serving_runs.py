"""Serving runs read as serving runs: a `bench_serving` / `vllm bench serve` result (or a
published serving row) predicted through `perf --phase serve`, not as an offline batch.

A serving measurement keeps what the client did: its concurrency (or arrival rate), the
requests it completed, the lengths it actually drew (the file's totals over completed
requests; the shape of the client's random generator around that mean where the file names
it, SGLang's `random_range_ratio`), the engine that served it (SGLang's `backend`; vLLM's
runs are vLLM) and its version where the file says (`--metadata version=...`). Its figure is
what the client reports: output tokens/s (or input + output), or mean TPOT / TTFT in ms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pdd_plan.calibration.measurements import Measurement
from pdd_plan.common.errors import InputError
from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve import Load, serve
from pdd_plan.perf.serve_engine import ServeEngine, serve_engine
from pdd_plan.perf.serve_step import StepCost

LATENCY_FIGURES = ("tpot_ms", "ttft_ms")
# the serving engine behind a bench_serving `backend` value (the client names the API it spoke)
BACKEND_ENGINES = {"sglang": "sglang", "sglang-oai": "sglang", "sglang-native": "sglang",
                   "sglang-oai-chat": "sglang", "vllm": "vllm", "vllm-chat": "vllm",
                   "trt": "trtllm", "openai": "vllm", "openai-chat": "vllm"}  # fmt: skip


@dataclass(frozen=True)
class ServingMeasurement(Measurement):
    """A measurement taken by a benchmark client against one aggregated instance."""

    concurrency: int | None = None  # closed loop (None: open loop at `rate`)
    rate: float | None = None
    num_prompts: int | None = None  # the run's requests (ramp-up and drain)
    range_ratio: float | None = None  # the client's --random-range-ratio (None: fixed)
    generator: str = "sglang"  # whose random generator drew the lengths
    serve_engine: str = "sglang"
    engine_version: str | None = None
    max_running: int | None = None  # the engine's running-request limit, where stated
    recv_interval: int | None = None  # SGLang's --scheduler-recv-interval, where stated
    step_tokens: int | None = None  # tokens of one prefill batch (or step), where stated
    prefill_graphs: bool | None = None  # prefill CUDA graphs on / off, where stated

    @property
    def is_latency(self) -> bool:
        return self.figure in LATENCY_FIGURES or self.figure == "request_latency_ms"

    @property
    def regime(self) -> str:
        return "serving"


def lengths_of(meas: ServingMeasurement) -> tuple[sl.Lengths, sl.Lengths]:
    """The lengths the client drew: its generator's shape around the means actually drawn
    (the file's totals). SGLang's stated length is the top of U[r L, L] (mean L (1 + r) / 2),
    vLLM's the centre of U[L (1 - r), L (1 + r)]."""
    out = []
    for mean in (float(meas.isl), float(meas.osl)):
        r = meas.range_ratio
        if r is None:
            out.append(sl.fixed(max(mean, 1.0)))
            continue
        stated = 2.0 * mean / (1.0 + r) if meas.generator == "sglang" else mean
        out.append(sl.drawn(max(int(round(stated)), 1), r, meas.generator, "range_ratio"))
    return out[0], out[1]


def engine_of(meas: ServingMeasurement, inst: Instance) -> ServeEngine:
    eng = serve_engine(meas.serve_engine, inst.gpu.memory.hbm_gb, "engine")
    return eng.with_limits(
        max_running=meas.max_running,
        step_tokens=meas.step_tokens,
        recv_interval=meas.recv_interval,
        prefill_graphs=meas.prefill_graphs,
    )


def predict_serving(meas: ServingMeasurement, inst: Instance) -> float:
    """The figure the client would report on `inst` (perf/serve.py), for the whole instance:
    tokens/s, or TPOT / TTFT in ms."""
    isl, osl = lengths_of(meas)
    eng = engine_of(meas, inst)
    load = Load(isl, osl, meas.concurrency, meas.rate, meas.num_prompts)
    r = serve(inst, eng, load, StepCost(inst, eng))
    if meas.figure == "tpot_ms":
        return r.tpot_s.mean * 1e3
    if meas.figure == "ttft_ms":
        return r.ttft_s.mean * 1e3
    if meas.figure == "total_throughput":
        return r.total_tokens_per_s
    if meas.figure == "input_throughput":
        return r.total_tokens_per_s - r.output_tokens_per_s
    return r.output_tokens_per_s


def _int_field(rec: dict, key: str, file: str) -> int | None:
    v = rec.get(key)
    if v is None:
        return None
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 1:
        raise InputError(file, key, f"must be a whole number >= 1 (got {v!r})"[:120], "fix it")
    return int(v)


def serving_fields(serving: dict, fmt: str, file: str) -> dict:
    """ServingMeasurement fields from a bench_serving / vllm bench serve record."""
    done = _int_field(serving, "completed", file) if serving.get("completed") else None
    conc = _int_field(serving, "max_concurrency", file)
    rate = serving.get("request_rate")
    rate_inf = (
        rate is None
        or (isinstance(rate, str) and rate.strip().lower() == "inf")
        or (isinstance(rate, float) and math.isinf(rate))
    )
    if conc is None and rate_inf:
        conc = done  # every request sent at t = 0: a closed loop as wide as the run
    ratio = serving.get("random_range_ratio") if serving.get("dataset_name") == "random" else None
    if ratio is not None and (
        isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1
    ):
        raise InputError(file, "random_range_ratio", f"must be in [0, 1] (got {ratio!r})", "fix it")
    backend = str(serving.get("backend") or "").lower()
    engine = "vllm" if fmt == "vllm-bench-serve" else BACKEND_ENGINES.get(backend, "sglang")
    if rate_inf and conc is None:
        raise InputError(file, "completed", "no concurrency and no completed count", "fix it")
    version = serving.get("version") or serving.get("engine_version")
    return {
        "concurrency": conc,
        "rate": None if conc is not None else float(rate),  # type: ignore[arg-type]
        "num_prompts": done,
        "range_ratio": None if ratio is None or ratio >= 1 else float(ratio),
        "generator": "sglang",
        "serve_engine": engine,
        "engine_version": None if version is None else str(version)[:40],
    }
