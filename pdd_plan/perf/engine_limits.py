"""A serving engine's limits on a decode instance's running batch.

    batch = min(KV pool / KV of one request's live context, rounded up to whole pages,
                running-request limit, CUDA-graph maximum batch, token budget per iteration)

per attention-DP rank where the engine schedules per rank (the caps x dp). The defaults are
the deployed engine's (data/profiles/runtime/engines.yaml, each with its source); an
instance's `max_running` (a scenario's limit, or `perf --batch`) is the engine's configured
limit and replaces the running-request and CUDA-graph caps.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from pydantic import Field, PositiveInt

from pdd_plan.inputs.profiles import data_dir
from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.io import load


class EngineDefaults(Strict):
    kv_admission: Literal["live", "reserve"]
    page_tokens: PositiveInt
    max_running_requests: PositiveInt | None = None
    cuda_graph_max_batch: PositiveInt | None = None
    cuda_graph_max_batch_small_tp: PositiveInt | None = None
    small_gpu_gb: float = Field(default=0.0, ge=0)
    max_num_tokens: PositiveInt
    source: str


class EnginesFile(Strict):
    default: str
    engines: dict[str, EngineDefaults]


@lru_cache(maxsize=1)
def engines() -> EnginesFile:
    """The bundled engine limits (data/profiles/runtime/engines.yaml)."""
    return load(EnginesFile, str(data_dir() / "profiles" / "runtime" / "engines.yaml"))


def defaults(engine: str | None = None) -> EngineDefaults:
    f = engines()
    return f.engines[engine or f.default]


def pages(tokens: float, page_tokens: int) -> float:
    """Tokens held in whole pages."""
    return math.ceil(max(tokens, 0.0) / page_tokens) * page_tokens


def graph_cap(inst, eng: EngineDefaults) -> int | None:
    """The CUDA-graph maximum batch of one scheduler (per DP rank)."""
    if eng.cuda_graph_max_batch is None:
        return None
    small = inst.tp // inst.dp < 4 and inst.gpu.memory.hbm_gb < eng.small_gpu_gb
    if small and eng.cuda_graph_max_batch_small_tp is not None:
        return eng.cuda_graph_max_batch_small_tp
    return eng.cuda_graph_max_batch


def engine_caps(inst, engine: str | None = None) -> dict[str, float]:
    """The engine's caps on the running batch of `inst` (whole instance), by name; an
    instance's max_running replaces the running-request and CUDA-graph ones."""
    if inst.max_running is not None:
        return {"configured_max_running": float(inst.max_running)}
    eng = defaults(engine)
    caps: dict[str, float] = {"token_budget": float(eng.max_num_tokens * inst.dp)}
    if eng.max_running_requests is not None:
        caps["running_requests"] = float(eng.max_running_requests * inst.dp)
    g = graph_cap(inst, eng)
    if g is not None:
        caps["cuda_graph"] = float(g * inst.dp)
    return caps
