"""Prefill/extend passes over a grid of contexts: ``roofline.chunk_time`` vectorized.

The simulator tabulates thousands of passes per instance (every tail-chunk size at every
context of a table); one scalar ``chunk_time`` per point was most of a replay's time. Here the
terms that depend on a pass's tokens only (experts touched, expert imbalance, the all-to-all,
the all-reduce, the weight bytes, the step overhead) come from the scalar functions of
``moe_terms``, ``comm`` and ``roofline``, once per token count; what depends on the context
(attention FLOPs, KV bytes, MLA's expansion of a cached prefix) is one numpy expression over
all contexts. The arithmetic is ``roofline._prefill_work`` / ``_kernels`` / ``_pass`` and
``overlap``'s, in the same order: ``tests/unit/perf/test_grid.py`` checks this table against
the scalar ``chunk_time`` on a grid (relative difference <= 1e-12), so a change to the perf
model that lands in one and not the other fails there.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pdd_plan.perf import comm, layers, moe_terms, roofline
from pdd_plan.perf.instance import Instance


class PassArrays(NamedTuple):
    """PassTime's additive parts, one array each: compute-bound, memory-bound, communication,
    hidden communication and overhead seconds."""

    compute_bound_s: np.ndarray
    memory_bound_s: np.ndarray
    communication_s: np.ndarray
    hidden_communication_s: np.ndarray
    overhead_s: np.ndarray

    def __add__(self, o: PassArrays) -> PassArrays:  # type: ignore[override]
        """PassTime.__add__: part by part."""
        return PassArrays(*(a + b for a, b in zip(self, o)))

    @property
    def total_s(self) -> np.ndarray:
        """PassTime.total_s, same order of operations."""
        cb, mb, c, h, over = self
        return cb + mb + (c - h) + over


def _attention(inst: Instance, new: float, cached: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """layers.prefill_attention_flops(m, new, c) for every c of `cached` (new > 0)."""
    m = inst.model
    mid = cached + new / 2.0
    base = layers.attention_flops_per_token(m, mid, "prefill") * new
    a = m.attention
    zero = np.zeros_like(cached)
    if a.kind != "mla":
        return base, zero
    expand = 2.0 * a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
    expand = expand * (cached * m.num_layers)
    own = float(layers.attention_flops_per_token(m, new / 2.0, "prefill")) * new
    absorbed = layers.attention_flops_per_token(m, cached, "decode") * new + own
    keep = (cached <= 0) | (base + expand <= absorbed)
    plain = np.where(cached > 0, expand, 0.0)
    return np.where(keep, base, absorbed), np.where(keep, plain, 0.0)


def _kernels(inst: Instance, tokens: float, routed_f: float, other_f, attn, kv, head):
    """roofline._kernels over arrays: (compute-bound s, memory-bound s, rates)."""
    g, e, n = inst.gpu, inst.efficiency, inst.n_gpus
    rate = n * g.peak_flops(inst.compute_dtype) * e.mfu
    a_mfu, a_mbu = moe_terms.attention_fractions(inst.model) or (e.mfu, e.mbu)
    attn_rate = n * g.peak_flops(inst.model.kv_cache.dtype) * a_mfu
    bw = n * g.memory.hbm_tbps * 1e12 * e.mbu
    attn_bw = n * g.memory.hbm_tbps * 1e12 * a_mbu
    half = e.chunk_half_tokens
    m_other = tokens / inst.dp
    moe = inst.model.ffn.moe
    m_routed = 1.0
    if moe is not None and tokens > 0:
        touched = roofline.expected_experts_touched(
            tokens, inst.expert_slots, moe.experts_per_token
        )
        m_routed = tokens * moe.experts_per_token / touched
    imbalance = moe_terms.expert_imbalance(inst, tokens)
    routed = routed_f * imbalance
    other = other_f - head
    s_other = (m_other + half) / (rate * m_other) if m_other > 0 else 0.0
    s_routed = imbalance * (m_routed + moe_terms.grouped_half()) / (rate * m_routed)
    cg = other * s_other + routed_f * s_routed
    ca = attn / attn_rate
    mg, ma = roofline._weight_bytes_read(inst, tokens) / bw, kv / attn_bw
    pos = cg > 0
    stretch = np.where(pos, np.maximum(cg, mg) / np.where(pos, cg, 1.0), 1.0)
    rates = (s_other * stretch, s_routed * stretch, np.maximum(ca, ma))
    cb = mb = 0.0
    for c, mem, ideal in ((cg, mg, (other + routed) / rate), (ca, ma, attn / attn_rate)):
        t = np.maximum(c, mem)
        bound = (ideal >= mem) & (ideal > 0)
        cb = cb + np.where(bound, t, 0.0)
        mb = mb + np.where(bound, 0.0, t)
    return cb, mb, rates


def _covers(inst: Instance, tokens: float, other_f, routed_f: float, rates) -> dict:
    """overlap.cover_seconds over arrays."""
    s_other, s_routed, t_attn = rates
    m, p = inst.model, inst.params
    moe_share = p.moe_layers / m.num_layers
    o = layers.output_projection_params(m)
    expand = np.maximum(other_f - 2.0 * (p.active - p.routed_active) * tokens, 0.0)
    prep = (2.0 * (p.attention - o) * tokens + expand) * s_other * moe_share
    core = t_attn * moe_share + (2.0 * o * tokens * moe_share + 2.0 * p.router * tokens) * s_other
    routed = routed_f * s_routed
    mats = 3.0 if m.ffn.gated else 2.0
    return {
        "attention_prep": prep,
        "attention_core": core,
        "attention": prep + core,
        "shared_experts": 2.0 * p.shared_experts * tokens * s_other,
        "routed_experts": routed,
        "routed_down": routed / mats,
    }


def _exposed(t: float, hidden_by, s: float):
    return np.maximum(s * t, t - hidden_by) if t > 0 else 0.0


def _exposed_two_batch(dispatch_s: float, combine_s: float, covers: dict, phase: str):
    hides = comm.serving().two_batch_overlap
    hides = hides.prefill if phase == "prefill" else hides.decode
    total = {"dispatch": dispatch_s, "combine": combine_s}
    n = {k: sum(h.comm == k for h in hides) for k in total}
    s = comm.sm_fraction(phase)
    out = 0.0
    for h in hides:
        k = n[h.comm]
        out = out + _exposed(total[h.comm] / k, sum(covers[c] for c in h.cover) / k, s)
    return out


def _exposed_single_batch(dispatch_s: float, combine_s: float, covers: dict, phase: str):
    hide = sum(covers[c] for c in comm.serving().single_batch_overlap.cover_combine)
    return dispatch_s + _exposed(combine_s, hide, comm.sm_fraction(phase))


def _row(inst: Instance, new: float, before: np.ndarray) -> PassArrays:
    """chunk_time(inst, new, c) for every c of `before`: one prefill pass of one sequence."""
    m, p, e = inst.model, inst.params, inst.efficiency
    shape = before.shape
    tokens = 1.0 * new
    routed_f = 2.0 * p.routed_active * tokens
    attn, expand = _attention(inst, new, before)
    other_f = (2.0 * p.active - 2.0 * p.routed_active) * tokens + 1.0 * expand
    head = 2.0 * p.lm_head_matmul * 1.0 * max(new - 1.0, 0.0)
    kv_read = layers.kv_bytes(m, before)
    kv_write = layers.kv_bytes(m, before + new) - kv_read
    kv = 1.0 * (kv_read + kv_write) * inst.kv_replication
    attn = 0.0 + 1.0 * attn
    kv = 0.0 + kv
    phase = "prefill"
    a2a = comm.a2a_seconds(inst, tokens, phase, moe_terms.expert_imbalance(inst, tokens))
    if a2a > 0:
        a2a += moe_terms.deepep_fixed_seconds(inst, phase)
    ar = comm.allreduce_seconds(inst, tokens)
    cb, mb, rates = _kernels(inst, tokens, routed_f, other_f, attn, kv, head)
    over = e.step_overhead_ms / 1e3 + moe_terms.step_cpu_seconds(inst, 1.0)

    def full(*parts) -> PassArrays:
        return PassArrays(*(np.broadcast_to(np.asarray(x, dtype=float), shape) for x in parts))

    plain = full(cb, mb, a2a + ar, 0.0, over)
    if a2a <= 0 or not (inst.tbo or inst.single_batch_overlap):
        return plain
    dispatch = a2a * comm.dispatch_share(inst)
    if inst.single_batch_overlap:
        covers = _covers(inst, tokens, other_f, routed_f, rates)
        shown = _exposed_single_batch(dispatch, a2a - dispatch, covers, phase)
        return full(cb, mb, a2a + ar, a2a - shown, over)
    h_other, h_routed = other_f / 2, routed_f / 2
    cb, mb, rates = _kernels(inst, tokens / 2, h_routed, h_other, attn / 2, kv / 2, head / 2)
    covers = _covers(inst, tokens / 2, h_other, h_routed, rates)
    covers = {k: 2.0 * v for k, v in covers.items()}
    shown = _exposed_two_batch(dispatch, a2a - dispatch, covers, phase)
    tbo = full(2.0 * cb, 2.0 * mb, a2a + ar, a2a - shown, over)
    if inst.two_batch_overlap is None:
        keep = plain.total_s <= tbo.total_s
        return PassArrays(*(np.where(keep, a, b) for a, b in zip(plain, tbo)))
    return tbo


def chunk_times(inst: Instance, new_tokens, context_before) -> PassArrays:
    """``roofline.chunk_time(inst, n, c)`` for every n of `new_tokens` (rows, each > 0) and c of
    `context_before` (columns): arrays of shape (len(new_tokens), len(context_before))."""
    c = np.asarray(context_before, dtype=float).ravel()
    rows = [_row(inst, float(n), c) for n in np.asarray(new_tokens, dtype=float).ravel()]
    return PassArrays(*(np.stack(parts) for parts in zip(*rows)))
