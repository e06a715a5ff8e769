"""`roofline.mixed_pass` of one running decode batch joined to one extend chunk, for many chunk
lengths at once: what the handoff's price (perf/handoff.py) asks for every relay-token count
a sizing search meets (hundreds per running batch on the default, each a scalar pass before).

The same equations as roofline.py in the same order, on numpy arrays: elementwise IEEE
arithmetic, so each entry is the scalar pass's float bit for bit (tests/unit/perf/
test_pass_batch.py pins it). Powers of a float go through Python's own `**` and the
per-sequence attention FLOPs through layers.prefill_attention_flops itself (scalar: its
branches pick a form per length). Single-batch overlap is not written here: `supported` says
when to take the scalar pass instead."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pdd_plan.perf import comm, layers, moe_terms, roofline
from pdd_plan.perf.instance import Instance


def supported(inst: Instance) -> bool:
    """Whether `joined_totals` mirrors the scalar pass on `inst` (no single-batch overlap)."""
    return not inst.single_batch_overlap


def joined_totals(
    inst: Instance, batch: float, decode_context: float, new: np.ndarray, cached: float
) -> tuple[np.ndarray, np.ndarray]:
    """(`roofline.mixed_pass(inst, batch, decode_context, 1.0, n, cached).total_s`, the chunk's
    attention FLOPs) per entry n of `new` (each > 0)."""
    n: Any = np.asarray(new, dtype=float)  # the Work's fields hold arrays here
    m = inst.model
    pairs = [layers.prefill_attention_flops(m, x, cached) for x in n.tolist()]
    attn: Any = np.array([p[0] for p in pairs], dtype=float)
    expand: Any = np.array([p[1] for p in pairs], dtype=float)
    # roofline._prefill_work at one sequence (1.0 * x is x; x + 0.0 is x)
    per, routed = 2.0 * inst.params.active, 2.0 * inst.params.routed_active
    head: Any = 2.0 * inst.params.lm_head_matmul * np.maximum(n - 1.0, 0.0)
    kv_read = float(layers.kv_bytes(m, cached))
    kv_write = np.asarray(layers.kv_bytes(m, cached + n), dtype=float) - kv_read
    kv: Any = (kv_read + kv_write) * inst.kv_replication
    w = roofline.Work(n, routed * n, (per - routed) * n + expand, attn, kv, 1.0, head)
    if batch > 0:
        d_attn = float(layers.attention_flops_per_token(m, decode_context, "decode")) * batch
        d_kv = float(layers.attention_bytes_per_token(m, decode_context)) * batch
        w = w + roofline._decode_work(inst, batch, d_attn, d_kv)
    return _pass_total(inst, w, "decode" if batch > 0 else "prefill"), attn


def _imbalance(inst: Instance, tokens: Any) -> Any:
    """moe_terms.expert_imbalance per entry of `tokens` (each > 0)."""
    if inst.expert_load is not None:
        return float(inst.expert_load)
    moe = inst.model.ffn.moe
    if moe is None or inst.ep <= 1:
        return 1.0
    ep, copies = inst.ep, tokens * moe.experts_per_token
    if copies.min() <= 0:  # statistical_imbalance's guard, entry by entry
        return np.array([moe_terms.expert_imbalance(inst, t) for t in tokens.tolist()])
    stat = 1.0 + np.sqrt(2.0 * math.log(ep) / (copies / ep))
    return inst.expert_imbalance * stat


def _a2a(inst: Instance, tokens: Any, phase: str, imbalance: Any) -> Any:
    """comm.a2a_seconds per entry of `tokens`."""
    nvl_b, rdma_b = comm.a2a_bytes(inst, tokens, phase)
    if np.isscalar(nvl_b) and nvl_b == 0.0 and rdma_b == 0.0:
        return 0.0
    nvl_bw, rdma_bw = comm.a2a_bandwidths(inst, phase)
    return imbalance * np.maximum(nvl_b / nvl_bw, rdma_b / rdma_bw)


def _touched(inst: Instance, k: int, tokens: Any) -> np.ndarray:
    """moe_terms.expected_experts_touched per entry (Python's `**`, as the scalar)."""
    e = inst.expert_slots
    base = 1.0 - k / e
    return np.array([e * (1.0 - base**t) if t > 0 else 0.0 for t in tokens.tolist()])


def _kernels(inst: Instance, w: roofline.Work, imbalance: Any) -> tuple:
    """roofline._kernels per entry."""
    g, e, n = inst.gpu, inst.efficiency, inst.n_gpus
    rate = n * g.peak_flops(inst.compute_dtype) * e.mfu
    rate_routed = rate * g.peak_flops(inst.expert_dtype) / g.peak_flops(inst.compute_dtype)
    a_mfu, a_mbu = moe_terms.attention_fractions(inst.model) or (e.mfu, e.mbu)
    attn_rate = n * g.peak_flops(inst.model.kv_cache.dtype) * a_mfu
    bw = n * g.memory.hbm_tbps * 1e12 * e.mbu
    attn_bw = n * g.memory.hbm_tbps * 1e12 * a_mbu
    other = w.gemm_other - w.head_skipped
    b_other, _ = roofline._weight_bytes_split(inst, 1.0)  # the dense part: not by tokens
    moe = inst.model.ffn.moe
    b_routed: Any = np.zeros_like(w.tokens)
    if moe is not None:
        touched = _touched(inst, moe.experts_per_token, w.tokens)
        b_routed = inst.params.moe_layers * touched * inst.weights["expert_bytes"]
    c_o, m_o = other / rate, b_other / bw
    c_r, m_r = w.gemm_routed * imbalance / rate_routed, b_routed / bw
    ca, ma = w.attn / attn_rate, w.kv / attn_bw
    t_o = np.asarray(moe_terms.kernel_seconds(c_o, m_o), dtype=float)
    t_r = np.asarray(moe_terms.kernel_seconds(c_r, m_r), dtype=float)
    t_a = np.maximum(ca, ma)
    rates = (_per(t_o, other), _per(t_r, w.gemm_routed), t_a)
    cb: Any = 0.0
    mb: Any = 0.0
    for c, mem, t in ((c_o, m_o, t_o), (c_r, m_r, t_r), (ca, ma, t_a)):
        on_c = (c >= mem) & (c > 0)
        cb = cb + np.where(on_c, t, 0.0)
        mb = mb + np.where(on_c, 0.0, t)
    return c_o + c_r + ca, m_o + m_r + ma, cb, mb, rates


def _per(t: np.ndarray, flops: Any) -> np.ndarray:
    """t / flops where flops > 0, else 0."""
    f = np.broadcast_to(np.asarray(flops, dtype=float), t.shape)
    return np.divide(t, f, out=np.zeros_like(t), where=f > 0)


def _covers(inst: Instance, w: roofline.Work, rates: tuple) -> dict[str, Any]:
    """overlap.cover_seconds per entry."""
    s_other, s_routed, t_attn = rates
    m, p = inst.model, inst.params
    moe_share = p.moe_layers / m.num_layers
    o = layers.output_projection_params(m)
    tokens = w.tokens
    expand = np.maximum(w.gemm_other - 2.0 * (p.active - p.routed_active) * tokens, 0.0)
    prep = (2.0 * (p.attention - o) * tokens + expand) * s_other * moe_share
    core = t_attn * moe_share + (2.0 * o * tokens * moe_share + 2.0 * p.router * tokens) * s_other
    routed = w.gemm_routed * s_routed
    mats = 3.0 if m.ffn.gated else 2.0
    return {
        "attention_prep": prep,
        "attention_core": core,
        "attention": prep + core,
        "shared_experts": 2.0 * p.shared_experts * tokens * s_other,
        "routed_experts": routed,
        "routed_down": routed / mats,
    }


def _exposed_two_batch(dispatch: Any, combine: Any, covers: dict, phase: str) -> Any:
    """overlap.exposed_two_batch per entry."""
    tbo = comm.serving().two_batch_overlap
    hides = tbo.prefill if phase == "prefill" else tbo.decode
    total = {"dispatch": dispatch, "combine": combine}
    n = {k: sum(h.comm == k for h in hides) for k in total}
    s = comm.sm_fraction(phase)
    out: Any = 0.0
    for h in hides:
        k = n[h.comm]
        t, hidden_by = total[h.comm] / k, sum(covers[c] for c in h.cover) / k
        out = out + np.where(t > 0, np.maximum(s * t, t - hidden_by), 0.0)
    return out


def _pass_total(inst: Instance, w: roofline.Work, phase: str) -> Any:
    """roofline._pass(...).total_s per entry (no single-batch overlap)."""
    e, tokens = inst.efficiency, np.asarray(w.tokens)
    imbalance = _imbalance(inst, w.tokens)
    a2a = _a2a(inst, w.tokens, phase, imbalance)
    a2a = np.where(np.greater(a2a, 0), a2a + moe_terms.deepep_fixed_seconds(inst, phase), a2a)
    ar = comm.allreduce_seconds(inst, w.tokens) + moe_terms.allreduce_fixed_seconds(inst)
    floor = moe_terms.kernel_floor_seconds(inst)
    _, _, cb, mb, rates = _kernels(inst, w, imbalance)
    mb = mb + floor
    over = e.step_overhead_ms / 1e3 + moe_terms.step_cpu_seconds(inst, w.requests)
    plain = cb + mb + ((a2a + ar) - 0.0) + over
    plain = np.broadcast_to(plain, tokens.shape)
    if not inst.tbo:
        return plain
    dispatch = a2a * comm.dispatch_share(inst)
    h = w.half()
    _, _, cb, mb, rates = _kernels(inst, h, _imbalance(inst, h.tokens))
    mb = mb + floor
    cb, mb = 2.0 * cb, 2.0 * mb
    covers = {k: 2.0 * v for k, v in _covers(inst, h, rates).items()}
    shown = _exposed_two_batch(dispatch, a2a - dispatch, covers, phase)
    tbo = cb + mb + ((a2a + ar) - (a2a - shown)) + over
    use_tbo = np.greater(a2a, 0)
    if inst.two_batch_overlap is None:
        use_tbo = use_tbo & ~(plain <= tbo)
    return np.where(use_tbo, tbo, plain)
