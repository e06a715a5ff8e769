"""The serving engines (data/profiles/runtime/engines.yaml, the one file and this its one
loader) and their limits on a decode instance's running batch.

    batch = min(KV pool / KV of one request's live context, rounded up to whole pages,
                running-request limit, CUDA-graph maximum batch, token budget per iteration)

per attention-DP rank where the engine schedules per rank (the caps x dp). The defaults are
the deployed engine's, each with its source; a scenario's `engine:` limits (an instance's
`limits`) replace them one by one, and an instance's `max_running` (`perf --batch`) is the
engine's configured limit and replaces the running-request and CUDA-graph caps.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveInt

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.profiles import data_dir
from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.engine import EngineLimits
from pdd_plan.inputs.schema.io import load

Schedule = Literal["separate", "mixed"]


class EngineDefaults(Strict):
    aliases: list[str] = []
    kv_admission: Literal["live", "reserve"]
    page_tokens: PositiveInt
    max_running_requests: PositiveInt | None = None
    cuda_graph_max_batch: PositiveInt | None = None
    cuda_graph_max_batch_small_tp: PositiveInt | None = None
    small_gpu_gb: float = Field(default=0.0, ge=0)
    schedule: Schedule
    # [[upper bound of HBM GB, tokens], ...]: the first row whose bound exceeds the GPU's
    token_budget_by_hbm_gb: list[tuple[float, PositiveInt]] = Field(min_length=1)
    max_prefill_tokens: PositiveInt | None = None
    recv_interval: PositiveInt = 1  # decode steps between the scheduler's polls for requests
    eager_prompt_steps: bool = False  # a step with prompt tokens runs without a CUDA graph
    source: str

    def token_budget(self, hbm_gb: float) -> int:
        """Tokens one iteration of one scheduler carries on a GPU with `hbm_gb` of memory."""
        for bound, tokens in self.token_budget_by_hbm_gb:
            if hbm_gb < bound:
                return int(tokens)
        return int(self.token_budget_by_hbm_gb[-1][1])


class HostCost(Strict):
    per_token_us: NonNegativeFloat
    source: str


class EagerCost(Strict):
    per_launch_us: NonNegativeFloat
    source: str


class EnginesFile(Strict):
    name: str
    default: str
    engines: dict[str, EngineDefaults] = Field(min_length=1)
    host: HostCost
    eager: EagerCost


def load_engines(path: str) -> EnginesFile:
    """An engines file (a bad field: a one-line error naming it)."""
    return load(EnginesFile, path)


@lru_cache(maxsize=1)
def engines() -> EnginesFile:
    """The bundled engines (data/profiles/runtime/engines.yaml)."""
    return load_engines(str(data_dir() / "profiles" / "runtime" / "engines.yaml"))


def engine_names() -> list[str]:
    return sorted(engines().engines)


def resolve(name: str | None, flag: str = "--engine") -> str:
    """The engine entry `name` is (an alias, such as trtllm-bench, resolved); None: the
    default. An unknown name is a one-line error naming `flag`."""
    f = engines()
    if name is None:
        return f.default
    for key, e in f.engines.items():
        if name == key or name in e.aliases:
            return key
    raise InputError(
        None, flag, f"unknown serving engine '{name}'", f"use {' | '.join(engine_names())}"
    )


def defaults(engine: str | None = None) -> EngineDefaults:
    return engines().engines[resolve(engine)]


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
    """The engine's caps on the running batch of `inst` (whole instance), by name: the
    defaults, each replaced by the instance's configured limit where it has one; an instance's
    max_running replaces the running-request and CUDA-graph ones."""
    if inst.max_running is not None:
        return {"configured_max_running": float(inst.max_running)}
    eng = defaults(engine)
    lim: EngineLimits | None = inst.limits  # None: no schema built (a replay's hot path)
    tokens = (lim and lim.max_num_tokens) or eng.token_budget(inst.gpu.memory.hbm_gb)
    caps: dict[str, float] = {"token_budget": float(tokens * inst.dp)}
    if lim is not None and lim.max_running_requests is not None:  # the instance's (SGLang's)
        caps["running_requests"] = float(lim.max_running_requests)
    elif eng.max_running_requests is not None:
        caps["running_requests"] = float(eng.max_running_requests * inst.dp)
    g = (lim and lim.cuda_graph_max_batch) or graph_cap(inst, eng)
    if g is not None:
        caps["cuda_graph"] = float(g * inst.dp)
    return caps
