"""Architecture arithmetic: parameters, weight bytes, KV bytes and FLOPs, computed from a profile.

Nothing here is typed in per model: every figure follows from the layer shapes in the
model profile (hardware.md §4 gives the formulas these reproduce).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema.model import ModelProfile

# Bytes per stored element. FP4 (e2m1) carries one ue8m0 scale per 32 values.
DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5 + 1.0 / 32.0}
# FP8 block-scale overhead (one fp32 scale per 128x128 block) is < 0.03%: ignored.


@dataclass(frozen=True)
class ParamCounts:
    attention: float  # all layers
    dense_ffn: float
    routed_experts: float  # all routed experts, all layers
    routed_active: float  # routed experts one token touches, all layers
    shared_experts: float
    router: float
    embedding: float
    lm_head: float
    expert_params: float  # parameters of one routed expert (one layer)
    moe_layers: int
    tied_embeddings: bool = False  # the LM head multiplies by the embedding table

    @property
    def lm_head_matmul(self) -> float:
        """Parameters of the LM-head matmul (the embedding table when tied)."""
        return self.embedding if self.tied_embeddings else self.lm_head

    @property
    def total(self) -> float:
        return (
            self.attention
            + self.dense_ffn
            + self.routed_experts
            + self.shared_experts
            + self.router
            + self.embedding
            + self.lm_head
        )

    @property
    def active(self) -> float:
        """Parameters a token multiplies by (excluding the embedding lookup)."""
        return (
            self.attention
            + self.dense_ffn
            + self.routed_active
            + self.shared_experts
            + self.router
            + self.lm_head_matmul
        )

    @property
    def dense_weights(self) -> float:
        """Everything but routed experts: read on every forward pass."""
        return self.total - self.routed_experts


def _attention_params_per_layer(m: ModelProfile, layer: int) -> float:
    a, h = m.attention, m.hidden_size
    if a.kind == "gqa":
        return (
            h * a.num_heads * a.head_dim
            + 2 * h * a.num_kv_heads * a.head_dim
            + a.num_heads * a.head_dim * h
        )
    if a.kind in ("mla", "dsa"):
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (
            h * a.q_lora_rank + a.q_lora_rank * a.num_heads * qk
            if a.q_lora_rank
            else h * a.num_heads * qk
        )
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim)
        kv_b = a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
        o = a.num_heads * a.v_head_dim * h
        idx = 0.0
        if a.kind == "dsa":
            qsrc = a.q_lora_rank or h
            idx = (
                qsrc * a.index_n_heads * a.index_head_dim
                + h * a.index_head_dim
                + h * a.index_n_heads
            )
        return q + kv_a + kv_b + o + idx
    # compressed (DeepSeek-V4): low-rank q, one shared KV head, grouped low-rank output
    q = (
        h * a.q_lora_rank + a.q_lora_rank * a.num_heads * a.head_dim
        if a.q_lora_rank
        else h * a.num_heads * a.head_dim
    )
    kv = h * a.num_kv_heads * a.head_dim
    if a.o_groups and a.o_lora_rank:
        o = a.num_heads * a.head_dim * a.o_lora_rank + a.o_groups * a.o_lora_rank * h
    else:
        o = a.num_heads * a.head_dim * h
    idx = 0.0
    if a.compress_ratios[layer] == a.csa_compress_ratio:  # CSA layers carry the lightning indexer
        qsrc = a.q_lora_rank or h
        idx = qsrc * a.index_n_heads * a.index_head_dim + h * a.index_head_dim + h * a.index_n_heads
    return q + kv + o + idx


def output_projection_params(m: ModelProfile) -> float:
    """Parameters of the attention output projections, all layers (the part of the attention
    weights that runs after the attention kernel; two-batch overlap schedules it there)."""
    a, h = m.attention, m.hidden_size
    if a.kind in ("mla", "dsa"):
        return float(m.num_layers * a.num_heads * a.v_head_dim * h)
    if a.kind == "compressed" and a.o_groups and a.o_lora_rank:
        o = a.num_heads * a.head_dim * a.o_lora_rank + a.o_groups * a.o_lora_rank * h
        return float(m.num_layers * o)
    return float(m.num_layers * a.num_heads * a.head_dim * h)


_PARAM_CACHE: dict[tuple, tuple[Any, Any, ParamCounts]] = {}


def param_counts(m: ModelProfile) -> ParamCounts:
    """The model's parameter counts, memoized per architecture: every prefill chunk and decode
    step asks, and summing the layers each time was most of the optimizer's time. The key is
    what the counts read (the attention and FFN sections, by identity, and the sizes), so a
    copy that changes only dtypes (`with_kv_dtype`, a calibration's instance) shares them."""
    key = (id(m.attention), id(m.ffn), m.hidden_size, m.num_layers, m.vocab_size,
           m.tie_word_embeddings)  # fmt: skip
    hit = _PARAM_CACHE.get(key)
    # the entry keeps both sections alive, so their ids are not reused while it stands
    if hit is None or hit[0] is not m.attention or hit[1] is not m.ffn:
        if len(_PARAM_CACHE) > 256:
            _PARAM_CACHE.clear()
        hit = (m.attention, m.ffn, _param_counts(m))
        _PARAM_CACHE[key] = hit
    return hit[2]


def _per_profile(cache: dict, m: ModelProfile, fn):
    """`fn(m)` memoized in `cache` per profile object (bounded to 256 profiles)."""
    hit = cache.get(id(m))
    if hit is None or hit[0] is not m:  # the entry keeps the profile alive: ids are not reused
        if len(cache) > 256:
            cache.clear()
        hit = (m, fn(m))
        cache[id(m)] = hit
    return hit[1]


def _param_counts(m: ModelProfile) -> ParamCounts:
    h, L, f = m.hidden_size, m.num_layers, m.ffn
    attn = sum(_attention_params_per_layer(m, i) for i in range(L))
    if f.moe is None:
        dense_layers, moe_layers = L, 0
    else:
        dense_layers, moe_layers = f.first_dense_layers, L - f.first_dense_layers
    mats = 3 if f.gated else 2  # gate, up, down (SwiGLU) or up, down (GELU)
    dense_ffn = dense_layers * mats * h * (f.intermediate_size or 0)
    expert = 0.0
    routed = routed_active = shared = router = 0.0
    if f.moe is not None:
        expert = 3 * h * f.moe.moe_intermediate_size
        routed = moe_layers * f.moe.num_experts * expert
        routed_active = moe_layers * f.moe.experts_per_token * expert
        shared = moe_layers * f.moe.num_shared_experts * expert
        router = moe_layers * h * f.moe.num_experts
    emb = m.vocab_size * h
    head = 0.0 if m.tie_word_embeddings else m.vocab_size * h
    return ParamCounts(
        attn,
        dense_ffn,
        routed,
        routed_active,
        shared,
        router,
        emb,
        head,
        expert,
        moe_layers,
        m.tie_word_embeddings,
    )


def weight_bytes(m: ModelProfile, dtype: str | None = None) -> dict[str, float]:
    """Checkpoint bytes by part.

    Keys: 'dense' (everything but routed experts, embedding table included), 'experts' (all
    routed experts), 'total', 'expert_bytes' (one routed expert of one layer), 'embedding' (the
    input embedding table: held in memory but only looked up, never streamed by a forward pass)
    and 'streamed_dense' (= dense - embedding: what every forward pass reads).

    `dtype` overrides the linear-layer dtype (and the expert dtype) of the checkpoint; the
    embedding and LM head keep `weights.embedding_dtype` (FP8 checkpoints leave them BF16).
    """
    p = param_counts(m)
    lin = DTYPE_BYTES[dtype or m.weights.dtype]
    exp = DTYPE_BYTES[dtype or m.weights.expert_dtype or m.weights.dtype]
    emb = DTYPE_BYTES[m.weights.embedding_dtype]
    embedding = p.embedding * emb
    dense = (p.attention + p.dense_ffn + p.shared_experts + p.router) * lin
    dense += embedding + p.lm_head * emb  # a tied LM head is the embedding table (lm_head = 0)
    experts = p.routed_experts * exp
    return {
        "dense": dense,
        "experts": experts,
        "total": dense + experts,
        "expert_bytes": p.expert_params * exp,
        "embedding": embedding,
        "streamed_dense": dense - embedding + (embedding if m.tie_word_embeddings else 0.0),
    }


def with_kv_dtype(m: ModelProfile, kv_dtype: str | None) -> ModelProfile:
    """The same model with its KV cache stored as `kv_dtype` (None or unchanged: `m` itself)."""
    if kv_dtype is None or kv_dtype == m.kv_cache.dtype:
        return m
    if kv_dtype not in ("bf16", "fp8"):
        raise InputError(None, "kv_dtype", f"unknown KV dtype '{kv_dtype}'", "use bf16 or fp8")
    kv = m.kv_cache.model_copy(
        update={"dtype": kv_dtype, "source": f"override: {kv_dtype} KV cache (engine setting)"}
    )
    return m.model_copy(update={"kv_cache": kv})


# ---------------------------------------------------------------- KV cache


def _fp8_with_scales(values: int) -> float:
    """Bytes of ``values`` FP8 numbers stored with one fp32 scale per 128 of them."""
    return values + values / 128 * 4


def _v4_row_bytes(m: ModelProfile) -> tuple[float, float]:
    """(compressed KV row, indexer row) bytes as SGLang lays them out for DeepSeek-V4.

    KV row: nope part in FP8, rope part in BF16, an 8-byte scale; indexer key: FP8 plus one
    fp32 scale per 128 values (hardware.md §4.2).
    """
    a = m.attention
    nope = a.head_dim - a.qk_rope_head_dim
    row = nope * 1 + a.qk_rope_head_dim * 2 + 8
    idx = _fp8_with_scales(a.index_head_dim)
    return float(row), float(idx)


def _mla_row_bytes(m: ModelProfile) -> float:
    a = m.attention
    if m.kv_cache.dtype == "bf16":
        return float((a.kv_lora_rank + a.qk_rope_head_dim) * 2)
    # FlashMLA FP8 layout: FP8 latent, one fp32 scale per 128, BF16 rope (656 B for V3)
    return float(_fp8_with_scales(a.kv_lora_rank) + a.qk_rope_head_dim * 2)


_LAYER_KINDS: dict[int, tuple[ModelProfile, tuple[int, int]]] = {}


def _csa_hca_layers(m: ModelProfile) -> tuple[int, int]:
    """How many of the main layers (MTP excluded) are CSA and how many HCA (compressed kind),
    memoized per profile object as param_counts is: every decode step asks three times."""
    return _per_profile(_LAYER_KINDS, m, _count_csa_hca)


def _count_csa_hca(m: ModelProfile) -> tuple[int, int]:
    a = m.attention
    r = np.asarray(a.compress_ratios[: m.num_layers])
    return int(np.sum(r == a.csa_compress_ratio)), int(np.sum(r == a.hca_compress_ratio))


def kv_bytes_per_token(m: ModelProfile) -> float:
    """Asymptotic KV bytes one more context token adds, whole model, one copy."""
    a = m.attention
    if a.kind == "gqa":
        return 2.0 * m.num_layers * a.num_kv_heads * a.head_dim * DTYPE_BYTES[m.kv_cache.dtype]
    if a.kind == "mla":
        return m.num_layers * _mla_row_bytes(m)
    if a.kind == "dsa":
        idx = _fp8_with_scales(a.index_head_dim)  # the indexer's FP8 keys
        return m.num_layers * (_mla_row_bytes(m) + idx)
    row, idx = _v4_row_bytes(m)
    c, h = a.csa_compress_ratio, a.hca_compress_ratio
    csa, hca = _csa_hca_layers(m)
    return csa * (row / c + idx / c) + hca * row / h


def kv_fixed_bytes_per_request(m: ModelProfile) -> float:
    """Per-request state independent of length (a context past the window): DeepSeek-V4's
    sliding window in every layer, plus the profile's `kv_cache.per_request_state_bytes`."""
    a = m.attention
    state = m.kv_cache.per_request_state_bytes
    if a.kind != "compressed":
        return float(state)
    row, _ = _v4_row_bytes(m)
    return float(a.sliding_window * row * m.num_layers + state)


def kv_bytes(m: ModelProfile, tokens: np.ndarray | float) -> np.ndarray | float:
    """KV bytes of a context of `tokens` tokens (vectorized), per docs/model.md:
    per_token * tokens + per-request state. For DeepSeek-V4 the per-request state is the
    sliding window, which holds min(tokens, window) uncompressed rows in every layer; the
    profile's `kv_cache.per_request_state_bytes` (0 unless set) is added whatever the length.
    """
    t = np.asarray(tokens, dtype=float)
    fixed: Any = m.kv_cache.per_request_state_bytes
    if m.attention.kind == "compressed":
        row, _ = _v4_row_bytes(m)
        fixed = fixed + np.minimum(t, m.attention.sliding_window) * row * m.num_layers
    out = kv_bytes_per_token(m) * t + fixed
    return out if out.ndim else float(out)


# ---------------------------------------------------------------- attention work


def attention_flops_per_token(m: ModelProfile, ctx: np.ndarray | float, phase: str) -> np.ndarray:
    """Attention FLOPs for one query token that sees `ctx` tokens (score + value, all layers).

    phase 'prefill' uses the non-absorbed MLA form, 'decode' the weight-absorbed one.
    """
    t = np.asarray(ctx, dtype=float)
    a = m.attention
    L = m.num_layers
    if a.kind == "gqa":
        return 4.0 * a.num_heads * a.head_dim * t * L
    if a.kind in ("mla", "dsa"):
        if phase == "decode":
            per = (
                2 * a.num_heads * (a.kv_lora_rank + a.qk_rope_head_dim)
                + 2 * a.num_heads * a.kv_lora_rank
            )
        else:
            per = (
                2 * a.num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)
                + 2 * a.num_heads * a.v_head_dim
            )
        if a.kind == "mla":
            return per * t * L
        main = per * np.minimum(t, a.index_topk) * L
        return main + 2.0 * a.index_n_heads * a.index_head_dim * t * L
    c, h = a.csa_compress_ratio, a.hca_compress_ratio
    csa, hca = map(float, _csa_hca_layers(m))
    win = np.minimum(t, a.sliding_window)
    per_row = 4.0 * a.num_heads * a.head_dim  # MQA: each query head scores and mixes a 512-d row
    rows = (
        csa * (np.minimum(t / c, a.index_topk) + win) + hca * (t / h + win) + (L - csa - hca) * win
    )
    indexer = csa * 2.0 * a.index_n_heads * a.index_head_dim * (t / c)
    return per_row * rows + indexer


