"""The terms that make a MoE pass slower than its dense roofline (perf/moe_terms.py), each
against hand arithmetic, its published source or a property."""

from __future__ import annotations

import math

import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.inputs import profiles
from pdd_plan.perf import comm, fixed_cost, moe_terms, roofline
from pdd_plan.perf.instance import Instance

pytestmark = pytest.mark.unit


def _v3(gpu: str, n: int, ep: int, dp: int = 1, **kw) -> Instance:
    return Instance(
        profiles.model("deepseek-v3"), cal.analytic_gpu(gpu), n, tp=n, ep=ep, dp=dp, **kw
    )


def test_statistical_imbalance_by_hand_and_its_limits():
    # ep 8, 64 copies: mu = 8 per rank, 1 + sqrt(2 ln 8 / 8) = 1.7210
    assert moe_terms.statistical_imbalance(8, 64) == pytest.approx(
        1 + math.sqrt(2 * math.log(8) / 8)
    )
    assert moe_terms.statistical_imbalance(1, 64) == 1.0
    values = [moe_terms.statistical_imbalance(32, c) for c in (1e2, 1e3, 1e4, 1e6)]
    assert values == sorted(values, reverse=True) and values[-1] < 1.02  # vanishes at scale
    # more ranks at the same copies per rank: a larger maximum
    assert moe_terms.statistical_imbalance(64, 64 * 50) > moe_terms.statistical_imbalance(8, 8 * 50)


def test_imbalance_systematic_times_statistical_and_a_stated_load_is_kept():
    inst = _v3("h800", 32, 32, 32)
    load = comm.serving().expert_load
    big = moe_terms.expert_imbalance(inst, 32 * 16384)  # the blog's prefill: 16,384 tokens/GPU
    # tolerance: 1%: the statistical part at the blog's pass, 1 + sqrt(2 ln 32 / (32 x 16,384 x 8 /
    # 32)) = 1.0073 by hand, multiplies the stated systematic 1.18: the product is within 0.73% of
    # it
    assert big == pytest.approx(load.imbalance_without_eplb, rel=0.01)
    small = moe_terms.expert_imbalance(inst, 32 * 4)  # 4 tokens per GPU
    assert small == pytest.approx(
        load.imbalance_without_eplb * (1 + math.sqrt(2 * math.log(32) / 4 / 8))
    )
    eplb = _v3("h800", 32, 32, 32, redundant_experts=32)
    assert moe_terms.expert_imbalance(eplb, 32 * 4) < small  # EPLB evens the systematic part
    balanced = _v3("h800", 32, 32, 32, expert_load=1.0)
    assert moe_terms.expert_imbalance(balanced, 32) == 1.0


# DeepGEMM README (2025, 'Performance', H800, FP8 in, BF16 out): (M, N, K, groups) -> TFLOPS
DEEPGEMM = {
    (64, 2112, 7168, 1): 206, (64, 24576, 1536, 1): 289, (64, 32768, 512, 1): 219,
    (64, 7168, 16384, 1): 336, (64, 4096, 7168, 1): 287, (64, 7168, 2048, 1): 295,
    (128, 2112, 7168, 1): 352, (128, 24576, 1536, 1): 535, (128, 32768, 512, 1): 358,
    (128, 7168, 16384, 1): 645, (128, 4096, 7168, 1): 533, (128, 7168, 2048, 1): 510,
    (4096, 2112, 7168, 1): 1058, (4096, 24576, 1536, 1): 990, (4096, 32768, 512, 1): 590,
    (4096, 7168, 16384, 1): 1358, (4096, 4096, 7168, 1): 1304, (4096, 7168, 2048, 1): 1025,
    (8192, 4096, 7168, 4): 1297, (8192, 7168, 2048, 4): 1099, (4096, 4096, 7168, 8): 1288,
    (4096, 7168, 2048, 8): 1093, (1024, 4096, 7168, 1): 1233, (1024, 7168, 2048, 1): 925,
    (512, 4096, 7168, 2): 1040, (512, 7168, 2048, 2): 916, (256, 4096, 7168, 4): 932,
    (256, 7168, 2048, 4): 815,
}  # fmt: skip


