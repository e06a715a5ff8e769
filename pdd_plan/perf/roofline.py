"""Roofline timing of forward passes: prefill chunks, decode steps, extend (DESIGN §4.1).

A pass runs its GEMMs (weights x tokens) and its attention kernels (queries x cached KV) one
after the other, and each kernel class is bound by its own roofline:

    gemm = max(gemm FLOPs / (peak * mfu * m/(m + m_half)), weight bytes / (bw * mbu))
    attn = max(attn FLOPs / (peak * mfu * m/(m + m_half)), KV bytes / (bw * mbu))
    time(pass) = gemm + attn + TP/EP communication + step overhead

m is the number of tokens in the pass; m/(m + m_half) is the small-chunk efficiency curve (the
short tail chunk of a prefill runs its GEMMs badly). A decode step's GEMMs can be compute-bound
while its attention streams KV: the two do not overlap, which a single max(FLOPs, bytes) over
the whole pass would pretend.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from . import arch
from .instance import Instance


@dataclass(frozen=True)
class PassTime:
    """Seconds of one forward pass (or a sum of passes).

    compute_s / memory_s: all FLOPs at the achieved FLOP rate and all HBM bytes at the achieved
    bandwidth; compute_bound_s / memory_bound_s: the time of the kernels that are compute-bound
    and of those that are memory-bound (they add up, with communication and overhead, to the
    total). `mode` says whether the efficiency factors behind it are the GPU profile's analytic
    defaults or fitted by `pdd-plan calibrate`. Built from the first four numbers only, the total
    is max(compute, memory) + communication + overhead.
    """

    compute_s: float
    memory_s: float
    communication_s: float
    overhead_s: float
    mode: str = "analytic"
    compute_bound_s: float | None = None
    memory_bound_s: float | None = None

    def _bound_split(self) -> tuple[float, float]:
        if self.compute_bound_s is not None and self.memory_bound_s is not None:
            return self.compute_bound_s, self.memory_bound_s
        if self.compute_s > self.memory_s:
            return self.compute_s, 0.0
        return 0.0, self.memory_s

    @property
    def total_s(self) -> float:
        cb, mb = self._bound_split()
        return cb + mb + self.communication_s + self.overhead_s

    @property
    def bound(self) -> str:
        """compute | memory | communication: the resource that takes most of the pass."""
        cb, mb = self._bound_split()
        parts = {"compute": cb, "memory": mb, "communication": self.communication_s}
        return max(parts, key=parts.get)

    def __add__(self, other: PassTime) -> PassTime:
        a, b = self._bound_split(), other._bound_split()
        return PassTime(
            self.compute_s + other.compute_s,
            self.memory_s + other.memory_s,
            self.communication_s + other.communication_s,
            self.overhead_s + other.overhead_s,
            self.mode,
            a[0] + b[0],
            a[1] + b[1],
        )

    def scaled(self, k: float) -> PassTime:
        """k passes like this one."""
        cb, mb = self._bound_split()
        return PassTime(
            self.compute_s * k,
            self.memory_s * k,
            self.communication_s * k,
            self.overhead_s * k,
            self.mode,
            cb * k,
            mb * k,
        )

    def as_dict(self) -> dict[str, float | str]:
        cb, mb = self._bound_split()
        d = {**asdict(self), "compute_bound_s": cb, "memory_bound_s": mb}
        return {**d, "total_s": self.total_s, "bound": self.bound}


def expected_experts_touched(tokens: float, num_experts: int, k: int) -> float:
    """Distinct experts (per MoE layer) that `tokens` tokens, each routed to k of E uniformly, touch."""
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - k / num_experts) ** tokens)


def _weight_bytes_read(inst: Instance, tokens: float) -> float:
    """Weight bytes one pass over `tokens` tokens streams from HBM (all GPUs together)."""
    m, w = inst.model, inst.weights
    dense = w["streamed_dense"]  # the embedding table is only looked up
    # attention weights are replicated across DP groups: each group streams its own copy
    dense += inst.params.attention * arch.DTYPE_BYTES[inst.compute_dtype] * (inst.dp - 1)
    if m.ffn.moe is None:
        return dense
    moe = m.ffn.moe
    touched = expected_experts_touched(tokens, moe.num_experts, moe.experts_per_token)
    return dense + inst.params.moe_layers * touched * w["expert_bytes"]


def _comm_s(inst: Instance, tokens: float) -> float:
    """TP all-reduce and EP all-to-all traffic for one pass, over NVLink and (across nodes) RDMA."""
    m, g = inst.model, inst.gpu
    eff = g.efficiency.comm_efficiency
    per_node = g.interconnect.gpus_per_node
    nvlink = g.interconnect.scale_up_gbytes_bidir / 2 * 1e9 * eff  # one direction, bytes/s
    rdma = g.interconnect.rdma_gbps_per_gpu / 8 * 1e9 * eff
    h, L = m.hidden_size, m.num_layers
    t = 0.0
    tp = inst.attn_tp
    if tp > 1:
        # two all-reduces per layer of the group's tokens*h bf16 values (tokens split evenly over
        # DP groups); a ring moves 2(tp-1)/tp of it per GPU
        per_gpu = 2 * L * (tokens / inst.dp) * h * 2 * 2 * (tp - 1) / tp
        link = nvlink if tp <= per_node else min(nvlink, rdma)
        t += per_gpu / link
    if m.ffn.moe is not None and inst.ep > 1:
        k = m.ffn.moe.experts_per_token
        # dispatch FP8 + combine BF16 of k copies of each token's hidden state, spread over EP ranks
        per_gpu = (
            inst.params.moe_layers * tokens / inst.n_gpus * k * h * 3 * (inst.ep - 1) / inst.ep
        )
        remote = max(0.0, 1.0 - per_node / inst.ep)
        t += per_gpu * (1 - remote) / nvlink + per_gpu * remote / rdma
    return t


def _pass(
    inst: Instance,
    tokens: float,
    gemm_flops: float,
    attn_flops: float,
    kv_bytes: float,
) -> PassTime:
    g = inst.gpu
    e = g.efficiency
    n = inst.n_gpus
    m_eff = tokens / (tokens + e.chunk_half_tokens)  # small batches/chunks run GEMMs badly
    ideal_rate = n * g.peak_flops(inst.compute_dtype) * e.mfu
    bw = n * g.memory.hbm_tbps * 1e12 * e.mbu
    cg, ca = gemm_flops / (ideal_rate * m_eff), attn_flops / (ideal_rate * m_eff)
    mg, ma = _weight_bytes_read(inst, tokens) / bw, kv_bytes / bw
    # Each kernel class takes max(compute, memory). Its time counts as compute-bound when its
    # arithmetic intensity is above the ridge (ideal FLOP time >= byte time); a small chunk that
    # is slow only because m/(m + m_half) starves the tensor cores is still memory-bound.
    compute_bound = memory_bound = 0.0
    for c, mem, flops in ((cg, mg, gemm_flops), (ca, ma, attn_flops)):
        t = max(c, mem)
        if flops / ideal_rate >= mem and flops > 0:
            compute_bound += t
        else:
            memory_bound += t
    return PassTime(
        cg + ca,
        mg + ma,
        _comm_s(inst, tokens),
        e.step_overhead_ms / 1e3,
        e.mode,
        compute_bound,
        memory_bound,
    )


def _prefill_work(
    inst: Instance, seqs: float, new_tokens: float, before: float
) -> tuple[float, float, float]:
    """(GEMM FLOPs, attention FLOPs, KV bytes moved) of `seqs` sequences each prefilling
    `new_tokens` tokens on top of `before` cached ones."""
    m = inst.model
    if seqs <= 0 or new_tokens <= 0:
        return 0.0, 0.0, 0.0
    mid = before + new_tokens / 2.0  # causal: the average query sees half the chunk
    n = seqs * new_tokens
    gemm = arch.weight_flops_per_token(m) * n
    attn = float(arch.attention_flops_per_token(m, mid, "prefill")) * n
    # cached KV is read once per pass (x replication when every TP rank holds the latent);
    # the new tokens' KV is written
    kv_read = float(arch.kv_bytes(m, before))
    kv_write = float(arch.kv_bytes(m, before + new_tokens)) - kv_read
    return gemm, attn, seqs * (kv_read + kv_write) * inst.kv_replication


def mixed_pass(
    inst: Instance,
    decode_batch: float = 0.0,
    decode_context: float = 0.0,
    prefill_seqs: float = 0.0,
    prefill_new: float = 0.0,
    prefill_cached: float = 0.0,
) -> PassTime:
    """One forward pass that carries `decode_batch` decode tokens (each at `decode_context`) and
    `prefill_seqs` prefill chunks of `prefill_new` tokens on `prefill_cached` cached ones
    (continuous batching with chunked prefill: weights are streamed once for all of them)."""
    m = inst.model
    gemm, attn, kv = _prefill_work(inst, prefill_seqs, prefill_new, prefill_cached)
    if decode_batch > 0:
        gemm += arch.weight_flops_per_token(m) * decode_batch
        attn += float(arch.attention_flops_per_token(m, decode_context, "decode")) * decode_batch
        kv += (
            float(arch.attention_bytes_per_token(m, decode_context))
            * decode_batch
            * inst.kv_replication
        )
    return _pass(inst, decode_batch + prefill_seqs * prefill_new, gemm, attn, kv)


def chunk_time(inst: Instance, new_tokens: float, context_before: float) -> PassTime:
    """One prefill/extend pass of `new_tokens` tokens on top of `context_before` cached ones."""
    return mixed_pass(inst, prefill_seqs=1.0, prefill_new=new_tokens, prefill_cached=context_before)


def prefill_time(
    inst: Instance, new_tokens: float, cached_tokens: float = 0.0, chunk: int = 8192
) -> PassTime:
    """A request's prefill run alone, in chunks of `chunk` tokens; the short last chunk is slow."""
    total = PassTime(0.0, 0.0, 0.0, 0.0, inst.mode)
    done = 0.0
    new_tokens = float(new_tokens)
    while done < new_tokens - 1e-9:
        m = min(chunk, new_tokens - done)
        total = total + chunk_time(inst, m, cached_tokens + done)
        done += m
    return total


