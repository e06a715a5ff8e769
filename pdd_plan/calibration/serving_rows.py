"""The serving rows of the calibration CSV (data/calibration/serving_rows.yaml) as serving
measurements, read through the serve phase (calibration/serving_runs.py)."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import Field, PositiveFloat, PositiveInt

from pdd_plan.calibration.serving_runs import ServingMeasurement
from pdd_plan.inputs.profiles import data_dir
from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.io import load
from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.offline import ENGINES

ServeFigure = Literal["throughput", "total_throughput", "input_throughput", "tpot_ms", "ttft_ms"]
# engines the rows name that are scheduled as another (engines.yaml has no entry)
SCHEDULED_AS = {"atom": "sglang"}
# the accuracy tables' engine names (measurements.FRAMEWORK_OF_SOURCE)
FRAMEWORK = {"trtllm": "tensorrt-llm"}


class ServingRow(Strict):
    gpu: str
    model: str
    n_gpus: PositiveInt
    tp: PositiveInt
    ep: PositiveInt = 1
    dp: PositiveInt = 1
    dtype: Literal["bf16", "fp8", "fp4"] | None = None
    expert_dtype: Literal["bf16", "fp8", "fp4"] | None = None
    kv_dtype: Literal["bf16", "fp8"] | None = None
    isl: PositiveInt
    osl: PositiveInt
    concurrency: PositiveInt | None = None
    rate: PositiveFloat | None = None
    num_prompts: PositiveInt | None = None
    range_ratio: float | None = Field(default=None, ge=0, le=1)
    engine: str
    version: str | None = None
    recv_interval: PositiveInt | None = None  # the launch's --scheduler-recv-interval (SGLang)
    # the launch's tokens in one prefill batch (SGLang: the smaller of --chunked-prefill-size
    # and --max-prefill-tokens); absent: the engine's default (engines.yaml)
    prefill_tokens: PositiveInt | None = None
    # the launch turns prefill CUDA graphs on (TensorRT-LLM's piecewise graphs, SGLang's
    # --enable-piecewise-cuda-graph); absent: the engine's default (engines.yaml)
    prefill_graphs: bool | None = None
    figure: ServeFigure
    value: PositiveFloat
    value_gpus: PositiveFloat | None = None
    document: str


class ServingRows(Strict):
    date: str
    documents: dict[str, str]
    set_aside: dict[int, str] = {}
    noted_ttft_ms: dict[int, PositiveFloat] = {}  # evidence only: a row's record's TTFT
    rows: dict[int, ServingRow]


def load_serving_rows() -> ServingRows:
    return load(ServingRows, str(data_dir() / "calibration" / "serving_rows.yaml"))


def _mean(n: int, ratio: float | None) -> float:
    return sl.drawn(n, ratio, "sglang", "range_ratio").mean


def measurement(row: int, r: ServingRow, documents: dict[str, str]) -> ServingMeasurement:
    """One serving row as a measurement: lengths the mean its client draws, num_prompts ten per
    slot where the row does not state it (the file's assumption)."""
    n = r.num_prompts or (10 * r.concurrency if r.concurrency else None)
    return ServingMeasurement(
        row=row,
        source=documents.get(r.document, r.document),
        gpu=r.gpu,
        n_gpus=r.n_gpus,
        tp=r.tp,
        model=r.model,
        dtype=cast(str, r.dtype),
        kv_dtype=r.kv_dtype,
        isl=_mean(r.isl, r.range_ratio),  # type: ignore[arg-type]  # a mean length, fractional
        osl=_mean(r.osl, r.range_ratio),  # type: ignore[arg-type]
        value=r.value,
        engine=ENGINES["sglang"],  # unused: a serving row runs through the serve phase
        phase="serve",
        ep=r.ep,
        dp=r.dp,
        value_gpus=r.value_gpus,
        expert_dtype=r.expert_dtype,
        figure=r.figure,
        framework=FRAMEWORK.get(r.engine, r.engine),
        document=r.document,
        reading=f"{r.engine} {r.version or ''} serving run".strip(),
        concurrency=r.concurrency,
        rate=r.rate,
        num_prompts=n,
        range_ratio=r.range_ratio,
        serve_engine=SCHEDULED_AS.get(r.engine, r.engine),
        engine_version=r.version,
        recv_interval=r.recv_interval,
        step_tokens=r.prefill_tokens,
        prefill_graphs=r.prefill_graphs,
    )


def serving_measurements() -> list[ServingMeasurement]:
    data = load_serving_rows()
    return [measurement(k, r, data.documents) for k, r in sorted(data.rows.items())]
