"""perf --phase serve: the length generators, the engines' limits, and the serving model
against hand arithmetic and its own identities."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.perf import roofline
from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve import Load, serve
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.perf.serve_step import StepCost

pytestmark = pytest.mark.unit


def _inst() -> Instance:
    return Instance(profiles.model("llama-3.1-8b"), profiles.gpu("h100"), 1, tp=1, ep=1)


def test_sglang_random_lengths_are_its_randint_range():
    # randint(max(int(1024 * 0.8), 1), 1024 + 1): 819..1024, mean (819 + 1024) / 2
    d = sl.sglang_random(1024, 0.8)
    assert (d.low, d.high) == (819, 1024)
    assert d.mean == pytest.approx(921.5)
    assert sl.drawn(1024, 1.0, "sglang").fixed  # ratio 1: every request 1024


def test_vllm_random_lengths_are_symmetric():
    d = sl.vllm_random(1000, 0.1)  # [int(900), int(1100)]
    assert (d.low, d.high, d.mean) == (900, 1100, pytest.approx(1000.0))


def test_histogram_normalises_and_refuses_bad_bins():
    d = sl.histogram([100, 300], [1, 3])
    assert d.mean == pytest.approx(250.0)
    with pytest.raises(InputError, match="weights sum to zero"):
        sl.histogram([100], [0])
    with pytest.raises(InputError):
        sl.sglang_random(1024, 1.5)


def test_engine_limits_follow_gpu_memory():
    assert serve_engine("vllm", 80).step_tokens == 8192  # >= 70 GiB
    assert serve_engine("vllm", 48).step_tokens == 2048
    assert serve_engine("vllm", 80).max_running == 1024
    assert serve_engine("sglang", 141).step_tokens == 8192  # below 160 GB
    assert serve_engine("sglang", 180).step_tokens == 16384  # B200
    assert serve_engine("trtllm-bench", 80).name == "trtllm"
    with pytest.raises(InputError, match="unknown serving engine"):
        serve_engine("tgi", 80)


def test_one_request_at_a_time_is_prefill_then_batch_one_decode():
    """Concurrency 1, fixed lengths: TTFT is the prompt's prefill pass, TPOT a batch-1 step at
    the request's mean decode context, and the run is N back-to-back requests."""
    inst, eng = _inst(), serve_engine("sglang", 80)
    r = serve(inst, eng, Load(sl.fixed(1000), sl.fixed(101), concurrency=1, num_prompts=5))
    pre = roofline.mixed_pass(inst, prefill_seqs=1, prefill_new=1000).total_s
    dec = roofline.mixed_pass(inst, decode_batch=1, decode_context=1050).total_s
    # tolerance: 1%: the decode context grows 1000 -> 1100 over the request; a batch-1 step is
    # linear in it, so the mean step is the step at the mean context to well under 1%
    assert r.ttft_s.mean == pytest.approx(pre, rel=0.01)
    assert r.tpot_s.mean == pytest.approx(dec, rel=0.01)
    latency = pre + 100 * dec
    assert r.output_tokens_per_s == pytest.approx(101 / latency, rel=0.01)
    assert r.in_flight_mean == pytest.approx(1.0, rel=0.01)


def test_more_concurrency_more_throughput_slower_tokens():
    inst, eng = _inst(), serve_engine("vllm", 80)
    cost = StepCost(inst, eng)
    isl, osl = sl.sglang_random(1024, 0.8), sl.sglang_random(1024, 0.8)
    res = [serve(inst, eng, Load(isl, osl, concurrency=c), cost=cost) for c in (1, 8, 64)]
    thr = [r.output_tokens_per_s for r in res]
    tpot = [r.tpot_s.mean for r in res]
    assert thr == sorted(thr) and tpot == sorted(tpot)
    # endless closed loop: Little's law, all C requests in flight
    assert res[-1].in_flight_mean == pytest.approx(64, rel=0.02)


