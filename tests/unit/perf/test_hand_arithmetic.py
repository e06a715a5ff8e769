"""Unit checks of the analytic models against hand arithmetic and published figures.

(a) architecture arithmetic vs hardware.md §4.1/§4.2; (b) the roofline on a hand-built toy GPU
and model; (c) closed-form queueing vs M/M/1; (d) the fleet MILP (optimize/model.py) on
instances solved by hand; (e) bytes crossing the line with and without the decode-side radix
cache.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema import GPUProfile, ModelProfile
from pdd_plan.latency import closed_forms
from pdd_plan.latency.line import transfer
from pdd_plan.optimize import milp as fleet
from pdd_plan.optimize.tables import (
    DecodeCandidate,
    FleetTables,
    LineOption,
    PathTable,
    rdma_option,
)
from pdd_plan.perf import comm, layers, moe_terms, roofline
from pdd_plan.perf.instance import Instance

pytestmark = pytest.mark.unit


# ================================================================== (a) architecture arithmetic

# hardware.md §4.1 ("KV bytes per token" column) and §4.2 (V4 compressed attention).
KV_PER_TOKEN = {
    "deepseek-v3": (70_272, 0),  # 576 x 61 x 2 (BF16 latent)
    "deepseek-v3.2": (48_068, 0),  # (656 FlashMLA-FP8 + 132 indexer) x 61
    "qwen3-235b-a22b": (192_512, 0),  # 2 x 94 x 4 x 128 x 2
    "qwen3-32b": (262_144, 0),  # 2 x 64 x 8 x 128 x 2
    "llama-3.1-70b": (327_680, 0),  # 2 x 80 x 8 x 128 x 2
    "llama-3.1-8b": (131_072, 0),  # 2 x 32 x 8 x 128 x 2
    "kimi-k2": (70_272, 0),  # as V3
    "deepseek-v4-pro": (5_511, 1.0),  # §4.2: ~5,511 B/token
    "deepseek-v4-flash": (3_850, 5.0),  # §4.2: ~3,850 B/token
}


@pytest.mark.parametrize("name", sorted(KV_PER_TOKEN))
def test_kv_bytes_per_token_matches_hardware_md(name):
    want, tol = KV_PER_TOKEN[name]
    got = layers.kv_bytes_per_token(profiles.model(name))
    assert abs(got - want) <= tol, f"{name}: {got} vs {want}"


def test_v4_pro_kv_from_the_sglang_formula():
    # §4.2: 584/4 per CSA layer + 584/128 per HCA layer + 132/4 per CSA layer, 30 CSA / 31 HCA.
    want = 584 / 4 * 30 + 584 / 128 * 31 + 132 / 4 * 30
    assert layers.kv_bytes_per_token(profiles.model("deepseek-v4-pro")) == pytest.approx(want)


def test_v4_pro_fixed_sliding_window_state():
    m = profiles.model("deepseek-v4-pro")
    assert layers.kv_fixed_bytes_per_request(m) == 128 * 584 * 61 == 4_559_872
    # a long context holds the whole window plus the asymptotic per-token bytes
    t = 65_536
    assert layers.kv_bytes(m, t) == pytest.approx(4_559_872 + t * layers.kv_bytes_per_token(m))
    # a context shorter than the window holds only its own rows in the window
    assert layers.kv_bytes(m, 100) == pytest.approx(
        100 * 584 * 61 + 100 * layers.kv_bytes_per_token(m)
    )
    assert layers.kv_bytes(m, 0) == 0.0


def test_non_v4_models_have_no_fixed_state():
    for name in ("deepseek-v3", "llama-3.1-8b", "qwen3-235b-a22b"):
        m = profiles.model(name)
        assert layers.kv_fixed_bytes_per_request(m) == 0.0
        assert layers.kv_bytes(m, 1000) == pytest.approx(1000 * layers.kv_bytes_per_token(m))


@pytest.mark.parametrize(
    ("name", "total_b", "active_b", "rel"),
    [
        ("deepseek-v3", 671, 37, 0.02),  # model card: 671B total / 37B active
        ("deepseek-v4-pro", 1600, 49, 0.03),  # model card: 1.6T / 49B
    ],
)
def test_param_counts_match_model_cards(name, total_b, active_b, rel):
    p = layers.param_counts(profiles.model(name))
    assert p.total / 1e9 == pytest.approx(total_b, rel=rel)
    assert p.active / 1e9 == pytest.approx(active_b, rel=rel)


# ================================================================== (b) roofline on a toy GPU

# Toy dense GQA model; sizes chosen so every parameter count is easy to write down.
H, L, NH, NKV, HD, FF, V = 256, 4, 8, 2, 32, 1024, 1000


def toy_gpu(hbm_gb: float = 80.0, **eff) -> GPUProfile:
    e = dict(
        mfu=1.0,
        mbu=1.0,
        step_overhead_ms=0.0,
        comm_efficiency=1.0,
        mem_fraction=0.9,
        source="test",
    )
    e.update(eff)
    return GPUProfile.model_validate(
        {
            "name": "toy",
            "display_name": "Toy GPU",
            "compute": {"bf16_tflops": 100.0, "source": "test"},
            "memory": {"hbm_gb": hbm_gb, "hbm_tbps": 1.0, "source": "test"},
            "interconnect": {
                "scale_up_gbytes_bidir": 900.0,
                "gpus_per_node": 8,
                "rdma_gbps_per_gpu": 400.0,
                "source": "test",
            },
            "price": {"usd_per_gpu_hour": 1.0, "source": "test"},
            "efficiency": e,
        }
    )


def toy_model(tied: bool = False) -> ModelProfile:
    return ModelProfile.model_validate(
        {
            "name": "toy-dense",
            "display_name": "Toy dense GQA",
            "num_layers": L,
            "hidden_size": H,
            "vocab_size": V,
            "tie_word_embeddings": tied,
            "attention": {
                "kind": "gqa",
                "num_heads": NH,
                "num_kv_heads": NKV,
                "head_dim": HD,
                "source": "test",
            },
            "ffn": {"intermediate_size": FF, "source": "test"},
            "weights": {"dtype": "bf16", "source": "test"},
            "kv_cache": {"dtype": "bf16", "source": "test"},
            "source": "test",
        }
    )


# Hand counts. Attention per layer: q (H x NH*HD) + k, v (H x NKV*HD each) + o (NH*HD x H).
ATTN = L * (H * NH * HD + 2 * H * NKV * HD + NH * HD * H)  # 4 * (65536 + 32768 + 65536)
FFN = L * 3 * H * FF  # gate, up, down
EMB = V * H
KV_TOKEN = 2 * L * NKV * HD * 2  # K and V, bf16: 1024 B
BW = 1e12  # 1 TB/s, mbu 1
PEAK = 100e12  # 100 TFLOP/s bf16, mfu 1


def test_toy_param_and_kv_counts():
    m = toy_model()
    assert ATTN == 655_360 and FFN == 3_145_728 and EMB == 256_000
    p = layers.param_counts(m)
    assert p.total == ATTN + FFN + 2 * EMB  # untied: embedding and LM head
    assert p.active == ATTN + FFN + EMB  # the lookup is not a matmul, the LM head is
    assert layers.kv_bytes_per_token(m) == KV_TOKEN == 1024
    tied = layers.param_counts(toy_model(tied=True))
    assert tied.total == ATTN + FFN + EMB  # one V x H table
    assert tied.active == ATTN + FFN + EMB  # ... which the LM head still multiplies by


def _inst(tied: bool = False, **gpu) -> Instance:
    return Instance(toy_model(tied), toy_gpu(**gpu), 1, tp=1, ep=1)


@pytest.mark.parametrize("tied", [False, True])
def test_decode_step_memory_time_is_weight_bytes_over_bandwidth(tied):
    inst = _inst(tied)
    # every bf16 matmul weight streams once: attention, FFN and the V x H LM head (the embedding
    # table itself when tied); the input embedding is only looked up, a few rows per step
    weight_bytes = 2.0 * (ATTN + FFN + EMB)
    # context 0: only weights are read
    t = roofline.decode_step(inst, 1, 0.0)
    assert t.memory_s == pytest.approx(weight_bytes / BW, rel=1e-12)
    # the toy GPU has no step overhead: only the engine's CPU cost of the one request
    cpu = comm.serving().engine_step.per_request_us * 1e-6
    assert t.communication_s == 0.0 and t.overhead_s == pytest.approx(cpu)
    assert t.bound == "memory"
    # batch 8 at context 1000: plus every request's KV, read once
    t = roofline.decode_step(inst, 8, 1000.0)
    # the KV is read by the attention kernel at its measured fraction of the bandwidth
    kv_bw = BW * comm.serving().attention_kernels.memory_fraction
    want = weight_bytes / BW + 8 * 1000 * KV_TOKEN / kv_bw
    assert t.memory_s == pytest.approx(want, rel=1e-12)


def test_chunk_time_compute_is_flops_over_peak():
    inst = _inst()
    s = 2000.0
    # hardware.md §4.3: 2 x active params per token; attention 4 n_q d_head t per layer, a causal
    # prefill of S tokens summing t over the chunk ~ S^2 / 2. The LM head (V x H) runs for the
    # last token only: engines compute a prefill's logits at its last position.
    weight_flops = 2.0 * (ATTN + FFN) * s + 2.0 * EMB
    attn_flops = 4.0 * NH * HD * L * s * s / 2.0
    t = roofline.chunk_time(inst, s, 0.0)
    # the attention kernel runs at its measured fraction of peak (moe-serving.yaml)
    af = comm.serving().attention_kernels.compute_fraction
    am = comm.serving().attention_kernels.memory_fraction
    assert t.compute_s == pytest.approx(weight_flops / PEAK + attn_flops / (PEAK * af), rel=1e-9)
    # on top of a 3000-token cached prefix every query also sees those 3000 tokens
    t2 = roofline.chunk_time(inst, s, 3000.0)
    attn2 = attn_flops + 4.0 * NH * HD * L * 3000.0 * s
    assert t2.compute_s == pytest.approx(weight_flops / PEAK + attn2 / (PEAK * af), rel=1e-9)
    # and memory: streamed weights + the cached KV read + the new KV written
    mem = 2.0 * (ATTN + FFN + EMB) / BW + KV_TOKEN * (3000 + s) / (BW * am)
    assert t2.memory_s == pytest.approx(mem, rel=1e-12)


def test_gemms_at_their_ridge_pay_the_rounded_corner():
    # a chunk of s tokens: GEMM FLOPs 2 W s against W x 2 bytes of weights (BF16); at
    # s = PEAK / BW (FLOP/s over byte/s, mfu = mbu = 1) the two times are equal, and the GEMM
    # class takes 2^(1/p) times either (moe-serving.yaml gemm_roofline)
    inst = _inst()
    p = comm.serving().gemm_roofline.sharpness
    m, g = inst.model, inst.gpu
    s = PEAK / BW
    # the kernels alone (on this toy the kernel-latency floor is above them)
    _, _, cb, mb, _ = roofline._kernels(inst, roofline._prefill_work(inst, 1.0, s, 0.0))
    ak = comm.serving().attention_kernels
    attn_s = layers.prefill_attention_flops(m, s, 0.0)[0] / g.peak_flops(m.kv_cache.dtype)
    attn_s /= ak.compute_fraction
    kv_s = KV_TOKEN * s / (BW * ak.memory_fraction)
    gemm_s = (2.0 * (ATTN + FFN) * s + 2.0 * EMB) / PEAK  # the LM head for the last token only
    bytes_s = 2.0 * (ATTN + FFN + EMB) / BW
    want = float(moe_terms.kernel_seconds(gemm_s, bytes_s)) + max(attn_s, kv_s)
    assert cb + mb == pytest.approx(want, rel=1e-9)
    # at the ridge (the LM head's bytes keep the two 7 % apart) the class takes ~2^(1/p) x
    assert gemm_s == pytest.approx(bytes_s, rel=0.1)
    corner = (want - max(attn_s, kv_s)) / max(gemm_s, bytes_s)
    assert 2 ** (1 / p) * 0.95 < corner < 2 ** (1 / p)


def test_tied_model_still_pays_the_lm_head_flops():
    # hardware.md §4.3: + 2 x hidden x vocab for the LM head, tied or not (for the prefill's
    # last token: its logits are the only ones an engine computes)
    inst = _inst(tied=True)
    s = 2000.0
    af = comm.serving().attention_kernels.compute_fraction
    flops = 2.0 * (ATTN + FFN) * s + 2.0 * EMB + 4.0 * NH * HD * L * s * s / 2.0 / af
    assert roofline.chunk_time(inst, s, 0.0).compute_s == pytest.approx(flops / PEAK, rel=1e-9)


def _real_instances() -> list[Instance]:
    h100 = profiles.gpu("h100")
    return [
        _inst(),
        Instance(profiles.model("llama-3.1-8b"), h100, 1, tp=1, ep=1),
        Instance(profiles.model("deepseek-v3"), profiles.gpu("h200"), 16, tp=16, ep=16, dp=16),
        Instance(profiles.model("deepseek-v4-pro"), h100, 16, tp=16, ep=16, dp=8),
    ]


@pytest.mark.parametrize("inst", _real_instances(), ids=lambda i: f"{i.model.name}/{i.label}")
def test_decode_time_rises_with_batch_and_context(inst):
    # never falls; flat only while the pass sits on its kernel-latency floor (moe_terms)
    batches = [1, 2, 4, 8, 16, 64, 256]
    by_batch = [roofline.decode_step(inst, b, 4096.0).total_s for b in batches]
    assert all(b >= a for a, b in zip(by_batch, by_batch[1:])), by_batch
    assert by_batch[-1] > by_batch[0]
    contexts = [128.0, 1024.0, 8192.0, 65536.0]
    by_ctx = [roofline.decode_step(inst, 16, c).total_s for c in contexts]
    assert all(b >= a for a, b in zip(by_ctx, by_ctx[1:])), by_ctx
    assert by_ctx[-1] > by_ctx[0]


@pytest.mark.parametrize("inst", _real_instances(), ids=lambda i: f"{i.model.name}/{i.label}")
def test_prefill_time_is_monotone_in_new_tokens(inst):
    tokens = [1, 10, 100, 1000, 4096, 8191, 8192, 8193, 12000, 16384, 30000]
    times = [roofline.prefill_time(inst, t, 0.0, chunk=8192).total_s for t in tokens]
    # flat only while a small pass sits on its kernel-latency floor (moe_terms)
    assert all(b >= a for a, b in zip(times, times[1:])), times
    assert all(b > a for a, b in zip(times[4:], times[5:])), times
    # a cached prefix makes the same new tokens cost more (longer attention), never less
    for t in (100, 8192):
        assert (
            roofline.prefill_time(inst, t, 20000.0).total_s
            >= roofline.prefill_time(inst, t, 0.0).total_s
        )


def test_model_that_does_not_fit_is_refused():
    # 1 GB of HBM x 0.9 vs ~8.5 MB of toy weights fits; 0.005 GB does not.
    _inst(hbm_gb=1.0).require_fit()
    small = _inst(hbm_gb=0.005)
    assert not small.fits and small.kv_pool_bytes == 0.0
    with pytest.raises(InputError, match="does not fit"):
        small.require_fit()
    # a real one: DeepSeek-V3 (~690 GB of FP8 weights) on one H100
    big = Instance(profiles.model("deepseek-v3"), profiles.gpu("h100"), 1, tp=1, ep=1)
    with pytest.raises(InputError, match="does not fit"):
        big.require_fit()


def test_kv_pool_by_hand():
    inst = _inst(hbm_gb=1.0)
    weights = 2.0 * (ATTN + FFN + 2 * EMB)
    assert inst.kv_pool_bytes == pytest.approx(1e9 * 0.9 - weights)
    assert inst.kv_max_batch(1000) == math.floor((1e9 * 0.9 - weights) / (1000 * KV_TOKEN))
    # the engine's caps apply on top (SGLang's CUDA-graph batch: 256 at TP 1 on this GPU)
    assert inst.max_batch(1000) == min(inst.kv_max_batch(1000), 256)
    # a configured running-request limit replaces the engine's caps
    mine = dataclasses.replace(inst, max_running=400)
    assert mine.max_batch(1000) == min(inst.kv_max_batch(1000), 400)


# ================================================================== (c) queueing


def test_ps_response_time_by_hand():
    assert float(closed_forms.ps_response_time(2.0, 4.0, 0.5)) == pytest.approx(1.0)  # 2/(4 x 0.5)
    got = closed_forms.ps_response_time(np.array([1.0, 3.0]), 10.0, 0.8)  # x / (10 x 0.2)
    np.testing.assert_allclose(got, [0.5, 1.5])
    assert np.isinf(closed_forms.ps_response_time(1.0, 1.0, 1.0))


@pytest.mark.parametrize(("lam", "mu"), [(0.8, 1.0), (3.0, 4.0), (0.1, 2.0)])
def test_mg1_mean_wait_is_mm1_for_exponential_service(lam, mu):
    es = 1.0 / mu
    rho = lam / mu
    got = closed_forms.mg1_mean_wait(rho, es, 2.0 * es * es)  # exponential: E[S^2] = 2 E[S]^2
    assert got == pytest.approx(rho / (1.0 - rho) * es)
    assert got == pytest.approx(lam / (mu * (mu - lam)))  # textbook M/M/1 Wq
    assert closed_forms.mg1_mean_wait(1.0, es, 2 * es * es) == math.inf
    assert closed_forms.mg1_mean_wait(0.0, es, 2 * es * es) == 0.0


@pytest.mark.parametrize(("lam", "mu"), [(0.8, 1.0), (3.0, 4.0), (0.5, 1.0)])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_mg1_wait_quantile_is_exact_for_mm1(lam, mu, q):
    rho = lam / mu
    wq = rho / (1 - rho) / mu
    got = closed_forms.mg1_wait_quantile(q, rho, wq)
    # M/M/1: P(W > t) = rho exp(-(mu - lambda) t)
    if rho <= 1 - q:
        assert got == 0.0
    else:
        want = math.log(rho / (1 - q)) / (mu - lam)
        assert got == pytest.approx(want, rel=1e-12)
        surv = float(closed_forms.mg1_wait_survival(got, rho, wq))
        assert surv == pytest.approx(1 - q, rel=1e-12)
    # and the survival function itself
    for t in (0.0, 1.0, 7.5):
        assert float(closed_forms.mg1_wait_survival(t, rho, wq)) == pytest.approx(
            rho * math.exp(-(mu - lam) * t), rel=1e-12
        )


def test_mm1_quantile_by_hand():
    # rho 0.8, mu 1: P90 wait = ln(0.8 / 0.1) / 0.2 = 5 ln 8 = 10.3972 s
    assert closed_forms.mg1_wait_quantile(0.9, 0.8, 4.0) == pytest.approx(10.397207708, rel=1e-9)
    assert closed_forms.mg1_wait_quantile(0.9, 0.05, 0.1) == 0.0  # P(W > 0) = 0.05 < 0.1


# ================================================================== (d) the fleet MILP by hand


def _cand(key, role, dc, gpu, gpus, cost, tps):
    return DecodeCandidate(
        key=key,
        role=role,
        datacenter=dc,
        gpu=gpu,
        gpus=gpus,
        cost_per_hour=cost,
        tokens_per_s=tps,
        kv_pool_bytes=1e12,  # KV memory never binds here
        step_s=0.01,
    )


def _paths(p90_miss_direct: float = 1.0) -> PathTable:
    """Class 0 (80 %, high hit) only goes direct; class 1 (20 %, low hit) misses the P90 TTFT on
    p_md and may relay. 100 output tokens per request; on p_rld_md RLD makes 50, MD 50."""
    return PathTable(
        allowed={"p_md": np.array([True, True]), "p_rld_md": np.array([False, True])},
        miss={
            0.9: {"p_md": np.array([0.0, p90_miss_direct]), "p_rld_md": np.array([0.0, 0.0])},
            0.99: {"p_md": np.array([0.0, 0.05]), "p_rld_md": np.array([0.0, 0.0])},
        },
        md_tokens={"p_md": np.array([100.0, 100.0]), "p_rld_md": np.array([0.0, 50.0])},
        rld_tokens={"p_md": np.array([0.0, 0.0]), "p_rld_md": np.array([0.0, 50.0])},
        crosses_line={"p_md": True, "p_rld_md": True, "p_rld": False},
        times=None,  # the solver reads only the tables above
    )


def _tables(
    gpus_b: int = 100, rate: float = 10.0, scale: float = 1.0, lines=None, line_bytes=(0.0, 0.0)
) -> FleetTables:
    """`rate` req/s. decode_cap 0.5: MD gives 0.5 x 800 = 400 tok/s per instance ($10/h,
    8 GPUs), RLD 0.5 x 100 = 50 tok/s per instance ($4/h, 8 GPUs); `scale` multiplies both."""
    lines = lines or [rdma_option()]
    return FleetTables(
        weight=np.array([0.8, 0.2]),
        line_bytes=np.asarray(line_bytes, dtype=float),
        kv_bytes=np.array([1.0, 1.0]),
        md=[_cand("md", "main_decode", "B", "h200", 8, 10.0, 800.0 * scale)],
        rld=[_cand("rld", "relay_decode", "A", "h100", 8, 4.0, 100.0 * scale)],
        lines=lines,
        paths=[_paths() for _ in lines],
        gpus_left={("A", "h100"): 100, ("B", "h200"): gpus_b},
        decode_cap=0.5,
        rate_rps=rate,
    )


def test_milp_tiny_instance_solved_by_hand():
    # Class 1 brings 2 req/s; P90: at most 10 % of 10 req/s = 1 req/s may miss, so at least
    # x = 1 req/s of class 1 must relay. RLD load is 50 x tokens/s: one instance (50 tok/s) takes
    # x <= 1, so x = 1 exactly (a second RLD instance costs more than anything it saves).
    # MD load: 8 x 100 + 1 x 100 + 1 x 50 = 950 tok/s -> 950 / 400 = 2.375 -> 3 instances.
    # Cost 3 x $10 + 1 x $4 = $34/h.
    sol = fleet.solve(_tables())
    assert sol is not None and sol.status == "Optimal"
    assert sol.counts == {"md": 3, "rld": 1}
    assert sol.cost_per_hour == pytest.approx(34.0)
    np.testing.assert_allclose(sol.flows["p_md"], [8.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(sol.flows["p_rld_md"], [0.0, 1.0], atol=1e-6)
    # demand met per class
    total = sol.flows["p_md"] + sol.flows["p_rld_md"]
    np.testing.assert_allclose(total, [8.0, 2.0], atol=1e-6)
    # the P90 row and relay throughput are tight at the optimum
    assert "ttft_p90" in sol.binding
    assert "relay_decode_throughput" in sol.binding


def test_milp_without_the_ttft_pressure_needs_no_relay():
    t = _tables()
    t.paths = [_paths(p90_miss_direct=0.0)]
    sol = fleet.solve(t)
    # all direct: 1000 tok/s on MD -> 2.5 -> 3 instances, no relay: $30/h
    assert sol is not None
    assert sol.counts == {"md": 3, "rld": 0}
    assert sol.cost_per_hour == pytest.approx(30.0)
    np.testing.assert_allclose(sol.flows["p_rld_md"], [0.0, 0.0], atol=1e-6)


def test_milp_picks_the_cheapest_line_that_carries_the_bytes():
    # Both paths cross the line: 8 x 10 B + 2 x 20 B = 120 B/s. A $1/h line carries 100 B/s at
    # its cap (too little), a $5/h one 1000 B/s: the optimum takes the second, $34 + $5.
    def opt(key, cost, cap):
        return LineOption(key, None, 1.0, cost, cap)

    lines = [opt("small", 1.0, 100.0), opt("big", 5.0, 1000.0)]
    sol = fleet.solve(_tables(lines=lines, line_bytes=(10.0, 20.0)))
    assert sol is not None
    assert sol.line_index == 1
    assert sol.cost_per_hour == pytest.approx(39.0)
    # with 10 B per request everywhere (100 B/s) the small line is enough: $35
    sol = fleet.solve(_tables(lines=lines, line_bytes=(10.0, 10.0)))
    assert sol is not None
    assert sol.line_index == 0
    assert sol.cost_per_hour == pytest.approx(35.0)


def test_milp_infeasible_when_gpus_are_short():
    # 16 GPUs in B -> at most 2 MD instances = 800 tok/s, but MD needs at least
    # 8 x 100 + 2 x 50 = 900 tok/s however class 1 is routed.
    assert fleet.solve(_tables(gpus_b=16)) is None
    # 24 GPUs (3 instances) is enough again
    assert fleet.solve(_tables(gpus_b=24)) is not None


@pytest.mark.parametrize(
    "scale",
    [
        1e-7,  # flows are shares of a fixed rate: tiny rates are as well scaled as any
        1e-2,
        1e4,
    ],
)
def test_milp_is_rate_scale_invariant(scale):
    # The same problem with the rate and every pool's throughput scaled by `scale`: the same
    # counts and cost, flows scaled.
    sol = fleet.solve(_tables(rate=10.0 * scale, scale=scale))
    assert sol is not None
    assert sol.counts == {"md": 3, "rld": 1}
    assert sol.cost_per_hour == pytest.approx(34.0)
    np.testing.assert_allclose(sol.flows["p_md"], np.array([8.0, 1.0]) * scale, rtol=1e-6)
    np.testing.assert_allclose(sol.flows["p_rld_md"], np.array([0.0, 1.0]) * scale, rtol=1e-6)


# ================================================================== (e) bytes on the line


def test_line_bytes_v4_pro_with_and_without_drc():
    m = profiles.model("deepseek-v4-pro")
    per_tok = 584 / 4 * 30 + 584 / 128 * 31 + 132 / 4 * 30  # hardware.md §4.2
    window = 128 * 584 * 61
    t = np.array([65536.0, 65536.0, 8192.0, 100.0])
    hit = np.array([0.9, 0.0, 0.5, 0.5])
    got = transfer.line_bytes(m, t, hit, drc=True)
    fixed = np.array([window, window, window, 100 * 584 * 61])  # short context: partial window
    np.testing.assert_allclose(got, (1 - hit) * per_tok * t + fixed, rtol=1e-12)
    full = transfer.line_bytes(m, t, hit, drc=False)
    np.testing.assert_allclose(full, per_tok * t + fixed, rtol=1e-12)
    np.testing.assert_allclose(full, layers.kv_bytes(m, t), rtol=1e-12)
    # a 64K context at 90 % hit sends ~36 MB + 4.6 MB of window instead of ~366 MB
    assert got[0] / 1e6 == pytest.approx(0.1 * 5511.4375 * 65536 / 1e6 + 4.559872, rel=1e-9)


def test_line_bytes_gqa_has_no_fixed_part():
    m = profiles.model("llama-3.1-8b")
    t = np.array([1000.0, 4000.0])
    hit = np.array([0.25, 1.0])
    np.testing.assert_allclose(
        transfer.line_bytes(m, t, hit, drc=True), (1 - hit) * 131_072 * t, rtol=1e-12
    )
    np.testing.assert_allclose(transfer.line_bytes(m, t, hit, drc=False), 131_072 * t, rtol=1e-12)
