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
from pdd_plan.perf.serve import Load, serve
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.perf.serve_step import StepCost
from pdd_plan.sim.serve_replay import replay

INSTANCES = {
    "dense": ("llama-3.1-8b", "h100", 1),
    "moe": ("qwen3-30b-a3b", "h200", 1),
}
# (input, output, SGLang range ratio; None: fixed lengths)
LENGTHS = [(1024, 256, 0.8), (3000, 128, 0.8), (256, 256, None)]
CONCURRENCY = [1, 16, 48]


def _inst(kind: str) -> Instance:
    m, g, n = INSTANCES[kind]
    return Instance(profiles.model(m), profiles.gpu(g), n, tp=n, ep=1)


def _errors(kind: str, engine: str, lengths, c: int) -> tuple[float, float, float]:
    inst = _inst(kind)
    eng = serve_engine(engine, inst.gpu.memory.hbm_gb)
    cost = StepCost(inst, eng)
    i, o, r = lengths
    isl, osl = sl.drawn(i, r, "sglang"), sl.drawn(o, r, "sglang")
    n = max(6 * c, 12)
    rep = replay(inst, eng, isl, osl, num_prompts=n, concurrency=c, seed=7, cost=cost)
    ana = serve(inst, eng, Load(isl, osl, concurrency=c, num_prompts=n), cost=cost)
    return (
        ana.output_tokens_per_s / rep.output_tokens_per_s - 1.0,
        ana.tpot_s.mean / float(np.mean(rep.tpot_s)) - 1.0,
        ana.ttft_s.p90 / float(np.percentile(rep.ttft_s, 90)) - 1.0,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(INSTANCES))
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda x: f"{x[0]}-{x[1]}-{x[2]}")
@pytest.mark.parametrize("c", CONCURRENCY)
def test_serve_phase_agrees_with_the_replay(kind, engine, lengths, c):
    thr, tpot, ttft90 = _errors(kind, engine, lengths, c)
    assert abs(thr) <= 0.10, f"throughput {thr:+.1%}"
    assert abs(tpot) <= 0.10, f"TPOT {tpot:+.1%}"
    assert abs(ttft90) <= 0.15, f"P90 TTFT {ttft90:+.1%}"


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