def test_open_loop_below_capacity_serves_the_offered_rate():
    inst, eng = _inst(), serve_engine("sglang", 80)
    isl, osl = sl.fixed(512), sl.fixed(256)
    r = serve(inst, eng, Load(isl, osl, rate=2.0))
    assert not r.saturated
    assert r.output_tokens_per_s == pytest.approx(2.0 * 256)
    over = serve(inst, eng, Load(isl, osl, rate=1e4))
    assert over.saturated


def test_finite_run_is_never_faster_than_the_steady_state():
    """Ramp-up (C prompts at once) and drain (the batch emptying) cost throughput, or nothing
    where the engine's work is conserved (SGLang's prefill batches cost the same bunched)."""
    inst, eng = _inst(), serve_engine("sglang", 80)
    cost = StepCost(inst, eng)
    isl, osl = sl.sglang_random(2048, 0.8), sl.sglang_random(256, 0.8)
    endless = serve(inst, eng, Load(isl, osl, concurrency=32), cost=cost)
    short = serve(inst, eng, Load(isl, osl, concurrency=32, num_prompts=64), cost=cost)
    # tolerance: 1e-9: equal is allowed (conserved work: SGLang's bunched prefill batches cost the
    # same), the factor is float rounding
    assert short.output_tokens_per_s <= endless.output_tokens_per_s * (1 + 1e-9)
    # the first 32 prompts queue behind each other: the P99 TTFT is the burst's
    assert short.ttft_s.p99 > 5 * endless.ttft_s.p50
    assert np.isfinite(short.duration_s)


def test_host_cost_bounds_a_small_model_at_large_batch():
    inst, eng = _inst(), serve_engine("vllm", 80)
    cost = StepCost(inst, eng)
    assert cost.decode(2048, 64) >= 2048 * eng.host_per_token_s


def test_finite_open_loop_ends_at_its_last_completion():
    """A 100-prompt run at 2 requests/s, far below capacity, lasts at least its arrivals' span
    ((n - 1) / R = 49.5 s) and less than that plus the longest output decoding alone after it
    (plus one prompt); its throughput is then below the offered rate's; a run at an arrival rate
    past capacity leaves requests waiting at the last arrival and is flagged saturated."""
    inst, eng = _inst(), serve_engine("sglang", 80)
    cost = StepCost(inst, eng)
    isl, osl = sl.sglang_random(512, 0.0), sl.sglang_random(256, 0.0)
    r = serve(inst, eng, Load(isl, osl, rate=2.0, num_prompts=100), cost=cost)
    alone = 255 * cost.decode(1, 512) + cost.prefill_tokens(512, 512)
    assert 49.5 < r.duration_s < 49.5 + alone * 1.05
    assert r.output_tokens_per_s < 2.0 * osl.mean
    assert not r.saturated
    over = serve(inst, eng, Load(isl, osl, rate=1e4, num_prompts=2000), cost=cost)
    assert over.saturated
    assert over.ttft_s.mean > r.ttft_s.mean


def test_finite_open_loop_throughput_grows_with_the_rate():
    inst, eng = _inst(), serve_engine("vllm", 80)
    cost = StepCost(inst, eng)
    isl, osl = sl.sglang_random(1024, 0.8), sl.sglang_random(256, 0.8)
    thr = [serve(inst, eng, Load(isl, osl, rate=r, num_prompts=200), cost=cost).output_tokens_per_s
           for r in (1.0, 4.0, 16.0)]  # fmt: skip
    assert thr == sorted(thr)


def test_a_prompt_of_a_few_tokens_costs_a_step_not_nothing():
    """SGLang's range ratio 0 draws prompts from 1 token: a 3-token chunk is a real (short)
    pass, at least the cost of a 1-token one and at most a 16-token one's."""
    cost = StepCost(_inst(), serve_engine("sglang", 80))
    t3 = cost.time(seqs=1.0, new=3.0)
    assert 0.0 < cost.time(seqs=1.0, new=1.0) <= t3 <= cost.time(seqs=1.0, new=16.0)
