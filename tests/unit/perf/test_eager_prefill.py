"""The host's launching of an eager prefill pass (engines.yaml eager, perf/serve_step.py):
launches counted by hand, the floor against the source's own figure, and where it binds."""

from __future__ import annotations

import pytest

from pdd_plan.inputs import profiles
from pdd_plan.perf import fixed_cost
from pdd_plan.perf.engine_limits import engines
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.perf.serve_step import StepCost

pytestmark = pytest.mark.unit

SOURCE_PASS_MS = 82.6406478881836  # sglang PR 12160: one new token, DeepSeek-V3, eager


def _ds(ep: int = 1, dp: int = 1) -> Instance:
    return Instance(
        profiles.model("deepseek-v3"), profiles.gpu("h200"), 8, tp=8, ep=ep, dp=dp, dtype="fp8"
    )


def test_launches_are_kernels_and_calls_counted_by_hand():
    # DeepSeek-V3 FP8: 61 layers, 3 dense. Per layer: latent attention 11 + its 3 quant
    # kernels; per dense layer FFN 4 + 2 quant; per MoE layer routed 8 + shared 3 + 2 + 2
    # quant; 4 per pass. TP8: 2 all-reduce calls a layer.
    kernels = 61 * (11 + 3) + 3 * (4 + 2) + 58 * (8 + 3 + 2 + 2) + 4
    assert fixed_cost.kernels_per_pass(_ds()) == kernels == 1746
    assert fixed_cost.launches_per_pass(_ds()) == kernels + 2 * 61
    # attention DP with expert parallelism: no all-reduce (attention TP 1), a dispatch and a
    # combine per MoE layer instead; EP under TP attention keeps the all-reduces and makes no
    # all-to-all (comm.a2a_bytes, moe_terms.deepep_fixed_seconds)
    assert fixed_cost.launches_per_pass(_ds(ep=8, dp=8)) == kernels + 2 * 58
    assert fixed_cost.launches_per_pass(_ds(ep=8)) == kernels + 2 * 61


def test_per_launch_cost_reproduces_its_source_pass():
    # the file's per-launch figure is the source's pass over DeepSeek-V3's launches: a
    # one-token prompt step under SGLang takes the source's 82.6 ms (to the figure's rounding)
    per = engines().eager.per_launch_us
    assert per == pytest.approx(SOURCE_PASS_MS * 1e3 / 1868, abs=0.05)
    step = StepCost(_ds(), serve_engine("sglang", 141)).time(seqs=1, new=1, cached=1)
    assert step * 1e3 == pytest.approx(SOURCE_PASS_MS, rel=2e-3)


def test_floor_binds_short_prompts_only_and_never_a_decode_step():
    inst = _ds()
    eager = StepCost(inst, serve_engine("sglang", 141))
    graphs = StepCost(inst, serve_engine("sglang", 141).with_limits(prefill_graphs=True))
    floor = eager.eager_pass_s
    assert graphs.eager_pass_s == 0.0
    # a decode step replays its CUDA graph: the same with or without the floor
    assert eager.decode(32, 2048) == graphs.decode(32, 2048) < floor
    # a short prompt step is the host's; a long one the GPU's (the floor then changes nothing)
    assert eager.time(seqs=1, new=64) == pytest.approx(floor)
    assert graphs.time(seqs=1, new=64) < floor
    long = graphs.time(seqs=4, new=8192)
    assert long > floor and eager.time(seqs=4, new=8192) == long
    # a mixed step with a prompt chunk is eager too (TensorRT-LLM); vLLM's steps are graphed
    trt = StepCost(inst, serve_engine("trtllm", 141))
    assert trt.time(decode=16, context=2048, seqs=1, new=64) >= floor
    assert StepCost(inst, serve_engine("vllm", 141)).eager_pass_s == 0.0


def test_launch_flag_turns_the_floor_off_and_back_on():
    eng = serve_engine("trtllm", 141)
    assert eng.eager_launch_s > 0
    off = eng.with_limits(prefill_graphs=True)
    assert off.eager_launch_s == 0.0
    assert off.with_limits(prefill_graphs=False).eager_launch_s == eng.eager_launch_s
    assert off.with_limits(max_running=8).eager_launch_s == 0.0  # other flags keep it