def attention_bytes_per_token(m: ModelProfile, ctx: np.ndarray | float) -> np.ndarray:
    """KV bytes one decode token reads at context `ctx` (sparse kinds read only what they select)."""
    t = np.asarray(ctx, dtype=float)
    a = m.attention
    if a.kind in ("gqa", "mla"):
        return kv_bytes_per_token(m) * t
    if a.kind == "dsa":
        idx = _fp8_with_scales(a.index_head_dim)  # the indexer scores every cached token
        return m.num_layers * (idx * t + _mla_row_bytes(m) * np.minimum(t, a.index_topk))
    row, idx = _v4_row_bytes(m)
    c, h = a.csa_compress_ratio, a.hca_compress_ratio
    csa, hca = map(float, _csa_hca_layers(m))
    win = np.minimum(t, a.sliding_window)
    rows = csa * np.minimum(t / c, a.index_topk) + hca * t / h + m.num_layers * win
    return row * rows + csa * idx * t / c


def prefill_attention_flops(m: ModelProfile, new: float, cached: float) -> tuple[float, float]:
    """(attention FLOPs, extra GEMM FLOPs) of one sequence prefilling `new` tokens on top of
    `cached` ones.

    The attention itself is `new` queries at mean context cached + new/2 (causal). MLA has two
    ways to attend over a cached prefix, and the engine takes the cheaper (SGLang switches
    between MHA-with-expansion and absorbed MLA by the extend/prefix lengths): expand the
    cached latent to per-head K and V (a GEMM of 2 * kv_lora_rank * heads * (qk_nope + v)
    FLOPs per cached token and layer) and attend in the non-absorbed form, or attend in the
    weight-absorbed form (decode's per-token cost) with no expansion. Approximation: both forms
    run the new tokens' own attention non-absorbed. DSA (V3.2) attends sparsely in the absorbed
    form and its indexer scans every cached token (already O(context) per query in
    `attention_flops_per_token`); DeepSeek-V4 attends over compressed rows without expansion.
    """
    if new <= 0:
        return 0.0, 0.0
    mid = cached + new / 2.0
    base = float(attention_flops_per_token(m, mid, "prefill")) * new
    a = m.attention
    if a.kind != "mla" or cached <= 0:
        return base, 0.0
    expand = 2.0 * a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
    expand *= cached * m.num_layers
    # absorbed over the cached part, non-absorbed over the new tokens' own causal part
    own = float(attention_flops_per_token(m, new / 2.0, "prefill")) * new
    absorbed = float(attention_flops_per_token(m, cached, "decode")) * new + own
    if base + expand <= absorbed:
        return base, expand
    return absorbed, 0.0


def weight_flops_per_token(m: ModelProfile) -> float:
    """2 x active parameters (the matmuls a token goes through, LM head included)."""
    return 2.0 * param_counts(m).active
