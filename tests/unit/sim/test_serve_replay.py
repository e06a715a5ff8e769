"""`perf --phase serve` (analytic) against the step-level replay of the same closed loop, on
hand-written instances: a grid of concurrency, lengths and two engines (one with prefill
batches apart from the decodes, one that mixes them). The bar: output throughput and mean
TPOT within 10 %, P90 TTFT within 15 %."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.inputs import profiles
from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.sim.serve_replay import replay

INSTANCES = {
    "dense": ("llama-3.1-8b", "h100", 1),
    "moe": ("qwen3-30b-a3b", "h200", 1),
}


def _inst(kind: str) -> Instance:
    m, g, n = INSTANCES[kind]
    return Instance(profiles.model(m), profiles.gpu(g), n, tp=n, ep=1)


@pytest.mark.unit
def test_replay_conserves_tokens_and_littles_law():
    """Every request finishes with exactly its drawn tokens; at concurrency 1 requests never
    overlap, so the mean in flight is 1 (sum of latencies = duration)."""
    inst = _inst("dense")
    eng = serve_engine("vllm", 80)
    isl, osl = sl.sglang_random(512, 0.5), sl.sglang_random(64, 0.5)
    rep = replay(inst, eng, isl, osl, num_prompts=10, concurrency=1, seed=3)
    rng = np.random.default_rng(3)
    want_in, want_out = isl.sample(rng, 10), np.maximum(osl.sample(rng, 10), 1)
    assert rep.input_tokens == pytest.approx(want_in.sum())
    assert rep.output_tokens == pytest.approx(want_out.sum())
    assert rep.in_flight_mean == pytest.approx(1.0, rel=1e-9)
    assert len(rep.itl_s) == int((want_out - 1).sum())


@pytest.mark.unit
def test_replay_separate_schedule_stalls_decodes_for_prefill():
    """Under SGLang's schedule a prefill batch holds the running decodes back: the largest
    inter-token gap spans a prefill batch, so it exceeds the mixed schedule's."""
    inst = _inst("dense")
    isl, osl = sl.fixed(4000), sl.fixed(64)
    gaps = {}
    for name in ("sglang", "vllm"):
        eng = serve_engine(name, 80)
        rep = replay(inst, eng, isl, osl, num_prompts=24, concurrency=8, seed=1)
        gaps[name] = float(np.max(rep.itl_s))
    assert gaps["sglang"] > gaps["vllm"]