def batch_prefill_time(
    inst: Instance, batch: int, new_tokens: float, cached_tokens: float = 0.0, chunk: int = 8192
) -> PassTime:
    """`batch` requests, each `new_tokens` long after `cached_tokens` cached, prefilled together
    with a `chunk`-token budget per pass: short prompts share a pass, long ones are chunked."""
    batch = max(int(batch), 1)
    new_tokens = float(new_tokens)
    if new_tokens >= chunk:
        return prefill_time(inst, new_tokens, cached_tokens, chunk).scaled(batch)
    per_pass = max(1, int(chunk // max(new_tokens, 1.0)))
    full, rest = divmod(batch, per_pass)
    total = mixed_pass(
        inst, prefill_seqs=per_pass, prefill_new=new_tokens, prefill_cached=cached_tokens
    ).scaled(full)
    if rest:
        total = total + mixed_pass(
            inst, prefill_seqs=rest, prefill_new=new_tokens, prefill_cached=cached_tokens
        )
    return total


def extend_time(inst: Instance, k_tokens: float, context: float) -> PassTime:
    """MD recomputing the KV of k relay-generated tokens on top of a cached context (the handoff):
    a prefill of k tokens over a cached `context`. Small k streams all weights and the cached KV
    for few FLOPs, so it is memory-bound and costs about one decode step."""
    return chunk_time(inst, k_tokens, context)


def decode_step(inst: Instance, batch: float, context: float | np.ndarray) -> PassTime:
    """One decode step of `batch` requests at mean context `context` (or one context per request)."""
    m = inst.model
    ctx = (
        np.broadcast_to(np.asarray(context, dtype=float), (max(int(round(batch)), 1),))
        if np.ndim(context) == 0
        else np.asarray(context, dtype=float)
    )
    b = float(batch) if np.ndim(context) == 0 else float(len(ctx))
    scale = b / len(ctx)
    gemm = arch.weight_flops_per_token(m) * b
    attn = float(np.sum(arch.attention_flops_per_token(m, ctx, "decode"))) * scale
    kv_read = float(np.sum(arch.attention_bytes_per_token(m, ctx))) * scale * inst.kv_replication
    return _pass(inst, b, gemm, attn, kv_read)


def decode_throughput(inst: Instance, batch: float, context: float) -> float:
    """Output tokens/s of the whole instance decoding `batch` requests at `context`."""
    return float(batch) / decode_step(inst, batch, context).total_s


def max_batch_for_tpot(inst: Instance, context: float, tpot_s: float) -> tuple[int, float]:
    """Largest batch whose step meets `tpot_s` and whose KV fits; (batch, step seconds). (0, t1) if none."""
    cap = inst.max_batch(context)
    t1 = decode_step(inst, 1, context).total_s
    if cap < 1 or t1 > tpot_s:
        return 0, t1
    lo, hi = 1, cap
    if decode_step(inst, hi, context).total_s <= tpot_s:
        return hi, decode_step(inst, hi, context).total_s
    while hi - lo > 1:  # step time is monotone in batch: bisect
        mid = (lo + hi) // 2
        if decode_step(inst, mid, context).total_s <= tpot_s:
            lo = mid
        else:
            hi = mid
    return lo, decode_step(inst, lo, context).total_s
