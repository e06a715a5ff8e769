"""How a serving engine schedules one aggregated instance under online load (the data:
data/profiles/runtime/serving-engines.yaml), resolved for an instance: its running-request
limit (the engine's, and what the KV pool holds of live contexts) and its tokens per step."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveInt

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.profiles import data_dir
from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.io import load

Schedule = Literal["separate", "mixed"]
# engine names users give -> the profile entry (TensorRT-LLM under either of its names)
ALIASES = {"trtllm-bench": "trtllm", "tensorrt-llm": "trtllm", "trtllm-serve": "trtllm"}


class EngineSpec(Strict):
    schedule: Schedule
    max_running_requests: PositiveInt | None = None
    # [[upper bound of HBM GB, tokens], ...]: the first row whose bound exceeds the GPU's
    chunk_by_hbm_gb: list[tuple[float, PositiveInt]] | None = None
    token_budget_by_hbm_gb: list[tuple[float, PositiveInt]] | None = None
    max_prefill_tokens: PositiveInt | None = None
    source: str


class HostCost(Strict):
    per_token_us: NonNegativeFloat
    source: str


class ServingEngines(Strict):
    name: str
    engines: dict[str, EngineSpec] = Field(min_length=1)
    host: HostCost


@lru_cache(maxsize=1)
def serving_engines() -> ServingEngines:
    return load(ServingEngines, str(data_dir() / "profiles" / "runtime" / "serving-engines.yaml"))


def engine_names() -> list[str]:
    return sorted(serving_engines().engines)


def _by_hbm(table: list[tuple[float, int]] | None, hbm_gb: float) -> int | None:
    if not table:
        return None
    for bound, tokens in table:
        if hbm_gb < bound:
            return int(tokens)
    return int(table[-1][1])


@dataclass(frozen=True)
class ServeEngine:
    """One engine's scheduler on one GPU type: `separate` runs prefill batches apart from
    decode batches (the decodes wait); `mixed` puts prompt chunks in the decode steps."""

    name: str
    schedule: Schedule
    max_running: int | None  # the engine's running-request limit (None: KV only)
    step_tokens: int  # separate: tokens of one prefill batch; mixed: tokens per step
    host_per_token_s: float  # host work per streamed token (overlapped with the GPU)
    source: str

    def with_limits(
        self, max_running: int | None = None, step_tokens: int | None = None
    ) -> ServeEngine:
        """The engine with its launch flags given (--max-running-requests, the token budget)."""
        return replace(
            self,
            max_running=max_running if max_running is not None else self.max_running,
            step_tokens=step_tokens if step_tokens is not None else self.step_tokens,
        )


def serve_engine(name: str, hbm_gb: float, flag: str = "--engine") -> ServeEngine:
    """The scheduler of engine `name` on a GPU with `hbm_gb` of memory."""
    data = serving_engines()
    key = ALIASES.get(name, name)
    spec = data.engines.get(key)
    if spec is None:
        raise InputError(
            None, flag, f"unknown serving engine '{name}'", f"use {' | '.join(engine_names())}"
        )
    if spec.schedule == "separate":
        chunk = _by_hbm(spec.chunk_by_hbm_gb, hbm_gb) or 8192
        tokens = min(chunk, spec.max_prefill_tokens or chunk)
    else:
        tokens = _by_hbm(spec.token_budget_by_hbm_gb, hbm_gb) or 8192
    return ServeEngine(
        name=key,
        schedule=spec.schedule,
        max_running=spec.max_running_requests,
        step_tokens=int(tokens),
        host_per_token_s=data.host.per_token_us * 1e-6,
        source=spec.source,
    )
