"""Offline aggregated throughput: one instance, fixed input/output lengths, continuous batching.

This is what public throughput benchmarks report (trtllm-bench `throughput`, SGLang
`bench_offline_throughput`): every request is queued at t=0, the engine keeps its batch full
and refills freed slots with new requests whose prompts are prefilled in chunks inside the
same forward passes as the running decodes.

Steady state (ISL input tokens, OSL output tokens per request):

    B     = min(B_kv, max_batch, floor(max_num_tokens / (1 + ISL/OSL)))
            B_kv = floor(KV pool / kv_bytes(held))   held = ISL + OSL where admission reserves the
                   whole request (TensorRT-LLM), ISL + OSL/2 where paged KV holds the live context
    d     = B * ISL / OSL        prefill tokens needed per iteration to refill the batch
    c     = max_num_tokens - B   prefill tokens one iteration can carry
    q     = min(c, max(d, ISL))  prefill tokens of an iteration that carries prefill: prompts
                                 arrive one request (ISL tokens) at a time, chunked at c
    f     = d / q                share of iterations that carry prefill
    t_dec = pass(B decode tokens at context ISL + OSL/2)
    t_mix = pass(B decode tokens + q prefill tokens at their cached context)
    t_it  = f * t_mix + (1 - f) * t_dec
    output tokens/s = B / t_it
    request latency = OSL * t_it + ceil(ISL / q) * t_mix   (time in the engine, not queueing)

Every pass is `roofline.mixed_pass`: its GEMMs (weights streamed once for all its tokens) and its
attention kernels (roofline.py: GEMM classes on the rounded roofline, attention max(FLOPs, bytes)), plus
communication and the step overhead. This is
the "time per request = prefill + OSL decode steps shared by the batch" accounting, written per
iteration: over one batch turnover the engine runs OSL iterations and prefills B prompts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pdd_plan.perf import layers, roofline
from pdd_plan.perf.instance import Instance


@dataclass(frozen=True)
class Engine:
    """Scheduler limits of the serving engine the throughput is predicted for."""

    name: str
    # 'trtllm-bench': max batch and token budget chosen per dataset by trtllm-bench's heuristic;
    # 'fixed': the values below
    limits: str
    max_batch: int | None  # cap on running requests (None: KV capacity only)
    max_num_tokens: int  # tokens (prefill + decode) one forward pass may carry
    kv_free_fraction: (
        float | None
    )  # KV pool = fraction of HBM left after weights; None: GPU mem_fraction
    source: str
    # live: paged KV holds each request's live context (mean ISL + OSL/2 in the steady state);
    # reserve: admission reserves ISL + OSL (TensorRT-LLM's GUARANTEED_NO_EVICT; engines.yaml)
    kv_admission: str = "live"

    def batch_limits(self, kv_requests: float, isl: float, osl: float) -> tuple[int, int]:
        """(max running requests, max tokens per pass) the engine runs this dataset with."""
        if self.limits != "trtllm-bench":
            return (self.max_batch or 1 << 30), self.max_num_tokens
        # trtllm-bench tuning.finetune_setting: rounded-up, slightly optimistic bounds
        raw_bs = min(kv_requests, self.max_batch or 4096)
        raw_tok = min(raw_bs * (1 + isl / osl), self.max_num_tokens)
        if raw_bs < 256:
            bs = max(64, 32 * math.ceil(raw_bs / 32))
        elif raw_bs < 1024:
            bs = 128 * math.ceil(raw_bs / 128)
        else:
            bs = 256 * math.ceil(raw_bs / 256)
        if raw_tok < 4096:
            tok = max(2048, 256 * math.ceil(raw_tok / 256))
        elif raw_tok < 8192:
            tok = 512 * math.ceil(raw_tok / 512)
        else:
            tok = 1024 * math.ceil(raw_tok / 1024)
        return bs, tok


TRTLLM_BENCH = Engine(
    name="trtllm-bench",
    limits="trtllm-bench",
    max_batch=4096,
    max_num_tokens=32768,
    kv_free_fraction=0.95,
    kv_admission="reserve",
    source=(
        "NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py (calc_engine_setting, "
        "finetune_setting): max batch = KV-fit requests rounded up (min 64, cap 4096), max num "
        "tokens = batch x (1 + ISL/OSL) rounded up (min 2048, cap 32768); KV cache = 0.95 of the "
        "memory left after weights (docs/source/performance/perf-overview.md: "
        "'--kv_cache_free_gpu_mem_fraction 0.95')"
    ),
)

SGLANG = Engine(
    name="sglang",
    limits="fixed",
    max_batch=None,
    max_num_tokens=16384,
    kv_free_fraction=None,
    source=(
        "runtime.md §1.1 (sgl-project/sglang server_args): --max-prefill-tokens 16384 default, "
        "--max-running-requests None (KV-bound); KV pool from the GPU profile's "
        "--mem-fraction-static (efficiency.mem_fraction)"
    ),
)

ENGINES = {e.name: e for e in (TRTLLM_BENCH, SGLANG)}


@dataclass(frozen=True)
class OfflineResult:
    output_tokens_per_s: float
    request_latency_s: float
    batch: int
    batch_limit: str  # kv | engine_max_batch | token_budget
    kv_capacity_tokens: float
    iteration_s: float
    decode_pass: roofline.PassTime
    mixed_pass: roofline.PassTime
    prefill_share: float  # f: share of iterations that carry prefill
    prefill_tokens_per_pass: float  # q
    max_num_tokens: int
    engine: str
    mode: str

    @property
    def breakdown(self) -> roofline.PassTime:
        """Average iteration, split into compute / memory / communication / overhead."""
        f = self.prefill_share
        return self.mixed_pass.scaled(f) + self.decode_pass.scaled(1.0 - f)

    @property
    def bound(self) -> str:
        return self.breakdown.bound

    @property
    def tpot_s(self) -> float:
        """Mean time between one request's output tokens: an iteration, counting the passes
        that carry the other requests' prefill chunks but not its own (which come before its
        first token): t_dec + f (B - 1) / B (t_mix - t_dec)."""
        b = max(self.batch, 1)
        extra = self.mixed_pass.total_s - self.decode_pass.total_s
        return self.decode_pass.total_s + self.prefill_share * (b - 1) / b * extra


def offline_throughput(
    inst: Instance, isl: float, osl: float, engine: Engine = SGLANG
) -> OfflineResult:
    """Output tokens/s of `inst` serving requests of exactly `isl` input and `osl` output tokens
    with every request queued up front (see the module docstring for the equation)."""
    isl, osl = float(isl), float(max(osl, 1.0))
    if engine.kv_free_fraction is not None:
        pool = inst.kv_pool_bytes_with(free_fraction=engine.kv_free_fraction)
    else:
        pool = inst.kv_pool_bytes
    held = isl + osl if engine.kv_admission == "reserve" else isl + osl / 2.0
    per_request = float(layers.kv_bytes(inst.model, held))
    kv_requests = pool / per_request if per_request > 0 else 0.0
    max_bs, max_tok = engine.batch_limits(kv_requests, isl, osl)
    token_cap = max_tok / (1.0 + isl / osl)
    limits = {"kv": kv_requests, "engine_max_batch": float(max_bs), "token_budget": token_cap}
    limit = min(limits, key=limits.get)  # type: ignore[arg-type]
    batch = max(int(math.floor(limits[limit])), 0)
    kv_tokens = pool / layers.kv_bytes_per_token(inst.model)
    if batch < 1:
        dec = roofline.decode_step(inst, 1, isl + osl / 2)
        return OfflineResult(
            0.0, math.inf, 0, limit, kv_tokens, math.inf, dec, dec, 0.0, 0.0, max_tok,
            engine.name, inst.mode,
        )  # fmt: skip
    ctx = isl + osl / 2.0
    d = batch * isl / osl
    c = max(max_tok - batch, 1.0)
    q = min(c, max(d, isl))
    f = min(d / q, 1.0) if q > 0 else 0.0
    # a chunk of q tokens sits on average half-way through the prompt's earlier chunks
    n_chunks = max(math.ceil(isl / q), 1) if q > 0 else 1
    cached = (n_chunks - 1) / 2.0 * q if n_chunks > 1 else 0.0
    seqs, new = (q / isl, isl) if q >= isl else (1.0, q)
    t_dec = roofline.mixed_pass(inst, decode_batch=batch, decode_context=ctx)
    t_mix = roofline.mixed_pass(
        inst,
        decode_batch=batch,
        decode_context=ctx,
        prefill_seqs=seqs,
        prefill_new=new,
        prefill_cached=cached,
    )
    t_it = f * t_mix.total_s + (1.0 - f) * t_dec.total_s
    latency = osl * t_it + n_chunks * t_mix.total_s
    return OfflineResult(
        output_tokens_per_s=batch / t_it,
        request_latency_s=latency,
        batch=batch,
        batch_limit=limit,
        kv_capacity_tokens=kv_tokens,
        iteration_s=t_it,
        decode_pass=t_dec,
        mixed_pass=t_mix,
        prefill_share=f,
        prefill_tokens_per_pass=q,
        max_num_tokens=int(max_tok),
        engine=engine.name,
        mode=inst.mode,
    )
