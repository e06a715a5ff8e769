"""Prefill/extend passes, many at once: ``roofline.chunk_time`` and ``prefill_time`` vectorized.

The simulator tabulates thousands of passes per instance (every tail-chunk size at every
context of a table), the planner one prefill per stratum of every pool; one scalar
``chunk_time`` per pass was most of a replay's time. Here the terms that depend on a pass's
tokens only (experts touched, expert imbalance, the all-to-all, the all-reduce, the weight
bytes) come from the scalar functions of ``moe_terms``, ``comm`` and ``roofline``, once per
distinct token count; everything else is numpy over all passes. The arithmetic is ``roofline._prefill_work`` / ``_kernels`` / ``_pass`` and
``overlap``'s, in the same order: ``tests/unit/perf/test_grid.py`` checks this table against
the scalar ``chunk_time`` on a grid (relative difference <= 1e-12), so a change to the perf
model that lands in one and not the other fails there.
"""

from __future__ import annotations

from typing import Any, NamedTuple

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


def _attention(new: np.ndarray, cached: np.ndarray, m) -> tuple[np.ndarray, np.ndarray]:
    """layers.prefill_attention_flops(m, n, c) per pair (n > 0)."""
    mid = cached + new / 2.0
    base = layers.attention_flops_per_token(m, mid, "prefill") * new
    a = m.attention
    if a.kind != "mla":
        return base, np.zeros_like(base)
    expand = 2.0 * a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
    expand = expand * (cached * m.num_layers)
    own = layers.attention_flops_per_token(m, new / 2.0, "prefill") * new
    absorbed = layers.attention_flops_per_token(m, cached, "decode") * new + own
    keep = (cached <= 0) | (base + expand <= absorbed)
    plain = np.where(cached > 0, expand, 0.0)
    return np.where(keep, base, absorbed), np.where(keep, plain, 0.0)


def _per_token(inst: Instance, tokens: np.ndarray, phase: str) -> dict[str, np.ndarray]:
    """The terms of a pass that depend on its tokens only, from the scalar functions, once per
    distinct token count: expert imbalance, the touched experts' and the other weights' bytes
    (also at half the tokens, two-batch overlap's micro-batch), all-to-all and all-reduce
    seconds."""
    uniq, inv = np.unique(tokens, return_inverse=True)
    rows = []
    for t in uniq.tolist():
        one = []
        for x in (t, t / 2):
            dense, experts = roofline._weight_bytes_split(inst, x)
            one += [moe_terms.expert_imbalance(inst, x), experts, dense]
        a2a = comm.a2a_seconds(inst, t, phase, one[0])
        if a2a > 0:  # each dispatch and combine call also pays a fixed latency
            a2a += moe_terms.deepep_fixed_seconds(inst, phase)
        ar = comm.allreduce_seconds(inst, t) + moe_terms.allreduce_fixed_seconds(inst)
        rows.append((*one, a2a, ar))
    cols = np.array(rows, dtype=float).reshape(len(uniq), 8)[inv.ravel()]
    names = ("imb", "wexp", "wdense", "imb_h", "wexp_h", "wdense_h", "a2a", "ar")
    return {k: cols[:, i] for i, k in enumerate(names)}


def _kernels(inst: Instance, tokens, imbalance, wexp, wdense, routed_f, other_f, attn, kv, head):
    """roofline._kernels over arrays: (compute-bound s, memory-bound s, rates)."""
    g, e, n = inst.gpu, inst.efficiency, inst.n_gpus
    rate = n * g.peak_flops(inst.compute_dtype) * e.mfu
    rate_routed = rate * g.peak_flops(inst.expert_dtype) / g.peak_flops(inst.compute_dtype)
    a_mfu, a_mbu = moe_terms.attention_fractions(inst.model) or (e.mfu, e.mbu)
    attn_rate = n * g.peak_flops(inst.model.kv_cache.dtype) * a_mfu
    bw = n * g.memory.hbm_tbps * 1e12 * e.mbu
    attn_bw = n * g.memory.hbm_tbps * 1e12 * a_mbu
    other = other_f - head
    c_o, m_o = other / rate, wdense / bw
    c_r, m_r = routed_f * imbalance / rate_routed, wexp / bw
    ca, ma = attn / attn_rate, kv / attn_bw
    t_o, t_r = moe_terms.kernel_seconds(c_o, m_o), moe_terms.kernel_seconds(c_r, m_r)
    t_a = np.maximum(ca, ma)
    s_other = np.divide(t_o, other, out=np.zeros_like(t_o), where=other > 0)
    s_routed = np.divide(t_r, routed_f, out=np.zeros_like(t_r), where=routed_f > 0)
    rates = (s_other, s_routed, t_a)
    cb: Any = 0.0
    mb: Any = 0.0
    for c, mem, t in ((c_o, m_o, t_o), (c_r, m_r, t_r), (ca, ma, t_a)):
        bound = (c >= mem) & (c > 0)
        cb = cb + np.where(bound, t, 0.0)
        mb = mb + np.where(bound, 0.0, t)
    return cb, mb, rates