def test_rounded_roofline_reproduces_deepgemm_shapes():
    # the YAML's sharpness with DeepGEMM's own fractions (its source: mfu 0.645, mbu 0.735 of
    # H800's 1,979 FP8 TFLOPS and 3.35 TB/s) against the 28 published shapes
    errs = []
    for (m, n, k, g), tflops in DEEPGEMM.items():
        flops, nbytes = 2.0 * m * n * k * g, g * (m * k + n * k + 2.0 * m * n)
        t = moe_terms.kernel_seconds(flops / (1979e12 * 0.645), nbytes / (3.35e12 * 0.735))
        errs.append(abs(float(t) / (flops / (tflops * 1e12)) - 1.0))
    assert sorted(errs)[len(errs) // 2] < 0.10 and max(errs) < 0.30


def test_kernel_seconds_rounds_only_the_corner():
    p = comm.serving().gemm_roofline.sharpness
    assert moe_terms.kernel_seconds(1.0, 1.0) == pytest.approx(2.0 ** (1.0 / p))  # at the ridge
    assert moe_terms.kernel_seconds(2.0, 0.0) == 2.0  # pure FLOPs: the sharp roofline
    assert moe_terms.kernel_seconds(0.0, 0.0) == 0.0
    far = float(moe_terms.kernel_seconds(1.0, 0.01))
    assert 1.0 < far < 1.0 + 1e-3  # far from the ridge the binding term alone
    ts = [float(moe_terms.kernel_seconds(1.0, x)) for x in (0.1, 0.5, 1.0, 2.0)]
    assert ts == sorted(ts)  # more bytes, never faster


def test_kernel_seconds_of_one_gemm_is_the_arrays_bit_for_bit():
    """Floats take a scalar path: the same IEEE operations as the array path, so the same bits
    (random pairs over twelve decades, ties and zeros included)."""
    import numpy as np

    rng = np.random.default_rng(7)
    pairs = [(float(a), float(b)) for a, b in 10.0 ** rng.uniform(-9, 3, (500, 2))]
    pairs += [(0.0, 0.0), (1.0, 1.0), (0.0, 2.0), (3.0, 0.0)]
    c, m = np.array(pairs).T
    arrays = moe_terms.kernel_seconds(c, m)
    for (a, b), want in zip(pairs, arrays):
        got = moe_terms.kernel_seconds(a, b)
        assert type(got) is float and got == want, (a, b)


def test_deepep_fixed_latency_per_layer_inside_and_across_nodes():
    lat = comm.serving().deepep_latency
    layers = 58  # DeepSeek-V3: 61 layers, the first 3 dense
    intra = _v3("h800", 8, 8, 8)  # one node
    across = _v3("h800", 16, 16, 16)  # two nodes of 8
    assert moe_terms.deepep_fixed_seconds(intra, "decode") == pytest.approx(
        2 * layers * lat.low_latency_intranode_us * 1e-6
    )
    assert moe_terms.deepep_fixed_seconds(across, "decode") == pytest.approx(
        2 * layers * lat.low_latency_internode_us * 1e-6
    )
    assert moe_terms.deepep_fixed_seconds(across, "prefill") == pytest.approx(
        2 * layers * lat.normal_internode_us * 1e-6
    )
    dense = Instance(profiles.model("llama-3.1-8b"), cal.analytic_gpu("h100"), 1, tp=1, ep=1)
    assert moe_terms.deepep_fixed_seconds(dense, "decode") == 0.0
    # a one-request decode step across nodes pays at least the fixed latency
    assert roofline.decode_step(across, 1, 2000).communication_s >= 2 * layers * 25e-6


def test_step_cpu_cost_grows_with_requests_per_dp_rank():
    per = comm.serving().engine_step.per_request_us * 1e-6
    tp = _v3("h200", 8, 1)
    dp = _v3("h200", 8, 8, 8)
    assert moe_terms.step_cpu_seconds(tp, 256) == pytest.approx(256 * per)
    assert moe_terms.step_cpu_seconds(dp, 256) == pytest.approx(256 * per / 8)
    a, b = roofline.decode_step(tp, 16, 2000), roofline.decode_step(tp, 256, 2000)
    assert b.overhead_s - a.overhead_s == pytest.approx(240 * per)


def test_attention_fractions_are_flashmla_figures_and_match_the_gqa_kernel_rows():
    c, m = moe_terms.attention_fractions(profiles.model("deepseek-v3"))
    # FlashMLA README on H800: 580 TFLOPS of 989.4, 3000 GB/s of 3350
    assert c * 989.4 == pytest.approx(580, rel=0.01) and m * 3350 == pytest.approx(3000, rel=0.01)
    # GQA takes them too: TensorRT-LLM's kernel rows (CSV 197-202) read KV at 4.37 TB/s of
    # H200's 4.8 and 7.10 of B200's 8.0, and run BF16 prefill attention at 610 / 989 and
    # 1,038 / 2,250 of peak: within 3 % and 0.46-0.62 of the shared figures
    assert moe_terms.attention_fractions(profiles.model("llama-3.1-70b")) == (c, m)
    assert abs(4.37 / 4.8 - m) < 0.03 and abs(7.10 / 8.0 - m) < 0.03
    assert 1038.26 / 2250 < c < 610.30 / 989.4


def test_prefill_charges_the_lm_head_once_per_sequence():
    inst = Instance(profiles.model("llama-3.1-8b"), cal.analytic_gpu("h100"), 1, tp=1, ep=1)
    p = inst.params
    w = roofline._prefill_work(inst, 2.0, 1000.0, 0.0)
    non_head = 2.0 * (p.active - p.routed_active - p.lm_head_matmul) * 2000
    # by hand: every token's projections and FFN, the LM head for one token per sequence
    assert w.gemm_other - w.head_skipped == pytest.approx(non_head + 2.0 * p.lm_head_matmul * 2)
    # a decode step still computes the logits of every row
    d = roofline._decode_work(inst, 8.0, 0.0, 0.0)
    assert d.head_skipped == 0.0 and d.gemm_other == pytest.approx(2.0 * p.active * 8)


def test_moe_decode_step_time_is_monotone_in_batch():
    inst = _v3("h200", 8, 8, 8)
    times = [roofline.decode_step(inst, b, 2000).total_s for b in (8, 64, 512, 4096)]
    assert times == sorted(times)


def test_fixed_cost_by_hand_and_on_top_of_the_roofline():
    k = comm.serving().kernel_floor
    q = k.quant
    h100 = cal.analytic_gpu("h100")
    # DeepSeek-V3 FP8: 61 latent-attention layers, 3 dense FFNs, 58 MoE FFNs with a shared
    # expert; every FP8 GEMM input quantized by a kernel of its own
    v3 = _v3("h200", 8, 1)
    want = 61 * (k.attention_latent + q.attention_latent) + 3 * (k.ffn_dense + q.ffn_dense)
    want += 58 * (k.ffn_moe + k.shared_experts + q.ffn_moe + q.shared_experts)
    assert moe_terms.kernels_per_pass(v3) == want + k.per_pass
    # 29 kernels in a MoE decoder layer (vLLM counted about 33 for V3.2, whose indexer adds
    # several, before its fusion: CSV row 185)
    moe_layer = k.attention_latent + q.attention_latent + k.ffn_moe + k.shared_experts
    moe_layer += q.ffn_moe + q.shared_experts
    assert 25 <= moe_layer <= 33
    # Llama-3.1-8B in BF16: no quantization kernels
    l8 = profiles.model("llama-3.1-8b")
    one = Instance(l8, h100, 1, tp=1, ep=1)
    assert moe_terms.kernels_per_pass(one) == 32 * (k.attention_gqa + k.ffn_dense) + k.per_pass
    floor = moe_terms.kernel_floor_seconds(one)
    assert floor == pytest.approx(k.per_kernel_us * 1e-6 * moe_terms.kernels_per_pass(one))
    assert moe_terms.allreduce_fixed_seconds(one) == 0.0  # no TP group, no all-reduce
    tp8 = Instance(l8, h100, 8, tp=8, ep=1)
    assert moe_terms.allreduce_fixed_seconds(tp8) == pytest.approx(k.allreduce_us * 1e-6 * 2 * 32)
    # across two nodes each call pays the network's floor
    tp16 = Instance(profiles.model("llama-3.1-70b"), h100, 16, tp=16, ep=1)
    want = k.allreduce_internode_us * 1e-6 * 2 * 80
    assert moe_terms.allreduce_fixed_seconds(tp16) == pytest.approx(want)
    # DP attention without an expert all-to-all gathers and scatters once each per layer
    dp = Instance(l8, h100, 8, tp=8, ep=1, dp=4)
    fc = fixed_cost.fixed_cost(dp)
    assert fc.dp_gather_s == pytest.approx(k.allreduce_us * 1e-6 * 2 * 32)
    assert fc.tp_allreduce_s == pytest.approx(k.allreduce_us * 1e-6 * 2 * 32)  # attention TP 2
    # the floors add to the kernels' work (alpha-beta): a tiny step is its bytes plus the floor
    tiny = roofline.decode_step(one, 1, 16.0)
    work = roofline._kernels(one, roofline._decode_work(one, 1.0, 0.0, 0.0))
    assert tiny.memory_bound_s == pytest.approx(work[3] + floor, rel=1e-2)
    big = roofline.decode_step(one, 256, 4096.0)
    assert big.compute_bound_s + big.memory_bound_s > 10 * floor


def test_ep_without_dp_attention_has_no_all_to_all():
    # TP attention: every rank holds every token; the MoE output is combined by the TP
    # all-reduce, so there is no dispatch/combine (SGLang / TensorRT-LLM EP without DP attention)
    tp_ep = _v3("b200", 8, 8)
    assert comm.a2a_seconds(tp_ep, 64, "decode") == 0.0
    assert moe_terms.deepep_fixed_seconds(tp_ep, "decode") == 0.0
    dp_ep = _v3("b200", 8, 8, 8)
    assert comm.a2a_seconds(dp_ep, 64, "decode") > 0.0
    assert moe_terms.deepep_fixed_seconds(dp_ep, "decode") > 0.0
