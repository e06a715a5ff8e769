"""How a serving engine schedules one aggregated instance under online load (the data:
data/profiles/runtime/engines.yaml, read by perf/engine_limits.py), resolved for an instance:
its running-request limit (the engine's, and what the KV pool holds of live contexts) and its
tokens per step."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pdd_plan.perf.engine_limits import Schedule, engine_names, engines, resolve

__all__ = ["ServeEngine", "engine_names", "serve_engine"]


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
    # separate: decode steps between the scheduler's polls for new requests (SGLang's
    # --scheduler-recv-interval); the arrivals in between share one prefill pass
    recv_interval: int = 1
    # host seconds per launch of a step with prompt tokens (0: such steps replay CUDA graphs)
    eager_launch_s: float = 0.0

    def with_limits(
        self,
        max_running: int | None = None,
        step_tokens: int | None = None,
        recv_interval: int | None = None,
        prefill_graphs: bool | None = None,
    ) -> ServeEngine:
        """The engine with its launch flags given (--max-running-requests, the token budget,
        --scheduler-recv-interval, prefill CUDA graphs on or off)."""
        eager = self.eager_launch_s
        if prefill_graphs is not None:
            eager = 0.0 if prefill_graphs else engines().eager.per_launch_us * 1e-6
        return replace(
            self,
            max_running=max_running if max_running is not None else self.max_running,
            step_tokens=step_tokens if step_tokens is not None else self.step_tokens,
            recv_interval=recv_interval if recv_interval is not None else self.recv_interval,
            eager_launch_s=eager,
        )


def serve_engine(name: str, hbm_gb: float, flag: str = "--engine") -> ServeEngine:
    """The scheduler of engine `name` (or one of its aliases) on a GPU with `hbm_gb` of
    memory."""
    data = engines()
    key = resolve(name, flag)
    spec = data.engines[key]
    tokens = spec.token_budget(hbm_gb)
    if spec.schedule == "separate":
        tokens = min(tokens, spec.max_prefill_tokens or tokens)
    return ServeEngine(
        name=key,
        schedule=spec.schedule,
        max_running=spec.max_running_requests,
        step_tokens=int(tokens),
        host_per_token_s=data.host.per_token_us * 1e-6,
        source=spec.source,
        recv_interval=spec.recv_interval,
        eager_launch_s=data.eager.per_launch_us * 1e-6 if spec.eager_prompt_steps else 0.0,
    )