def _covers(inst: Instance, tokens, other_f, routed_f, rates) -> dict:
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


def _exposed(t, hidden_by, s: float):
    return np.where(t > 0, np.maximum(s * t, t - hidden_by), 0.0)


def _exposed_two_batch(dispatch_s, combine_s, covers: dict, phase: str):
    tbo = comm.serving().two_batch_overlap
    hides = tbo.prefill if phase == "prefill" else tbo.decode
    total = {"dispatch": dispatch_s, "combine": combine_s}
    n = {k: sum(h.comm == k for h in hides) for k in total}
    s = comm.sm_fraction(phase)
    out = 0.0
    for h in hides:
        k = n[h.comm]
        out = out + _exposed(total[h.comm] / k, sum(covers[c] for c in h.cover) / k, s)
    return out


def _exposed_single_batch(dispatch_s, combine_s, covers: dict, phase: str):
    hide = sum(covers[c] for c in comm.serving().single_batch_overlap.cover_combine)
    return dispatch_s + _exposed(combine_s, hide, comm.sm_fraction(phase))


def _pick(mask, a: PassArrays, b: PassArrays) -> PassArrays:
    return PassArrays(*(np.where(mask, x, y) for x, y in zip(a, b)))


def chunk_pairs(inst: Instance, new_tokens, context_before) -> PassArrays:
    """``roofline.chunk_time(inst, n, c)`` for each pair (n, c) of the two 1-D arrays (n > 0):
    one prefill pass of one sequence, as ``mixed_pass`` composes it."""
    m, p = inst.model, inst.params
    new = np.asarray(new_tokens, dtype=float).ravel()
    before = np.broadcast_to(np.asarray(context_before, dtype=float).ravel(), new.shape)
    tokens = 1.0 * new
    routed_f = 2.0 * p.routed_active * tokens
    attn, expand = _attention(new, before, m)
    other_f = (2.0 * p.active - 2.0 * p.routed_active) * tokens + 1.0 * expand
    head = 2.0 * p.lm_head_matmul * 1.0 * np.maximum(new - 1.0, 0.0)
    kv_read = layers.kv_bytes(m, before)
    kv_write = layers.kv_bytes(m, before + new) - kv_read
    kv = 0.0 + 1.0 * (kv_read + kv_write) * inst.kv_replication
    attn = 0.0 + 1.0 * attn
    return _passes(inst, "prefill", tokens, routed_f, other_f, attn, kv, np.ones_like(new), head)


def _passes(inst: Instance, phase: str, tokens, routed_f, other_f, attn, kv, requests, head):
    """roofline._pass over arrays of one Work field each."""
    e = inst.efficiency
    tt = _per_token(inst, tokens, phase)
    a2a = tt["a2a"]
    full = (tt["imb"], tt["wexp"], tt["wdense"], routed_f, other_f, attn, kv, head)
    floor = moe_terms.kernel_floor_seconds(inst)  # each kernel's fixed time, on top of its work
    cb, mb, rates = _kernels(inst, tokens, *full)
    mb = mb + floor
    uniq, inv = np.unique(requests, return_inverse=True)
    cpu = np.array([moe_terms.step_cpu_seconds(inst, r) for r in uniq.tolist()])[inv.ravel()]
    over = e.step_overhead_ms / 1e3 + cpu
    z = np.zeros_like(tokens)
    plain = PassArrays(cb + z, mb + z, a2a + tt["ar"], z, over + z)
    if not (inst.tbo or inst.single_batch_overlap):
        return plain
    on = a2a > 0  # no all-to-all: nothing to overlap
    dispatch = a2a * comm.dispatch_share(inst)
    if inst.single_batch_overlap:
        covers = _covers(inst, tokens, other_f, routed_f, rates)
        shown = _exposed_single_batch(dispatch, a2a - dispatch, covers, phase)
        return plain._replace(hidden_communication_s=np.where(on, a2a - shown, 0.0))
    h_other, h_routed = other_f / 2, routed_f / 2
    half = (tt["imb_h"], tt["wexp_h"], tt["wdense_h"], h_routed, h_other, attn / 2, kv / 2)
    cb, mb, rates = _kernels(inst, tokens / 2, *half, head / 2)
    mb = mb + floor  # each micro-batch runs every kernel
    covers = _covers(inst, tokens / 2, h_other, h_routed, rates)
    covers = {k: 2.0 * v for k, v in covers.items()}
    shown = _exposed_two_batch(dispatch, a2a - dispatch, covers, phase)
    tbo = PassArrays(2.0 * cb, 2.0 * mb, plain.communication_s, a2a - shown, plain.overhead_s)
    keep = ~on
    if inst.two_batch_overlap is None:  # the engine default: overlap only where it is faster
        keep = keep | (plain.total_s <= tbo.total_s)
    return _pick(keep, plain, tbo)


