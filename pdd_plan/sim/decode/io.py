"""What the decode replay takes and gives: an instance's engine, the inputs dataclass and the
per-request result (the event loop lives in ``decode``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdd_plan.sim.timings import ExtendTable, StepTable


@dataclass(frozen=True)
class Engine:
    """One decode instance: step table, batch cap and KV pool (bytes)."""

    steps: StepTable
    bmax: int
    kv_pool_bytes: float


@dataclass(frozen=True)
class DecodeInputs:
    """Everything decode replays. Per request: ``route``; ``t_md`` KV at MD (p_md, p_rld_md);
    ``t_rld`` KV at RLD; ``output_tokens``; ``step_ctx`` its mean context in a decode step;
    ``ext_ctx`` the context MD extends on; ``kv_md`` / ``kv_rld`` KV reserved on MD / RLD.
    ``ids_latency_s``: one-way line latency of the handoff's token-id message (RLD -> MD)."""

    route: np.ndarray
    t_md: np.ndarray
    t_rld: np.ndarray
    output_tokens: np.ndarray
    step_ctx: np.ndarray
    ext_ctx: np.ndarray
    kv_md: np.ndarray
    kv_rld: np.ndarray
    md: list[Engine]
    rld: list[Engine] = field(default_factory=list)
    extend: ExtendTable | None = None
    relay_cap: int = 1
    one_shot: bool = False
    ids_latency_s: float = 0.0


@dataclass(frozen=True)
class DecodeResult:
    first_s: np.ndarray  # first output token
    end_s: np.ndarray  # last output token
    rld_tokens: np.ndarray  # tokens decoded on relay decode
    md_arrive_s: np.ndarray  # request reached MD (KV delivered, or extend done)
    md_admit_s: np.ndarray  # joined an MD batch
    md_instance: np.ndarray  # -1: never on MD
    mean_batch: list[float]  # per instance (MD first, then RLD), time-average batch
    span_s: float
