"""Roofline timing of forward passes: prefill chunks, decode steps, extend (DESIGN §4.1).

time(pass) = max(FLOPs / (peak * mfu * m/(m + m_half)), bytes / (bw * mbu)) + comm + overhead
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from . import arch
from .instance import Instance


@dataclass(frozen=True)
class PassTime:
    compute_s: float
    memory_s: float
    communication_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.communication_s + self.overhead_s

    @property
    def bound(self) -> str:
        parts = {
            "compute": self.compute_s,
            "memory": self.memory_s,
            "communication": self.communication_s,
        }
        return max(parts, key=parts.get)

    def __add__(self, other: PassTime) -> PassTime:
        return PassTime(*(a + b for a, b in zip(asdict(self).values(), asdict(other).values())))

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "total_s": self.total_s}


def expected_experts_touched(tokens: float, num_experts: int, k: int) -> float:
    """Distinct experts (per MoE layer) that `tokens` tokens, each routed to k of E uniformly, touch."""
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - k / num_experts) ** tokens)


def _weight_bytes_read(inst: Instance, tokens: float) -> float:
    """Weight bytes one pass over `tokens` tokens streams from HBM (all GPUs together)."""
    m, w = inst.model, inst.weights
    dense = w["dense"]
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


def _pass(inst: Instance, tokens: float, flops: float, kv_bytes_read: float) -> PassTime:
    g = inst.gpu
    e = g.efficiency
    n = inst.n_gpus
    m_eff = tokens / (tokens + e.chunk_half_tokens)  # small batches/chunks run GEMMs badly
    compute = flops / (n * g.peak_flops(inst.compute_dtype) * e.mfu * m_eff)
    membytes = _weight_bytes_read(inst, tokens) + kv_bytes_read
    memory = membytes / (n * g.memory.hbm_tbps * 1e12 * e.mbu)
    return PassTime(compute, memory, _comm_s(inst, tokens), e.step_overhead_ms / 1e3)


def chunk_time(inst: Instance, new_tokens: float, context_before: float) -> PassTime:
    """One prefill/extend pass of `new_tokens` tokens on top of `context_before` cached ones."""
    m = inst.model
    mid = context_before + new_tokens / 2.0  # causal: the average query sees half the chunk
    flops = (
        arch.weight_flops_per_token(m) * new_tokens
        + float(arch.attention_flops_per_token(m, mid, "prefill")) * new_tokens
    )
    # cached KV is read once per pass (x replication when every TP rank holds the latent)
    kv_read = float(arch.kv_bytes(m, context_before)) * inst.kv_replication
    kv_write = float(arch.kv_bytes(m, context_before + new_tokens)) - float(
        arch.kv_bytes(m, context_before)
    )
    return _pass(inst, new_tokens, flops, kv_read + kv_write * inst.kv_replication)


def prefill_time(
    inst: Instance, new_tokens: float, cached_tokens: float = 0.0, chunk: int = 8192
) -> PassTime:
    """A request's prefill run alone, in chunks of `chunk` tokens; the short last chunk is slow."""
    total = PassTime(0.0, 0.0, 0.0, 0.0)
    done = 0.0
    new_tokens = float(new_tokens)
    while done < new_tokens - 1e-9:
        m = min(chunk, new_tokens - done)
        total = total + chunk_time(inst, m, cached_tokens + done)
        done += m
    return total


def extend_time(inst: Instance, k_tokens: float, context: float) -> PassTime:
    """MD recomputing the KV of k relay-generated tokens on top of a cached context (the handoff)."""
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
    flops = (
        arch.weight_flops_per_token(m) * b
        + float(np.sum(arch.attention_flops_per_token(m, ctx, "decode"))) * scale
    )
    kv_read = float(np.sum(arch.attention_bytes_per_token(m, ctx))) * scale * inst.kv_replication
    return _pass(inst, b, flops, kv_read)


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