def chunk_times(inst: Instance, new_tokens, context_before) -> PassArrays:
    """``roofline.chunk_time(inst, n, c)`` for every n of `new_tokens` (rows, each > 0) and c of
    `context_before` (columns): arrays of shape (len(new_tokens), len(context_before))."""
    n = np.asarray(new_tokens, dtype=float).ravel()
    c = np.asarray(context_before, dtype=float).ravel()
    nn, cc = np.meshgrid(n, c, indexing="ij")
    got = chunk_pairs(inst, nn.ravel(), cc.ravel())
    return PassArrays(*(a.reshape(len(n), len(c)) for a in got))


def prefill_times(inst: Instance, new_tokens, cached_tokens, chunk: int) -> np.ndarray:
    """``roofline.prefill_time(inst, n, c, chunk).total_s`` for each pair: every request's
    chunks (``min(chunk, left)`` tokens at its cached context plus what it has done) in one
    ``chunk_pairs`` call, summed per request in chunk order as PassTime sums them."""
    new = np.asarray(new_tokens, dtype=float).ravel()
    cached = np.asarray(cached_tokens, dtype=float).ravel()
    done = np.zeros_like(new)
    steps = []  # (requests still prefilling, their chunk's tokens, its context)
    while True:
        idx = np.flatnonzero(done < new - 1e-9)
        if not idx.size:
            break
        m = np.minimum(chunk, new[idx] - done[idx])
        steps.append((idx, m, cached[idx] + done[idx]))
        done[idx] = done[idx] + m
    if not steps:
        return np.zeros_like(new)
    parts = chunk_pairs(
        inst, np.concatenate([s[1] for s in steps]), np.concatenate([s[2] for s in steps])
    )
    total = [np.zeros_like(new) for _ in parts]
    at = 0
    for idx, _m, _c in steps:
        for acc, part in zip(total, parts):
            acc[idx] = acc[idx] + part[at : at + len(idx)]
        at += len(idx)
    return PassArrays(*total).total_s


def decode_steps(inst: Instance, batches, context: float) -> np.ndarray:
    """``roofline.decode_step(inst, b, context).total_s`` for every batch b (> 0) of `batches`,
    every request at `context`: the per-request attention sums as decode_step sums them."""
    m, p = inst.model, inst.params
    b = np.asarray(batches, dtype=float).ravel()
    f1 = layers.attention_flops_per_token(m, np.asarray(float(context)), "decode")
    k1 = layers.attention_bytes_per_token(m, np.asarray(float(context)))
    attn, kv = np.empty_like(b), np.empty_like(b)
    for i, x in enumerate(b.tolist()):
        n = max(int(round(x)), 1)
        attn[i] = float(np.sum(np.broadcast_to(f1, (n,)))) * (x / n)
        kv[i] = float(np.sum(np.broadcast_to(k1, (n,)))) * (x / n)
    routed_f = 2.0 * p.routed_active * b + 0.0
    other_f = (2.0 * p.active - 2.0 * p.routed_active) * b + 0.0
    kv = 0.0 + kv * inst.kv_replication
    z = np.zeros_like(b)
    return _passes(inst, "decode", b + 0.0, routed_f, other_f, 0.0 + attn, kv, 0.0 + b, z).total_s
